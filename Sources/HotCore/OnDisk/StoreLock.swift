import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The lock every process sharing a store root takes: `flock(2)` on `store.lock` under the
/// root, shared for readers and exclusive for changes, in the manner of SQLite's file
/// locking. An app, its extensions and the `hot` tool may open one root at the same time;
/// each takes the lock only around a step that changes the store (never across a download)
/// and another process holding it is a normal condition: the caller waits.
///
/// The lock file also holds a change counter: a writer bumps it under the exclusive lock
/// before each commit, so a reader that finds the counter it saw at its last load knows its
/// snapshot is current without decoding the metadata again.
///
/// Locks taken through different ``StoreLock`` values conflict even within one process, so
/// two updaters over one root in one process coordinate too: they queue in the
/// ``ProcessLockQueue`` first, in the order they asked, and wait there for as long as the
/// holder of their own process holds the lock; only the wait for another process has a time
/// limit. Descriptors are opened close-on-exec: a child process never inherits one.
package final class StoreLock: @unchecked Sendable {
    /// How the lock is held.
    package enum Mode: Sendable {
        /// Readers: any number at once, no writer.
        case shared
        /// A writer: alone.
        case exclusive
    }

    /// The lock file's name under the store root.
    package static let fileName = "store.lock"

    private let descriptor: Int32
    private let file: ProcessLockQueue.FileID
    private let released = Locked(false)
    /// How the lock is held.
    package let mode: Mode
    /// The lock file.
    package let url: URL

    private init(descriptor: Int32, file: ProcessLockQueue.FileID, mode: Mode, url: URL) {
        self.descriptor = descriptor
        self.file = file
        self.mode = mode
        self.url = url
    }

    deinit {
        release()
    }

    /// Takes the lock on `root`, blocking while another holder prevents it, for as long as
    /// `wait` allows.
    ///
    /// - Parameters:
    ///   - root: The store root.
    ///   - mode: Shared or exclusive.
    ///   - create: Whether to create the root and the lock file when missing (writers do;
    ///     readers never create anything).
    ///   - wait: How long to wait, and whom to tell about a long wait.
    ///   - timeout: Overrides `wait`'s timeout (a read passes its patience); given, it also
    ///     bounds the wait for this process's own holders, which is otherwise unbounded.
    ///   - otherProcesses: Overrides the timeout for another process's hold alone: the wait
    ///     for this process's own holders stays as `timeout` says (a launch's deadline).
    /// - Returns: The held lock; nil when `create` is false and there is no lock file (a
    ///   store never written by a writer that locks, or no store at all).
    /// - Throws: ``HotUpdateError/Code/storeBusy`` when the wait ran out,
    ///   ``HotUpdateError/Code/fileSystem`` when the file cannot be opened or locked.
    package static func acquireBlocking(
        root: URL,
        mode: Mode,
        create: Bool,
        wait: StoreLockWait = .standard,
        timeout: TimeInterval?? = .none,
        otherProcesses: TimeInterval? = nil
    ) throws -> StoreLock? {
        let url = root.appendingPathComponent(fileName, isDirectory: false)
        if create { try FileSystem.createDirectory(root) }
        let flags = create ? (O_RDWR | O_CREAT | O_CLOEXEC) : (O_RDWR | O_CLOEXEC)
        var descriptor = open(url.path, flags, 0o644)
        if descriptor < 0, !create, errno == EACCES {
            descriptor = open(url.path, O_RDONLY | O_CLOEXEC)  // a read-only store: shared locks still work
        }
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT, !create { return nil }
            throw HotUpdateError.system("cannot open the store lock", errno: code, subject: url.path)
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let code = errno
            _ = close(descriptor)
            throw HotUpdateError.system("cannot read the store lock", errno: code, subject: url.path)
        }
        let file = ProcessLockQueue.FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        // This process's earlier holders first, for as long as they hold it; only a read
        // (which passes its patience) stops waiting for them.
        let patience: TimeInterval?? = timeout
        let deadline = patience.flatMap { $0 }.map { Date(timeIntervalSinceNow: $0) }
        guard ProcessLockQueue.shared.enter(file, exclusive: mode == .exclusive, deadline: deadline) else {
            _ = close(descriptor)
            throw HotUpdateError(
                .storeBusy,
                "a change of this process has held the store lock for more than \(formatted(patience.flatMap { $0 } ?? 0)) s",
                subject: url.path
            )
        }
        do {
            let limit: TimeInterval? = otherProcesses ?? (timeout ?? wait.timeout)
            try lock(descriptor, mode: mode, wait: wait, timeout: limit, url: url)
        } catch {
            _ = close(descriptor)
            ProcessLockQueue.shared.leave(file, exclusive: mode == .exclusive)
            throw error
        }
        let held = StoreLock(descriptor: descriptor, file: file, mode: mode, url: url)
        if mode == .exclusive { held.recordWriter() }
        return held
    }

    /// Takes `flock` on `descriptor`, polling while another holder prevents it: the holder
    /// is named after `wait.noticeAfter`, and the wait ends with
    /// ``HotUpdateError/Code/storeBusy`` after `timeout`.
    private static func lock(
        _ descriptor: Int32,
        mode: Mode,
        wait: StoreLockWait,
        timeout: TimeInterval?,
        url: URL
    ) throws {
        let operation = (mode == .shared ? LOCK_SH : LOCK_EX) | LOCK_NB
        let clock = ContinuousClock()
        let start = clock.now
        var pause: Duration = .milliseconds(1)
        var noticed = false
        while true {
            if flock(descriptor, operation) == 0 { return }
            let code = errno
            if code == EINTR { continue }
            guard code == EWOULDBLOCK || code == EAGAIN else {
                throw HotUpdateError(
                    .fileSystem,
                    "cannot lock the store: \(String(cString: strerror(code)))",
                    subject: url.path
                )
            }
            let waited = start.duration(to: clock.now)
            if let timeout, waited >= .seconds(timeout) {
                let holder = holder(of: descriptor)
                throw HotUpdateError(
                    .storeBusy,
                    "\(holder) has held the store lock for more than \(formatted(timeout)) s; nothing was changed",
                    subject: url.path
                )
            }
            if !noticed, waited >= .seconds(wait.noticeAfter) {
                noticed = true
                wait.onWait?(holder(of: descriptor))
            }
            Thread.sleep(forTimeInterval: pause.timeInterval)
            pause = min(pause * 2, .milliseconds(50))
        }
    }

    /// Seconds as a person reads them: "10", "0.5".
    static func formatted(_ seconds: TimeInterval) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }

    /// The width of the change counter at the start of the lock file; the last writer's
    /// process id and name follow it.
    static let counterWidth = 20

    /// Records this process as the last writer, after the change counter, so a waiter on a
    /// system without a lock table can name it. Best effort.
    private func recordWriter() {
        let name = ProcessInfo.processInfo.processName.split(whereSeparator: \.isWhitespace).first.map(String.init)
        let text = "\n\(getpid()) \(name ?? "-")"
        var bytes = Array(text.utf8.prefix(63))
        bytes += [UInt8](repeating: UInt8(ascii: " "), count: 63 - bytes.count) + [UInt8(ascii: "\n")]
        _ = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t(Self.counterWidth)) }
    }

    /// ``acquireBlocking(root:mode:create:wait:timeout:otherProcesses:)`` on a thread outside
    /// the cooperative pool.
    package static func acquire(
        root: URL,
        mode: Mode,
        create: Bool,
        wait: StoreLockWait = .standard,
        timeout: TimeInterval?? = .none,
        otherProcesses: TimeInterval? = nil
    ) async throws -> StoreLock? {
        try await FileSystem.offload {
            try acquireBlocking(
                root: root,
                mode: mode,
                create: create,
                wait: wait,
                timeout: timeout,
                otherProcesses: otherProcesses
            )
        }
    }

    /// Releases the lock; later calls do nothing.
    package func release() {
        let first = released.withLock { released in
            defer { released = true }
            return !released
        }
        guard first else { return }
        _ = close(descriptor)
        ProcessLockQueue.shared.leave(file, exclusive: mode == .exclusive)
    }

    /// The change counter: 0 for a lock file never written.
    package func readCounter() -> UInt64 {
        var buffer = [UInt8](repeating: 0, count: Self.counterWidth)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, Self.counterWidth, 0) }
        guard count > 0 else { return 0 }
        let text = String(decoding: buffer[0..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return UInt64(text) ?? 0
    }

    /// Bumps the change counter and returns its new value; only under the exclusive lock.
    /// Not flushed: after a crash of the machine every process starts afresh anyway.
    @discardableResult
    package func bumpCounter() throws -> UInt64 {
        precondition(mode == .exclusive, "the change counter is bumped only under the exclusive lock")
        let next = readCounter() &+ 1
        let text = Array(String(format: "%020llu", next).utf8)
        let written = text.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        guard written == text.count else {
            let code = errno
            throw HotUpdateError.system(
                "cannot write the store's change counter",
                errno: written < 0 ? code : ENOSPC,
                subject: url.path
            )
        }
        return next
    }

    /// Runs `body` under the exclusive lock on `root` (created when missing), blocking for
    /// as long as `wait` allows.
    package static func withExclusiveLock<T>(
        root: URL,
        wait: StoreLockWait = .standard,
        _ body: () throws -> T
    ) throws -> T {
        guard let held = try acquireBlocking(root: root, mode: .exclusive, create: true, wait: wait) else {
            throw HotUpdateError(.internalInconsistency, "no store lock after creating it", subject: root.path)
        }
        defer { held.release() }
        return try body()
    }
}

/// A file held with an exclusive `flock(2)` by the process that made it, for as long as
/// what it stands for is in use: a staging entry (``StagingOwner``) or a launch
/// (``LaunchOwner``). A process's locks end with it, so one that can take the lock knows the
/// owner is gone.
package final class OwnerFile: @unchecked Sendable {
    /// The open, locked file.
    let descriptor: Int32
    private let released = Locked(false)

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit {
        release()
    }

    /// Creates (or truncates, with `truncating`) the file at `path` and locks it.
    ///
    /// - Parameter what: What the file owns, for errors ("the staging owner").
    /// - Throws: ``HotUpdateError/Code/fileSystem``.
    static func create(at path: String, truncating: Bool = false, what: String) throws -> OwnerFile {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | (truncating ? O_TRUNC : 0), 0o644)
        guard descriptor >= 0 else {
            let code = errno
            throw HotUpdateError.system("cannot create \(what)", errno: code, subject: path)
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            _ = close(descriptor)
            throw HotUpdateError(.fileSystem, "cannot lock \(what): \(String(cString: strerror(code)))", subject: path)
        }
        return OwnerFile(descriptor: descriptor)
    }

    /// Lets go of the lock; later calls do nothing.
    func release() {
        let first = released.withLock { released in
            defer { released = true }
            return !released
        }
        if first { _ = close(descriptor) }
    }

    /// Whether a live process (this one included) holds the file at `path`: nil when there
    /// is no such file, false when its owner is gone.
    static func isHeld(at path: String) -> Bool? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { _ = close(descriptor) }
        if flock(descriptor, LOCK_EX | LOCK_NB) == 0 { return false }
        return errno == EWOULDBLOCK || errno == EAGAIN
    }
}

/// Who owns a staging entry: an ``OwnerFile`` inside it, held by the process that created
/// the entry for as long as the entry is in use. A sweeper that can take the lock knows the
/// owner is gone and may remove the entry.
package final class StagingOwner: Sendable {
    /// The owner file's name inside a staging entry.
    package static let fileName = ".owner"

    private let file: OwnerFile
    /// The staging entry owned.
    package let directory: URL

    private init(file: OwnerFile, directory: URL) {
        self.file = file
        self.directory = directory
    }

    /// Creates `directory` with an owner lock held by this process. Call it under at least
    /// the shared store lock, so that no sweep runs between the two steps.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem``.
    package static func create(_ directory: URL) throws -> StagingOwner {
        try FileSystem.createDirectory(directory)
        let path = directory.appendingPathComponent(fileName, isDirectory: false).path
        return StagingOwner(file: try OwnerFile.create(at: path, what: "the staging owner"), directory: directory)
    }

    /// Lets go of the entry (without removing it).
    package func release() {
        file.release()
    }

    /// Whether a live process (this one included) owns the staging entry `directory`.
    /// An entry without an owner file belongs to no one.
    package static func isOwned(_ directory: URL) -> Bool {
        OwnerFile.isHeld(at: directory.appendingPathComponent(fileName, isDirectory: false).path) ?? false
    }
}
