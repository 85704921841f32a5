#if os(Linux) || os(macOS)
import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
/// `kill(2)`, outside the class whose `kill()` would shadow it.
private func deliver(_ signal: Int32, to pid: pid_t) -> Bool { kill(pid, signal) == 0 }
#endif

/// A child process started with `posix_spawn`: a clean signal state, no descriptor of the
/// parent's but the three it is given, and waits that block in the kernel.
///
/// Tests start tools (`openssl`, `flock`, `python3`) and the built `hot` with it instead of
/// Foundation's `Process`, which on Linux:
/// - lists `/proc/self/fd` to close inherited descriptors, and over-reads its entries while
///   other threads open and close descriptors (swift-corelibs-foundation #5472: the test
///   process crashes inside `Process.run`);
/// - passes on the spawning thread's signal mask (the test runner's threads block `SIGTERM`
///   and `SIGCHLD`, which leaves a child deaf to `SIGTERM` and a shell unable to wait);
/// - spins the waiting thread's run loop in `waitUntilExit()`.
///
/// ```swift
/// let child = try ChildProcess("flock", ["-x", lockFile, "sleep", "600"], standardOutput: .pipe)
/// defer { child.kill() }
/// let ending = child.waitUntilExit()
/// ```
///
/// Every wait happens on the caller's thread; from async code use ``exit()``, which waits on
/// a thread of its own and never blocks Swift's cooperative executor.
public final class ChildProcess: Sendable {
    /// Where one of the child's standard descriptors goes.
    public enum Stream: Sendable, Hashable {
        /// The parent's own descriptor.
        case inherit
        /// `/dev/null`.
        case null
        /// A new pipe; the parent's end is ``ChildProcess/standardInput``,
        /// ``ChildProcess/standardOutput`` or ``ChildProcess/standardError``.
        case pipe
        /// A file, created when missing, appended to or truncated.
        case file(String, append: Bool)
        /// A descriptor of the parent's, duplicated into the child.
        case descriptor(Int32)
        /// Standard output's destination (for standard error only).
        case standardOutput
    }

    /// How a child ended.
    public enum Ending: Sendable, Hashable, CustomStringConvertible {
        /// It exited with this status.
        case exited(Int32)
        /// A signal ended it.
        case signalled(Int32)

        /// `exit 3` or `signal 9`.
        public var description: String {
            switch self {
            case .exited(let status): "exit \(status)"
            case .signalled(let signal): "signal \(signal)"
            }
        }

        /// The exit status, or 128 plus the signal, as a shell reports it.
        public var status: Int32 {
            switch self {
            case .exited(let status): status
            case .signalled(let signal): 128 + signal
            }
        }
    }

    /// The child's process id.
    public let pid: pid_t
    /// The parent's end of the child's standard input, when it is ``Stream/pipe``.
    public let standardInput: FileHandle?
    /// The parent's end of the child's standard output, when it is ``Stream/pipe``.
    public let standardOutput: FileHandle?
    /// The parent's end of the child's standard error, when it is ``Stream/pipe``.
    public let standardError: FileHandle?
    /// The ending, once the child has been reaped. Reaping happens only under this lock,
    /// so the id is never signalled after the kernel may have given it to another process.
    private let ending = Locked<Ending?>(nil)

    /// Starts `executable` (a path, or a name looked up on the child's `PATH`).
    ///
    /// - Parameters:
    ///   - executable: `/usr/bin/flock`, or `flock`.
    ///   - arguments: The arguments, without the program's name.
    ///   - environment: The whole environment; nil for the parent's.
    ///   - directory: The working directory; nil for the parent's.
    ///   - standardInput: Where descriptor 0 comes from: `/dev/null` unless told.
    ///   - standardOutput: Where descriptor 1 goes.
    ///   - standardError: Where descriptor 2 goes.
    /// - Throws: `HotUpdateError.Code.notFound` when the executable is not found,
    ///   `.fileSystem` when a pipe cannot be made or the system refuses the spawn.
    public init(
        _ executable: String,
        _ arguments: [String] = [],
        environment: [String: String]? = nil,
        directory: URL? = nil,
        standardInput: Stream = .null,
        standardOutput: Stream = .inherit,
        standardError: Stream = .inherit
    ) throws {
        let variables = environment ?? ProcessInfo.processInfo.environment
        let path = try Self.locate(executable, path: variables["PATH"])

        #if canImport(Darwin)
        var attributes: posix_spawnattr_t?
        var actions: posix_spawn_file_actions_t?
        #else
        var attributes = posix_spawnattr_t()
        var actions = posix_spawn_file_actions_t()
        #endif
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }

        // No signal blocked, and the ones a tool relies on at their default action.
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM] {
            sigaddset(&defaults, signal)
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        #if canImport(Darwin)
        // Every descriptor not named in the file actions is closed.
        let flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_CLOEXEC_DEFAULT
        #else
        let flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        #endif
        posix_spawnattr_setflags(&attributes, Int16(flags))

        // The parent's ends of pipes, and the child's ends (closed in the parent once spawned).
        var parentEnds: [Int32: Int32] = [:]
        var childEnds: [Int32] = []
        defer { for descriptor in childEnds { close(descriptor) } }
        func closeParentEnds() { for descriptor in parentEnds.values { close(descriptor) } }
        for (target, stream) in [(Int32(0), standardInput), (1, standardOutput), (2, standardError)] {
            switch stream {
            case .inherit:
                break
            case .null:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case .pipe:
                var ends: [Int32] = [-1, -1]
                guard pipe(&ends) == 0 else {
                    let reason = String(cString: strerror(errno))
                    closeParentEnds()
                    throw HotUpdateError(.fileSystem, "cannot create a pipe for \(executable): \(reason)")
                }
                for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
                let (parent, child) = target == 0 ? (ends[1], ends[0]) : (ends[0], ends[1])
                parentEnds[target] = parent
                childEnds.append(child)
                posix_spawn_file_actions_adddup2(&actions, child, target)
            case .file(let file, let append):
                let mode = O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC)
                posix_spawn_file_actions_addopen(&actions, target, file, target == 0 ? O_RDONLY : mode, 0o644)
            case .descriptor(let descriptor):
                posix_spawn_file_actions_adddup2(&actions, descriptor, target)
            case .standardOutput:
                posix_spawn_file_actions_adddup2(&actions, 1, target)
            }
        }
        if let directory {
            #if os(Linux)
            guard let changeDirectory = Self.changeDirectory else {
                closeParentEnds()
                throw HotUpdateError(
                    .unsupported,
                    "this C library cannot set a spawned process's directory",
                    subject: directory.path
                )
            }
            _ = changeDirectory(&actions, directory.path)
            #else
            posix_spawn_file_actions_addchdir_np(&actions, directory.path)
            #endif
        }
        #if os(Linux)
        InheritedDescriptors.closeAll(in: &actions)
        #endif

        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard result == 0 else {
            closeParentEnds()
            throw HotUpdateError(
                .fileSystem,
                "cannot run \(path): \(String(cString: strerror(result)))",
                subject: path
            )
        }
        self.pid = pid
        self.standardInput = parentEnds[0].map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
        self.standardOutput = parentEnds[1].map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
        self.standardError = parentEnds[2].map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
    }

    /// Whether the child has not ended yet; reaps it once it has.
    public var isRunning: Bool {
        let pid = pid
        return ending.withLock { ending in
            if ending != nil { return false }
            var status: Int32 = 0
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid {
                ending = Self.ending(status)
            } else if result < 0 && errno == ECHILD {
                // Reaped by someone else: the status is lost.
                ending = .exited(-1)
            }
            return ending == nil
        }
    }

    /// The ending, nil while the child runs.
    public var exitStatus: Ending? {
        _ = isRunning
        return ending.value
    }

    /// Sends `signal` if the child has not been reaped; returns whether it was sent.
    @discardableResult
    public func signal(_ signal: Int32) -> Bool {
        let pid = pid
        return ending.withLock { ending in
            ending == nil && deliver(signal, to: pid)
        }
    }

    /// Sends `SIGKILL` (a no-op once the child has ended).
    @discardableResult
    public func kill() -> Bool { signal(SIGKILL) }

    /// Waits for the end, blocking this thread in the kernel, and reaps the child.
    @discardableResult
    public func waitUntilExit() -> Ending {
        if let known = ending.value { return known }
        #if os(Linux)
        // WNOWAIT: the child stays a zombie, so only the locked reap below takes its id.
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0, errno == EINTR {}
        #else
        while ending.value == nil, isRunning { usleep(1000) }
        #endif
        let pid = pid
        return ending.withLock { ending in
            if let ending { return ending }
            var status: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(pid, &status, 0) } while result < 0 && errno == EINTR
            let ended = result == pid ? Self.ending(status) : .exited(-1)
            ending = ended
            return ended
        }
    }

    /// Waits for the end on a thread of its own.
    public func exit() async -> Ending {
        await withCheckedContinuation { continuation in
            Thread { [self] in continuation.resume(returning: waitUntilExit()) }.start()
        }
    }

    /// Waits at most `timeout` for the end; nil when the child still runs then.
    public func exit(within timeout: Duration) async -> Ending? {
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        return await withCheckedContinuation { continuation in
            Thread { [self] in
                let ended = DispatchSemaphore(value: 0)
                Thread { [self] in
                    waitUntilExit()
                    ended.signal()
                }.start()
                if ended.wait(timeout: .now() + seconds) == .timedOut {
                    continuation.resume(returning: nil)
                } else {
                    continuation.resume(returning: ending.value)
                }
            }.start()
        }
    }

    /// Reaps the child on a thread of its own once it ends, so no zombie is left.
    public func reapInBackground() {
        guard isRunning else { return }
        Thread { [self] in waitUntilExit() }.start()
    }

    /// Writes `data` to standard input (a pipe) and closes it.
    public func write(_ data: Data) throws {
        guard let standardInput else {
            throw HotUpdateError(.invalidArgument, "standard input is not a pipe", subject: String(pid))
        }
        try standardInput.write(contentsOf: data)
        try standardInput.close()
    }

    /// Reads `handle` to its end on a thread of its own; the returned drain's `wait()` gives
    /// the bytes.
    public static func drain(_ handle: FileHandle) -> Drain { Drain(handle) }

    /// Everything read from a pipe, on a thread of its own, so a chatty child never blocks on
    /// a full pipe while the parent reads another.
    public final class Drain: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        private var data = Data()

        init(_ handle: FileHandle) {
            Thread { [self] in
                data = Self.readToEnd(handle.fileDescriptor)
                done.signal()
            }.start()
        }

        /// Waits for the end of the pipe and returns everything read.
        public func wait() -> Data {
            done.wait()
            done.signal()
            return data
        }

        static func readToEnd(_ descriptor: Int32) -> Data {
            var data = Data()
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count > 0 {
                    data.append(contentsOf: buffer[0..<count])
                } else if count == 0 || errno != EINTR {
                    return data
                }
            }
        }
    }

    /// Reads one line (without its newline) from `handle`, byte by byte so nothing after it is
    /// consumed; nil at the end of the pipe before any newline.
    public static func readLine(_ handle: FileHandle) -> String? {
        var line = Data()
        var byte: UInt8 = 0
        while true {
            let count = read(handle.fileDescriptor, &byte, 1)
            if count == 1 {
                if byte == 0x0A { return String(decoding: line, as: UTF8.self) }
                line.append(byte)
            } else if count == 0 || errno != EINTR {
                return line.isEmpty ? nil : String(decoding: line, as: UTF8.self)
            }
        }
    }

    private static func ending(_ status: Int32) -> Ending {
        status & 0x7f == 0 ? .exited((status >> 8) & 0xff) : .signalled(status & 0x7f)
    }

    /// The path of `executable`: itself when it names a path, else the first executable file
    /// of that name in `path`'s directories.
    static func locate(_ executable: String, path: String?) throws -> String {
        if executable.contains("/") { return executable }
        for directory in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") {
            let candidate = "\(directory)/\(executable)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        throw HotUpdateError(.notFound, "\(executable) is not on PATH", subject: executable)
    }

    #if os(Linux)
    private typealias ChangeDirectory =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, UnsafePointer<CChar>?) -> Int32

    /// `posix_spawn_file_actions_addchdir_np` (glibc 2.29), which Swift's Glibc module, built
    /// without `_GNU_SOURCE`, does not declare.
    private static let changeDirectory: ChangeDirectory? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addchdir_np")
        else { return nil }
        return unsafeBitCast(symbol, to: ChangeDirectory.self)
    }()
    #endif
}
/// `kill(2)`, outside the class whose `kill()` would shadow it.
private func deliver(_ signal: Int32, to pid: pid_t) -> Bool { kill(pid, signal) == 0 }
#endif
