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
                "cannot rename \(source.path) to \(destination.path)", errno: errno, subject: destination.path)
        }
        if durable { try syncDirectory(destination.deletingLastPathComponent()) }
    }

    /// Replaces the content of `url` atomically and durably: a new temporary file beside it,
    /// written and fsynced, renamed over it, and its directory fsynced. A reader sees the old
    /// content or the new, never a mix; on failure the temporary file is removed.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem`` naming the file.
    package static func replaceDurably(_ url: URL, with data: Data) throws {
        let directory = url.deletingLastPathComponent()
        let temporary = directory.appendingPathComponent(".\(url.lastPathComponent).tmp-\(UUID().uuidString)")
        do {
            let writer = try FileWriter(creating: temporary)
            try writer.write(data)
            try writer.close(sync: true)
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
        try syncDirectory(url, using: { fsync($0) })
    }

    /// ``syncDirectory(_:)`` with the `fsync` to call (tests pass one that fails).
    package static func syncDirectory(_ url: URL, using sync: (Int32) -> Int32) throws {
        let fd = open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            throw HotUpdateError(
                .fileSystem, "cannot open directory \(url.path): \(String(cString: strerror(code)))")
        }
        defer { _ = systemCloseFD(fd) }
        while sync(fd) != 0 {
            let code = errno
            if code == EINTR { continue }
            if code == EINVAL || code == ENOTSUP { return }
            throw HotUpdateError.system("cannot fsync directory \(url.path)", errno: code, subject: url.path)
        }
    }

    /// Flushes everything written to the file system holding `url` to stable storage:
    /// `syncfs` on Linux (one call for a whole unpacked tree), `sync` elsewhere. The engine
    /// calls it before the commit that makes a version active, so a power loss never leaves
    /// a recorded version with files that were not yet on disk.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem``.
    package static func syncFileSystem(containing url: URL) throws {
        #if canImport(Glibc) || canImport(Musl)
            let fd = open(url.path, O_RDONLY | O_DIRECTORY)
            guard fd >= 0 else {
                let code = errno
                throw HotUpdateError(
                    .fileSystem, "cannot open \(url.path) to flush it: \(String(cString: strerror(code)))")
            }
            defer { _ = systemCloseFD(fd) }
            guard let syncfs = linuxSyncfs else {
                sync()
                return
            }
            guard syncfs(fd) == 0 else {
                throw HotUpdateError.system(
                    "cannot flush the file system of \(url.path)", errno: errno, subject: url.path)
            }
        #else
            sync()
        #endif
    }

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

#if canImport(Glibc) || canImport(Musl)
    /// `syncfs(2)`, looked up at run time: glibc declares it only under `_GNU_SOURCE`,
    /// which Swift's system module does not define.
    private let linuxSyncfs: (@convention(c) (Int32) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "syncfs") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int32) -> Int32).self)
    }()
#endif
