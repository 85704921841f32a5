import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Child processes of tests")
struct ChildProcessTests {
    @Test("pipes both ways, the directory, the environment and the exit status reach the child")
    func pipesDirectoryEnvironment() throws {
        let directory = try ScratchDirectory.make("child-cwd")
        let child = try ChildProcess(
            "sh",
            ["-c", "pwd; echo \"$HOT_CHILD_VALUE\"; cat; echo oops >&2; exit 7"],
            environment: ["HOT_CHILD_VALUE": "from the parent", "PATH": "/usr/bin:/bin"],
            directory: directory,
            standardInput: .pipe,
            standardOutput: .pipe,
            standardError: .pipe
        )
        let output = try #require(child.standardOutput.map(ChildProcess.drain))
        let errors = try #require(child.standardError.map(ChildProcess.drain))
        try child.write(Data("input line\n".utf8))
        #expect(child.waitUntilExit() == .exited(7))
        let lines = String(decoding: output.wait(), as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(lines == [directory.resolvingSymlinksInPath().path, "from the parent", "input line"])
        #expect(String(decoding: errors.wait(), as: UTF8.self) == "oops\n")
        #expect(!child.isRunning)
        #expect(!child.kill(), "a reaped child is never signalled")
    }

    @Test("a missing executable is a typed error naming it")
    func missingExecutable() {
        #expect {
            _ = try ChildProcess("hot-no-such-tool", [])
        } throws: { error in
            (error as? HotUpdateError)?.code == .notFound && "\(error)".contains("hot-no-such-tool")
        }
    }

    @Test("started from a thread that blocks SIGTERM, the child blocks nothing and SIGTERM ends it")
    func cleanSignalState() async throws {
        let child: ChildProcess = try await withCheckedThrowingContinuation { continuation in
            Thread {
                var blocked = sigset_t()
                sigemptyset(&blocked)
                sigaddset(&blocked, SIGTERM)
                sigaddset(&blocked, SIGCHLD)
                pthread_sigmask(SIG_BLOCK, &blocked, nil)
                continuation.resume(
                    with: Result { try ChildProcess("sh", ["-c", "echo up; exec sleep 600"], standardOutput: .pipe) }
                )
            }.start()
        }
        defer {
            child.kill()
            child.waitUntilExit()
        }
        #expect(child.standardOutput.flatMap(ChildProcess.readLine) == "up")
        let status = try String(contentsOfFile: "/proc/\(child.pid)/status", encoding: .utf8)
        let blockedMask = status.split(separator: "\n").first { $0.hasPrefix("SigBlk:") }
        #expect(blockedMask?.split(separator: "\t").last == "0000000000000000", "\(blockedMask ?? "")")
        #expect(child.signal(SIGTERM))
        #expect(await child.exit(within: .seconds(60)) == .signalled(SIGTERM))
    }

    @Test("a descriptor the parent holds without close-on-exec does not reach the child")
    func noInheritedDescriptor() async throws {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        let child = try ChildProcess("sleep", ["600"])
        defer {
            child.kill()
            child.waitUntilExit()
        }
        close(ends[1])
        // The write end's only holder was this process: the read sees the end of the pipe
        // at once. A child holding a copy would keep the read waiting until it exits.
        let readEnd = ends[0]
        // Whether the read saw the end, and whether the child still ran at that moment (read
        // on the reading thread, so a test delayed afterwards does not change it).
        let outcome: (ended: Bool, childRan: Bool) = await withCheckedContinuation { continuation in
            let done = DispatchSemaphore(value: 0)
            Thread {
                var byte: UInt8 = 0
                let count = read(readEnd, &byte, 1)
                let childRan = child.isRunning
                done.signal()
                continuation.resume(returning: (count == 0, childRan))
            }.start()
            // The deadline: a copy in the child is closed by killing it, which ends the read.
            Thread {
                if done.wait(timeout: .now() + 30) == .timedOut { child.kill() }
            }.start()
        }
        close(readEnd)
        #expect(outcome.ended)
        #expect(outcome.childRan, "the read ended because the child was killed, not because no copy was left")
    }

    @Test("processes started from many threads while others open and close descriptors all run")
    func concurrentSpawns() async throws {
        // Foundation's Process.run over-reads /proc/self/fd while descriptors change
        // (swift-corelibs-foundation #5472) and crashes the test process.
        let churn = Locked(true)
        let churners = (0..<2).map { _ in
            Thread {
                while churn.value {
                    let descriptors = (0..<20).map { _ in open("/dev/null", O_RDONLY) }
                    for descriptor in descriptors where descriptor >= 0 { close(descriptor) }
                }
            }
        }
        for thread in churners { thread.start() }
        defer { churn.set(false) }
        try await withThrowingTaskGroup(of: [String].self) { group in
            for worker in 0..<4 {
                group.addTask {
                    var outputs: [String] = []
                    for run in 0..<25 {
                        let output = try await Subprocess.check("echo", ["\(worker)-\(run)"])
                        outputs.append(output.stdout)
                    }
                    return outputs
                }
            }
            var all: [String] = []
            for try await outputs in group { all += outputs }
            #expect(Set(all) == Set((0..<4).flatMap { worker in (0..<25).map { "\(worker)-\($0)\n" } }))
        }
    }
}
