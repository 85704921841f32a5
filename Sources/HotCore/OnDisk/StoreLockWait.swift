import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// How a process waits while another one holds the store lock: how long before it says so,
/// how long before it gives up, and whom it tells.
///
/// Processes sharing a root (an app, its extensions, the `hot` tool) hold the store lock
/// only around a step that changes the store, never across a download, so a wait is
/// normally a few milliseconds. A holder the system suspended (an iOS app moved to the
/// background mid-commit) or a debugger stopped would make every other process wait for as
/// long as it stays stopped; the wait makes that visible and bounded:
///
/// - After ``noticeAfter`` the waiter logs a warning naming the holder (its process id and
///   name, from the system's lock table on Linux, else from what the last writer recorded
///   in the lock file) and calls ``onWait``.
/// - After ``timeout`` a change gives up with ``HotUpdateError/Code/storeBusy``: nothing was
///   changed.
/// - A read never waits that long: after ``readPatience`` it reads the snapshot last
///   committed, which the store replaces atomically, without the lock.
///
/// ```swift
/// var configuration = UpdaterConfiguration(root: root, …)
/// configuration.lockWait.timeout = 5
/// configuration.lockWait.onWait = { holder in print("waiting for \(holder)") }
/// ```
public struct StoreLockWait: Sendable {
    /// How long a change waits for the lock before it fails with
    /// ``HotUpdateError/Code/storeBusy``; nil: as long as it takes. Default 30 s.
    public var timeout: TimeInterval?
    /// How long a wait lasts before the holder is named. Default 1 s.
    public var noticeAfter: TimeInterval
    /// How long a read waits for a writer before it reads the last committed snapshot
    /// without the lock. Default 0.5 s.
    public var readPatience: TimeInterval
    /// Called once per wait that lasts ``noticeAfter`` (and when a read stops waiting), with
    /// the holder; on the waiting thread.
    public var onWait: (@Sendable (StoreLockHolder) -> Void)?

    /// Creates a wait policy.
    ///
    /// - Parameters:
    ///   - timeout: How long a change waits at most; nil: without a limit.
    ///   - noticeAfter: How long a wait lasts before the holder is named.
    ///   - readPatience: How long a read waits before it reads without the lock.
    ///   - onWait: Told about the holder of a long wait.
    public init(
        timeout: TimeInterval? = 30,
        noticeAfter: TimeInterval = 1,
        readPatience: TimeInterval = 0.5,
        onWait: (@Sendable (StoreLockHolder) -> Void)? = nil
    ) {
        self.timeout = timeout.map { max(0, $0) }
        self.noticeAfter = max(0, noticeAfter)
        self.readPatience = max(0, readPatience)
        self.onWait = onWait
    }

    /// The library's default: a change waits 30 s at most, the holder is named after 1 s.
    public static let standard = StoreLockWait()
}

/// The process holding the store lock another one waits for, as far as the system tells.
public struct StoreLockHolder: Sendable, Hashable, CustomStringConvertible {
    /// The holder's process id; nil when the system does not say.
    public var processID: Int32?
    /// The holder's program name, when known.
    public var name: String?
    /// Whether it holds the lock to change the store (rather than to read it).
    public var exclusive: Bool?

    /// Creates a value.
    public init(processID: Int32?, name: String? = nil, exclusive: Bool? = nil) {
        self.processID = processID
        self.name = name
        self.exclusive = exclusive
    }

    public var description: String {
        guard let processID else { return "another process" }
        return "process \(processID)" + (name.map { " (\($0))" } ?? "")
    }
}

extension StoreLock {
    /// Who holds the store lock of `root` now, as far as the system tells.
    static func holder(root: URL) -> StoreLockHolder {
        let descriptor = open(root.appendingPathComponent(fileName, isDirectory: false).path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return StoreLockHolder(processID: nil) }
        defer { _ = close(descriptor) }
        return holder(of: descriptor)
    }

    /// Who holds the lock on the file open at `descriptor` besides the caller: on Linux
    /// from `/proc/locks` (the kernel's table of `flock` holders), else the process the last
    /// writer recorded in the lock file.
    static func holder(of descriptor: Int32) -> StoreLockHolder {
        #if os(Linux)
        if let found = holderFromLockTable(descriptor) { return found }
        #endif
        return recordedWriter(descriptor)
    }

    /// The writer recorded after the change counter, if any.
    static func recordedWriter(_ descriptor: Int32) -> StoreLockHolder {
        var buffer = [UInt8](repeating: 0, count: 128)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, 128, 0) }
        guard count > counterWidth else { return StoreLockHolder(processID: nil) }
        let text = String(decoding: buffer[counterWidth..<count], as: UTF8.self)
        let fields = text.split(whereSeparator: \.isWhitespace)
        guard let first = fields.first, let pid = Int32(first), pid > 0 else { return StoreLockHolder(processID: nil) }
        // A recorded writer that is gone holds nothing.
        guard kill(pid, 0) == 0 || errno == EPERM else { return StoreLockHolder(processID: nil) }
        return StoreLockHolder(processID: pid, name: fields.dropFirst().first.map(String.init) ?? processName(pid))
    }

    #if os(Linux)
    /// The first holder of a `flock` on the file open at `descriptor` in `/proc/locks`
    /// that is not this process.
    static func holderFromLockTable(_ descriptor: Int32) -> StoreLockHolder? {
        var info = stat()
        guard fstat(descriptor, &info) == 0, let table = readToEnd("/proc/locks") else { return nil }
        let device = UInt64(info.st_dev)
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff))
        let minor = (device & 0xff) | ((device >> 12) & ~UInt64(0xff))
        let inode = UInt64(info.st_ino)
        let me = getpid()
        // "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; waiters' lines carry "->".
        for line in table.split(separator: "\n") where !line.contains("->") {
            let fields = line.split(whereSeparator: \.isWhitespace)
            guard fields.count >= 6, fields[1] == "FLOCK", let pid = Int32(fields[4]), pid > 0, pid != me else {
                continue
            }
            let place = fields[5].split(separator: ":")
            guard place.count == 3, UInt64(place[0], radix: 16) == major, UInt64(place[1], radix: 16) == minor,
                UInt64(place[2]) == inode
            else { continue }
            return StoreLockHolder(processID: pid, name: processName(pid), exclusive: fields[3] == "WRITE")
        }
        return nil
    }

    /// The whole of a file the kernel generates as it is read (`/proc/locks`), which `stat`
    /// says is empty and one `read` returns only a page of: read until `read` returns 0, so
    /// a table of thousands of locks is seen to its end.
    static func readToEnd(_ path: String) -> String? {
        let file = open(path, O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { _ = close(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(file, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
    #endif

    /// The program name of process `pid`, when the system tells.
    static func processName(_ pid: Int32) -> String? {
        #if os(Linux)
        guard let name = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) else { return nil }
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        return trimmed.isEmpty ? nil : trimmed
        #else
        return nil
        #endif
    }
}
