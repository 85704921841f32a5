import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The few file-system operations the engine needs, with durable semantics and
/// ``HotUpdateError``s that say which path failed.
package enum FileSystem {
    /// Creates a directory and its parents if missing.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem``.
    package static func createDirectory(_ url: URL) throws {
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot create directory \(url.path)")
        }
    }

    /// Removes a file or a directory tree; a missing path is not an error.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem``.
    package static func remove(_ url: URL) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) || isSymlink(url) else {
            return
        }
        do {
            try FileManager.default.removeItem(at: url)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot remove \(url.path)")
        }
    }

    /// Whether `url` is a symbolic link (not followed).
    package static func isSymlink(_ url: URL) -> Bool {
        var info = stat()
        return lstat(url.path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK
    }

    /// A file's identity as `lstat` gives it: device, inode, size and modification time to
    /// the nanosecond; nil when there is no file. A file replaced by a rename has another.
    package static func identity(of url: URL) -> String? {
        var info = stat()
        guard lstat(url.path, &info) == 0 else { return nil }
        #if canImport(Darwin)
        let modified = info.st_mtimespec
        #else
        let modified = info.st_mtim
        #endif
        return "\(info.st_dev)-\(info.st_ino)-\(info.st_size)-\(modified.tv_sec).\(modified.tv_nsec)"
    }

    /// Whether `path` exists and is a regular file (not following a final symlink).
    package static func isRegularFile(atPath path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
    }

    /// Whether the volume holding `directory` ignores case in names (the default of macOS's
    /// and iOS's volumes): a probe file is created under a lowercase name and looked up under
    /// the uppercase one, then removed.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem`` when the probe cannot be created.
    package static func ignoresCase(in directory: URL) throws -> Bool {
        let name = ".hot-case-probe-\(UUID().uuidString.lowercased())"
        let probe = directory.appendingPathComponent(name, isDirectory: false)
        guard FileManager.default.createFile(atPath: probe.path, contents: nil) else {
            throw HotUpdateError(
                .fileSystem,
                "cannot create a probe file to learn whether the volume ignores case",
                subject: directory.path
            )
        }
        defer { try? remove(probe) }
        var info = stat()
        return lstat(directory.appendingPathComponent(name.uppercased(), isDirectory: false).path, &info) == 0
    }

    /// Whether `url` exists and is a directory (not following a final symlink).
    package static func isDirectory(_ url: URL) -> Bool {
        var info = stat()
        return lstat(url.path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// Renames `source` to `destination` atomically (same file system), then, unless told
    /// not to, fsyncs the destination's directory so the rename survives a crash. Pass
    /// `durable: false` when a ``syncFileSystem(containing:)`` follows before anything relies
    /// on the rename.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem``.
    package static func rename(_ source: URL, to destination: URL, durable: Bool = true) throws {
        guard systemRename(source.path, destination.path) == 0 else {
            throw HotUpdateError.system(
                "cannot rename \(source.path) to \(destination.path)",
                errno: errno,
                subject: destination.path
            )
        }
        if durable { try syncDirectory(destination.deletingLastPathComponent()) }
    }

    /// Replaces the content of `url` atomically and durably: a new temporary file beside it,
    /// written and fsynced, renamed over it, and its directory fsynced. A reader sees the old
    /// content or the new, never a mix; on failure the temporary file is removed.
    ///
    /// With `chunkSize`, the data is written that many bytes per call: the page cache then
    /// holds the file in pieces no larger (Linux sizes a written file's folios by the
    /// writes, and maps a whole folio around a page fault), which keeps a file that is
    /// mapped and read here and there from being mapped megabytes at a time.
    ///
    /// `faultPoint` names the ``FaultPoint`` reached once the temporary file is written and
    /// flushed, before the rename.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem`` naming the file.
    package static func replaceDurably(
        _ url: URL,
        with data: Data,
        chunkSize: Int? = nil,
        faultPoint: StaticString? = nil
    ) throws {
        let directory = url.deletingLastPathComponent()
        let temporary = directory.appendingPathComponent(".\(url.lastPathComponent).tmp-\(UUID().uuidString)")
        do {
            let writer = try FileWriter(creating: temporary)
            if let chunkSize, chunkSize > 0 {
                try data.withUnsafeBytes { bytes in
                    var offset = 0
                    while offset < bytes.count {
                        let end = min(offset + chunkSize, bytes.count)
                        try writer.write(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
                        offset = end
                    }
                }
            } else {
                try writer.write(data)
            }
            try writer.close(sync: true)
            if let faultPoint { FaultPoint.reached(faultPoint) }
            try rename(temporary, to: url)
        } catch {
            try? remove(temporary)
            throw error
        }
    }

    /// fsyncs a directory, making renames and creations inside it durable. File systems
    /// that cannot sync a directory (`EINVAL`, `ENOTSUP`) are accepted: they give no stronger
    /// guarantee to ask for.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem`` when the directory cannot be opened or
    ///   its fsync fails.
    package static func syncDirectory(_ url: URL) throws {
        try syncDirectory(
            url,
            using: { fd in
                // F_FULLFSYNC where the platform has it, through the same decision as files.
                let code = flush(fd)
                if code != 0 { errno = code }
                return code == 0 ? 0 : -1
            }
        )
    }

    /// ``syncDirectory(_:)`` with the `fsync` to call (tests pass one that fails).
    package static func syncDirectory(_ url: URL, using sync: (Int32) -> Int32) throws {
        let fd = open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            throw HotUpdateError(
                .fileSystem,
                "cannot open directory \(url.path): \(String(cString: strerror(code)))"
            )
        }
        defer { _ = systemCloseFD(fd) }
        while sync(fd) != 0 {
            let code = errno
            if code == EINTR { continue }
            if code == EINVAL || code == ENOTSUP { return }
            throw HotUpdateError.system("cannot fsync directory \(url.path)", errno: code, subject: url.path)
        }
    }

    /// Flushes one open file or directory to stable storage and returns 0, or the `errno`
    /// of the failure.
    ///
    /// Every platform runs this decision; only the calls in `calls` differ. Where the
    /// platform has a full flush (`F_FULLFSYNC` on Apple platforms, where `fsync` leaves the
    /// data in the drive's cache) it is tried first; when it is missing or the file system
    /// refuses it, `fsync`, retried while interrupted.
    package static func flush(_ fd: Int32, calls: FlushCalls = .system) -> Int32 {
        if let fullSync = calls.fullSync, fullSync(fd) == 0 { return 0 }
        while calls.fsync(fd) != 0 {
            let code = calls.lastError()
            if code != EINTR { return code }
        }
        return 0
    }

    /// Flushes the whole file system holding the open directory `fd` and returns 0, or the
    /// `errno` of the failure.
    ///
    /// `syncfs` where the C library has it (Linux: one call for a whole unpacked tree);
    /// elsewhere `sync`, which only schedules the writes, then a full flush of `fd` where the
    /// platform has one (on Apple platforms `F_FULLFSYNC` on any file of a volume makes the
    /// drive write out its cache). A file system that refuses that flush (`ENOTSUP`,
    /// `EINVAL`) gives no stronger guarantee to ask for and is accepted.
    package static func flushFileSystem(of fd: Int32, calls: FlushCalls = .system) -> Int32 {
        if let syncfs = calls.syncfs {
            return syncfs(fd) == 0 ? 0 : calls.lastError()
        }
        calls.sync()
        guard let fullSync = calls.fullSync, fullSync(fd) != 0 else { return 0 }
        let code = calls.lastError()
        return code == ENOTSUP || code == EINVAL ? 0 : code
    }

    /// Flushes everything written to the file system holding `url` to stable storage
    /// (``flushFileSystem(of:calls:)``: `syncfs` on Linux, `sync` and `F_FULLFSYNC` on Apple
    /// platforms). The engine calls it before the commit that makes a version active, so a
    /// power loss never leaves a recorded version with files that were not yet on disk.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem``.
    package static func syncFileSystem(containing url: URL) throws {
        let fd = open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            throw HotUpdateError(
                .fileSystem,
                "cannot open \(url.path) to flush it: \(String(cString: strerror(code)))"
            )
        }
        defer { _ = systemCloseFD(fd) }
        let code = flushFileSystem(of: fd)
        guard code == 0 else {
            throw HotUpdateError.system("cannot flush the file system of \(url.path)", errno: code, subject: url.path)
        }
    }

    /// Starts writing back what is written to the file system holding `url`, on a thread of
    /// its own, and returns at once. Where `syncfs` exists (Linux) the engine calls it when a
    /// large tree is unpacked: the disk writes the tree while the engine adopts its files,
    /// and the flush before the commit (``syncFileSystem(containing:)``, which still decides
    /// durability) waits only for what is left. One runs at a time: a tree unpacked while
    /// one runs is written by the commit's flush. Elsewhere it does nothing: `sync` and
    /// `F_FULLFSYNC` there are one flush, not worth starting twice.
    package static func beginWriteback(containing url: URL) {
        guard let syncfs = FlushCalls.system.syncfs,
            writebackRunning.withLock({ running in
                defer { running = true }
                return !running
            })
        else { return }
        let fd = open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            writebackRunning.withLock { $0 = false }
            return
        }
        Thread {
            _ = syncfs(fd)
            _ = systemCloseFD(fd)
            writebackRunning.withLock { $0 = false }
        }.start()
    }

    private static let writebackRunning = Locked(false)

    /// Runs blocking file-system work on a thread outside Swift's cooperative pool, so a
    /// slow disk never stalls other tasks.
    package static func offload<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .utility).async {
                continuation.resume(with: Result { try body() })
            }
        }
    }

    /// The names in a directory; an empty list when it does not exist.
    package static func contents(of url: URL) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
    }
}

private func systemRename(_ from: String, _ to: String) -> Int32 { rename(from, to) }
private func systemCloseFD(_ fd: Int32) -> Int32 { close(fd) }

/// The system calls ``FileSystem/flush(_:calls:)`` and ``FileSystem/flushFileSystem(of:calls:)``
/// are made of. ``system`` holds this platform's; tests pass stand-ins to run the other
/// platforms' paths of the same decision.
package struct FlushCalls: Sendable {
    /// `fcntl(fd, F_FULLFSYNC)` on Apple platforms; nil where there is no such call.
    package var fullSync: (@Sendable (Int32) -> Int32)?
    /// `fsync(2)`.
    package var fsync: @Sendable (Int32) -> Int32
    /// `syncfs(2)` where the C library has it (Linux); nil elsewhere.
    package var syncfs: (@Sendable (Int32) -> Int32)?
    /// `sync(2)`.
    package var sync: @Sendable () -> Void
    /// `errno` after a failed call.
    package var lastError: @Sendable () -> Int32

    package init(
        fullSync: (@Sendable (Int32) -> Int32)?,
        fsync: @escaping @Sendable (Int32) -> Int32,
        syncfs: (@Sendable (Int32) -> Int32)?,
        sync: @escaping @Sendable () -> Void,
        lastError: @escaping @Sendable () -> Int32
    ) {
        self.fullSync = fullSync
        self.fsync = fsync
        self.syncfs = syncfs
        self.sync = sync
        self.lastError = lastError
    }

    /// This platform's calls.
    package static let system: FlushCalls = {
        #if canImport(Darwin)
        let fullSync: (@Sendable (Int32) -> Int32)? = { fcntl($0, F_FULLFSYNC) }
        #else
        let fullSync: (@Sendable (Int32) -> Int32)? = nil
        #endif
        var syncfs: (@Sendable (Int32) -> Int32)?
        if let call = linuxSyncfs { syncfs = { call($0) } }
        return FlushCalls(
            fullSync: fullSync,
            fsync: { systemFsync($0) },
            syncfs: syncfs,
            sync: { systemSync() },
            lastError: { errno }
        )
    }()
}

private func systemFsync(_ fd: Int32) -> Int32 { fsync(fd) }
private func systemSync() { sync() }

/// `syncfs(2)`, looked up at run time: glibc declares it only under `_GNU_SOURCE`, which
/// Swift's system module does not define. nil where the C library lacks it.
private let linuxSyncfs: (@convention(c) (Int32) -> Int32)? = {
    #if canImport(Glibc) || canImport(Musl)
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "syncfs") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (Int32) -> Int32).self)
    #else
    return nil
    #endif
}()
