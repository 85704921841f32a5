import Foundation
import HotCore

/// Runs a command-line tool (`openssl`, `zip`, `python3`, the `hot` executable) for a test,
/// on a thread of its own: waiting for it never blocks Swift's cooperative executor, which
/// has only as many threads as the machine has cores and which every other test shares.
///
/// ```swift
/// let output = try await Subprocess.check("openssl", ["dgst", "-sha256", "-r", file.path])
/// print(output.stdout)
/// ```
public enum Subprocess {
    /// What a finished process left.
    public struct Output: Sendable, Hashable {
        /// The exit status (or the signal number, when it was killed).
        public var status: Int32
        /// Standard output, bytes.
        public var standardOutput: Data
        /// Standard error, bytes.
        public var standardError: Data
        /// Standard output as UTF-8 text.
        public var stdout: String { String(decoding: standardOutput, as: UTF8.self) }
        /// Standard error as UTF-8 text.
        public var stderr: String { String(decoding: standardError, as: UTF8.self) }
    }

    /// Runs `executable` — a path, or a name looked up on `PATH` — and returns what it left,
    /// whatever its exit status.
    ///
    /// - Parameters:
    ///   - executable: `/usr/bin/zip`, or `zip`.
    ///   - arguments: The arguments.
    ///   - directory: The working directory, if not the test's.
    ///   - stdin: Bytes written to standard input, which is then closed.
    /// - Throws: When the process cannot be started.
    public static func run(
        _ executable: String,
        _ arguments: [String],
        in directory: URL? = nil,
        stdin: Data? = nil
    ) async throws -> Output {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(
                    with: Result { try runBlocking(executable, arguments, in: directory, stdin: stdin) }
                )
            }
            thread.start()
        }
    }

    /// Runs a tool and throws `HotUpdateError.Code.internalInconsistency` with its standard
    /// error when it exits non-zero.
    @discardableResult
    public static func check(
        _ executable: String,
        _ arguments: [String],
        in directory: URL? = nil,
        stdin: Data? = nil
    ) async throws -> Output {
        let output = try await run(executable, arguments, in: directory, stdin: stdin)
        guard output.status == 0 else {
            throw HotUpdateError(
                .internalInconsistency,
                "\(([executable] + arguments).joined(separator: " ")) exited \(output.status): \(output.stderr)"
            )
        }
        return output
    }

    static func runBlocking(
        _ executable: String,
        _ arguments: [String],
        in directory: URL?,
        stdin: Data?
    ) throws -> Output {
        let process = Process()
        if executable.hasPrefix("/") {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
        } else {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [executable] + arguments
        }
        if let directory { process.currentDirectoryURL = directory }
        let output = Pipe()
        let errors = Pipe()
        let input = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(stdin) }
        try? input.fileHandleForWriting.close()
        // Drain standard error on another thread so a chatty tool never blocks on a full pipe.
        let errorData = PipeDrain(errors.fileHandleForReading)
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        process.waitForExit()
        return Output(status: process.terminationStatus, standardOutput: outputData, standardError: errorData.wait())
    }
}

/// Reads a pipe to its end on a thread of its own.
private final class PipeDrain: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var data = Data()

    init(_ handle: FileHandle) {
        Thread { [self] in
            data = handle.readDataToEndOfFile()
            done.signal()
        }.start()
    }

    /// Waits for the end of the pipe and returns everything read.
    func wait() -> Data {
        done.wait()
        return data
    }
}

extension Process {
    /// Waits for the process to end, blocked in the kernel instead of in Foundation's loop.
    ///
    /// On Linux, `waitUntilExit()` runs the calling thread's run loop again and again until
    /// Foundation's own thread has reaped the child; with no source in that run loop each turn
    /// returns at once, so every waiting thread spins a core on `gettid` and `getpid` for as
    /// long as the child runs (a fifth of the CPU time of the test suites went there). This
    /// blocks in `waitid(WNOWAIT)`, which leaves the child for Foundation to reap, then waits
    /// the moment Foundation takes to see it.
    public func waitForExit() {
        #if os(Linux)
        var info = siginfo_t()
        while waitid(P_PID, id_t(processIdentifier), &info, WEXITED | WNOWAIT) != 0, errno == EINTR {}
        #endif
        while isRunning { usleep(500) }
    }
}
