// hot-bench-spawn: runs one command and prints its wall time and peak RSS.
//
//     hot-bench-spawn [--cwd DIR] [--stdout FILE] [--stderr FILE] -- PROGRAM [ARGUMENT...]
//
// Prints one line, "<nanoseconds> <peak RSS in bytes> <status>": the monotonic time
// from just before posix_spawnp to just after wait4 returned, the child's ru_maxrss
// from wait4, and its exit status (128 + N when signal N ended it). Exits 0 when it
// could run the command at all, 127 otherwise (with a message on stderr).
//
// Why a separate, tiny program: on Linux a child's ru_maxrss also counts the memory
// of the process image it was exec'ed from, so children spawned straight from
// hot-bench (a Swift process of some tens of MB) would all report at least that.
// Spawned from this small process, the reading is the tool's own.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int fail(const char *what, int code) {
    fprintf(stderr, "hot-bench-spawn: %s: %s\n", what, strerror(code));
    return 127;
}

int main(int argc, char **argv) {
    const char *cwd = NULL, *out = "/dev/null", *err = NULL;
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) { i++; break; }
        if (i + 1 >= argc) { fprintf(stderr, "hot-bench-spawn: %s needs a value\n", argv[i]); return 127; }
        if (strcmp(argv[i], "--cwd") == 0) cwd = argv[++i];
        else if (strcmp(argv[i], "--stdout") == 0) out = argv[++i];
        else if (strcmp(argv[i], "--stderr") == 0) err = argv[++i];
        else { fprintf(stderr, "hot-bench-spawn: unknown option %s\n", argv[i]); return 127; }
    }
    if (i >= argc) {
        fprintf(stderr, "usage: hot-bench-spawn [--cwd DIR] [--stdout FILE] [--stderr FILE] -- PROGRAM [ARGUMENT...]\n");
        return 127;
    }

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (err) posix_spawn_file_actions_addopen(&actions, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (cwd) posix_spawn_file_actions_addchdir_np(&actions, cwd);

    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGHUP);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

    pid_t pid;
    long long start = now_ns();
    int code = posix_spawnp(&pid, argv[i], &actions, &attributes, argv + i, environ);
    if (code != 0) return fail(argv[i], code);
    int status = 0;
    struct rusage usage;
    while (wait4(pid, &status, 0, &usage) < 0) {
        if (errno != EINTR) return fail("wait4", errno);
    }
    long long elapsed = now_ns() - start;

#ifdef __APPLE__
    long long peak = (long long)usage.ru_maxrss;          // bytes
#else
    long long peak = (long long)usage.ru_maxrss * 1024;   // KiB
#endif
    int result = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    printf("%lld %lld %d\n", elapsed, peak, result);
    return 0;
}
