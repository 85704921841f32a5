#if os(Linux) || os(macOS)
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
        /// How the process ended.
        public var ending: ChildProcess.Ending
        /// The exit status, or 128 plus the signal that ended the process.
        public var status: Int32 { ending.status }
        /// Standard output, bytes.
        public var standardOutput: Data
        /// Standard error, bytes.
        public var standardError: Data
        /// Standard output as UTF-8 text.
        public var stdout: String { String(decoding: standardOutput, as: UTF8.self) }
        /// Standard error as UTF-8 text.
        public var stderr: String { String(decoding: standardError, as: UTF8.self) }

        /// What a process left.
        public init(ending: ChildProcess.Ending, standardOutput: Data, standardError: Data) {
            (self.ending, self.standardOutput, self.standardError) = (ending, standardOutput, standardError)
        }
    }

    /// Runs `executable` (a path, or a name looked up on `PATH`) and returns what it left,
    /// whatever its exit status (a signal's ending is 128 plus the signal).
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

    /// Whether `python3` is on `PATH` and imports `module` (`playwright.async_api`, `pyzipper`),
    /// for a suite that runs only where a tool is installed. Blocks while Python starts.
    public static func pythonImports(_ module: String) -> Bool {
        let child = try? ChildProcess(
            "python3",
            ["-c", "import \(module)"],
            standardOutput: .null,
            standardError: .null
        )
        return child?.waitUntilExit() == .exited(0)
    }

    static func runBlocking(
        _ executable: String,
        _ arguments: [String],
        in directory: URL?,
        stdin: Data?
    ) throws -> Output {
        let child = try ChildProcess(
            executable,
            arguments,
            directory: directory,
            standardInput: stdin == nil ? .null : .pipe,
            standardOutput: .pipe,
            standardError: .pipe
        )
        // Both pipes drained on threads of their own, so a chatty tool never blocks on a full
        // pipe while its input is written.
        let errors = child.standardError.map(ChildProcess.drain)
        let output = child.standardOutput.map(ChildProcess.drain)
        if let stdin { try? child.write(stdin) }
        let ending = child.waitUntilExit()
        return Output(
            ending: ending,
            standardOutput: output?.wait() ?? Data(),
            standardError: errors?.wait() ?? Data()
        )
    }
}
#endif
