import ArgumentParser
import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// How one child process went: wall time from spawn to exit, its own peak RSS, its exit.
struct ChildOutcome: Sendable {
    /// Seconds from just before `posix_spawn` to just after `wait4` returned.
    let seconds: Double
    /// The child's peak resident set size (`ru_maxrss` from `wait4`), in bytes.
    let peakRSS: Int64
    /// The exit status, or 128 + the signal number when a signal ended it.
    let status: Int32
    /// What it wrote on stderr (the first 4 KiB).
    let errorOutput: String

    var succeeded: Bool { status == 0 }
}

/// Runs tools as child processes and reads each one's wall time and peak RSS.
///
/// With a launcher (`hot-bench-spawn`, built beside `hot-bench`), the launcher spawns the
/// tool, times it from `posix_spawnp` to `wait4` and reads `ru_maxrss` from `wait4`. On
/// Linux a child's `ru_maxrss` also counts the image it was exec'ed from, so a tool spawned
/// straight from this Swift process would report at least this process's own RSS; from the
/// small launcher it reports its own. Without a launcher the tool is spawned directly and
/// the RSS column carries that floor.
struct ChildProcess: Sendable {
    /// The `hot-bench-spawn` executable, or nil to spawn directly.
    let launcher: String?

    /// Runs `arguments` and waits for it; see ``spawn(_:directory:errorLog:standardOutput:)``.
    func run(
        _ arguments: [String],
        directory: String? = nil,
        errorLog: String,
        standardOutput: String? = nil
    ) throws -> ChildOutcome {
        guard let launcher else {
            return try Self.spawn(arguments, directory: directory, errorLog: errorLog, standardOutput: standardOutput)
        }
        let report = errorLog + ".timing"
        defer { unlink(report) }
        var command = [launcher, "--stdout", standardOutput ?? "/dev/null", "--stderr", errorLog]
        if let directory { command += ["--cwd", directory] }
        command += ["--"] + arguments
        let outer = try Self.spawn(command, errorLog: errorLog, standardOutput: report)
        let fields = Self.readPrefix(of: report, limit: 256).split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard outer.succeeded, fields.count == 3, let nanoseconds = Int64(fields[0]), let peak = Int64(fields[1]),
            let status = Int32(fields[2])
        else {
            throw HotUpdateError(
                .fileSystem,
                "running '\(arguments.joined(separator: " "))' failed: \(outer.errorOutput)",
                subject: arguments.first
            )
        }
        return ChildOutcome(
            seconds: Double(nanoseconds) / 1e9,
            peakRSS: peak,
            status: status,
            errorOutput: status == 0 ? "" : Self.readPrefix(of: errorLog, limit: 4096)
        )
    }

    /// Runs `arguments` (the first one found on `PATH` unless it holds a `/`) and waits for it.
    ///
    /// stdin and stdout are `/dev/null`; stderr goes to `errorLog` (read back, then left for
    /// the caller to reuse). The child gets default dispositions and an empty mask for the
    /// signals the benchmark itself handles.
    ///
    /// - Parameters:
    ///   - arguments: The program and its arguments.
    ///   - directory: The child's working directory, when it is not ours.
    ///   - errorLog: A file path for the child's stderr.
    ///   - standardOutput: A file path for the child's stdout; `/dev/null` when nil.
    /// - Throws: ``HotUpdateError/Code/fileSystem`` when the process cannot be started.
    static func spawn(
        _ arguments: [String],
        directory: String? = nil,
        errorLog: String,
        standardOutput: String? = nil
    ) throws -> ChildOutcome {
        guard let program = arguments.first else {
            throw HotUpdateError(.invalidArgument, "no program to run")
        }
        #if canImport(Darwin)
        var actions: posix_spawn_file_actions_t? = nil
        var attributes: posix_spawnattr_t? = nil
        #else
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(
            &actions,
            1,
            standardOutput ?? "/dev/null",
            O_WRONLY | O_CREAT | O_TRUNC,
            0o600
        )
        posix_spawn_file_actions_addopen(&actions, 2, errorLog, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        if let directory {
            guard let addChdir = addChdirAction else {
                throw HotUpdateError(
                    .unsupported,
                    "this C library cannot set a child's working directory (for '\(program)')"
                )
            }
            _ = addChdir(&actions, directory)
        }

        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGINT, SIGTERM, SIGPIPE, SIGHUP] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
        argv.append(nil)
        defer { for pointer in argv { free(pointer) } }

        var pid = pid_t()
        let start = monotonicSeconds()
        let code = posix_spawnp(&pid, program, &actions, &attributes, argv, environ)
        guard code == 0 else {
            throw HotUpdateError(
                .fileSystem,
                "starting '\(program)' failed: \(String(cString: strerror(code)))",
                subject: program
            )
        }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 {
            guard errno == EINTR else { throw systemError("waiting for", program) }
        }
        let seconds = monotonicSeconds() - start

        #if canImport(Darwin)
        let peak = Int64(usage.ru_maxrss)  // bytes on Darwin
        #else
        let peak = Int64(usage.ru_maxrss) * 1024  // KiB on Linux
        #endif
        let exitStatus: Int32
        if status & 0x7f == 0 {
            exitStatus = (status >> 8) & 0xff
        } else {
            exitStatus = 128 + (status & 0x7f)
        }
        return ChildOutcome(
            seconds: seconds,
            peakRSS: peak,
            status: exitStatus,
            errorOutput: exitStatus == 0 ? "" : readPrefix(of: errorLog, limit: 4096)
        )
    }

    #if canImport(Darwin)
    private typealias AddChdir =
        @convention(c) (
            UnsafeMutablePointer<posix_spawn_file_actions_t?>, UnsafePointer<CChar>
        ) -> Int32
    #else
    private typealias AddChdir =
        @convention(c) (
            UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>
        ) -> Int32
    #endif

    /// `posix_spawn_file_actions_addchdir_np` (glibc 2.29+, macOS 10.15+), looked up at run
    /// time because glibc declares it only under `_GNU_SOURCE`.
    private static let addChdirAction: AddChdir? = {
        #if canImport(Darwin)
        let everywhere = UnsafeMutableRawPointer(bitPattern: -2)  // RTLD_DEFAULT
        #else
        let everywhere = UnsafeMutableRawPointer(bitPattern: 0)  // RTLD_DEFAULT
        #endif
        guard let symbol = dlsym(everywhere, "posix_spawn_file_actions_addchdir_np")
        else { return nil }
        return unsafeBitCast(symbol, to: AddChdir.self)
    }()

    /// Runs a command and returns its stdout (for version strings); nil when it fails.
    static func capture(_ arguments: [String], scratch: String) -> String? {
        let output = scratch + "/capture.out"
        let errors = scratch + "/capture.err"
        defer {
            unlink(output)
            unlink(errors)
        }
        guard let outcome = try? spawn(arguments, errorLog: errors, standardOutput: output), outcome.succeeded else {
            return nil
        }
        let text = readPrefix(of: output, limit: 16_384) + readPrefix(of: errors, limit: 16_384)
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private static func readPrefix(of path: String, limit: Int) -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else { return "" }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: limit)) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}

/// Seconds on the monotonic clock.
func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// Finds `name` on `PATH` (or checks it directly when it contains a `/`).
func findExecutable(_ name: String) -> String? {
    if name.contains("/") { return access(name, X_OK) == 0 ? name : nil }
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    for folder in path.split(separator: ":") where !folder.isEmpty {
        let candidate = folder + "/" + name
        if access(candidate, X_OK) == 0 { return String(candidate) }
    }
    return nil
}

/// The `hot` executable: `given` (a path or a name on `PATH`), else the one beside
/// hot-bench (`HOTUPDATE_DEV=1 swift build -c release --product hot` puts it there),
/// `.build/release/hot`, then `PATH`.
func locateHot(_ given: String?) -> String? {
    if let given { return findExecutable(given) }
    var candidates: [String] = []
    if let executable = Bundle.main.executablePath {
        candidates.append(
            URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent("hot").path
        )
    }
    candidates.append(FileManager.default.currentDirectoryPath + "/.build/release/hot")
    for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    return findExecutable("hot")
}

/// The options of a benchmark that runs `hot` as users do: where to work, which `hot`.
struct HotToolOptions: ParsableArguments {
    @Option(help: "The on-disk work directory (default: the system's temporary directory).")
    var workDir: String?

    @Option(help: "The hot executable (default: beside hot-bench, .build/release/hot, PATH).")
    var hot: String?

    /// The work directory's parent.
    var workParent: String { workDir ?? FileManager.default.temporaryDirectory.path }

    /// The `hot` executable, and a child-process runner that spawns through `hot-bench-spawn`
    /// when it is built beside `hot-bench`.
    func tools() throws -> (hot: String, child: ChildProcess) {
        guard let hot = locateHot(hot), let bench = Bundle.main.executablePath else {
            throw ValidationError(
                "no hot executable: build it (HOTUPDATE_DEV=1 swift build -c release --product hot) or give --hot"
            )
        }
        let launcher = URL(fileURLWithPath: bench).deletingLastPathComponent()
            .appendingPathComponent("hot-bench-spawn").path
        return (hot, ChildProcess(launcher: FileManager.default.isExecutableFile(atPath: launcher) ? launcher : nil))
    }
}
