import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The sibling directory an extraction writes into (`<parent>/.<name>.partial-<uuid>`),
/// renamed onto the destination when every entry has succeeded and removed otherwise,
/// so the destination is either complete or untouched.
///
/// Files are created with `O_CREAT | O_EXCL | O_NOFOLLOW`: nothing is ever
/// written through a symlink or over an existing file.
struct PartialDirectory: Sendable {
    /// The destination's absolute path, its parent's symlinks resolved.
    let destination: String
    /// The partial directory's absolute path.
    let root: String
    /// Whether the process umask may take owner bits from the modes files are created
    /// with, so each needs an `fchmod` after `open` (true unless the umask is known).
    let umaskMasksOwnerBits: Bool

    /// Checks `destination` and creates the partial directory beside it.
    ///
    /// - Throws: `HotUpdateError.Code.invalidArgument` when the destination exists and
    ///   is not an empty directory; `HotUpdateError.Code.fileSystem` when the partial
    ///   directory cannot be created.
    static func create(for destination: URL) throws -> PartialDirectory {
        let standardized = destination.standardizedFileURL
        let name = standardized.lastPathComponent
        guard !name.isEmpty, name != "/", name != ".", name != ".." else {
            throw HotUpdateError(
                .invalidArgument,
                "'\(destination.path)' cannot be an extraction destination",
                subject: destination.path
            )
        }
        let parentURL = standardized.deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: parentURL, withIntermediateDirectories: true)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "creating '\(parentURL.path)'")
        }
        guard let resolved = realpath(parentURL.path, nil) else {
            throw ArchiveError.system("resolving", path: parentURL.path, errno: errno)
        }
        let parent = String(cString: resolved)
        free(resolved)
        let destinationPath = parent == "/" ? "/" + name : parent + "/" + name

        var info = stat()
        if lstat(destinationPath, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFDIR, try isEmptyDirectory(destinationPath) else {
                throw HotUpdateError(
                    .invalidArgument,
                    "the destination '\(destinationPath)' exists and is not an empty directory",
                    subject: destinationPath
                )
            }
        } else if errno != ENOENT {
            throw ArchiveError.system("inspecting destination", path: destinationPath, errno: errno)
        }
        let root = (parent == "/" ? "" : parent) + "/.\(name).partial-\(UUID().uuidString)"
        guard mkdir(root, 0o700) == 0 else {
            throw ArchiveError.system("creating partial directory", path: root, errno: errno)
        }
        let umask = processUmask()
        return PartialDirectory(
            destination: destinationPath,
            root: root,
            umaskMasksOwnerBits: umask.map { $0 & 0o700 != 0 } ?? true
        )
    }

    /// The process umask, read without changing it (`umask(2)` can only set it, and setting
    /// it would race with other threads creating files): Linux reports it in
    /// `/proc/self/status`. Nil where it cannot be read.
    private static func processUmask() -> mode_t? {
        let fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        for line in bytes.split(separator: UInt8(ascii: "\n")) where line.starts(with: Array("Umask:".utf8)) {
            let digits = line.dropFirst(6).filter { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }
            return mode_t(String(decoding: digits, as: UTF8.self), radix: 8)
        }
        return nil
    }

    private static func isEmptyDirectory(_ path: String) throws -> Bool {
        guard let handle = opendir(path) else {
            throw ArchiveError.system("listing destination", path: path, errno: errno)
        }
        defer { closedir(handle) }
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { return false }
        }
        return true
    }

    /// The absolute path of `relative` inside the partial directory.
    func path(_ relative: String) -> String { root + "/" + relative }

    /// Creates `directories` (parents listed before children) with mode 0o700.
    func createDirectories(_ directories: [String]) throws {
        for directory in directories {
            let path = path(directory)
            guard mkdir(path, 0o700) == 0 else {
                throw ArchiveError.system("creating directory", path: path, errno: errno)
            }
        }
    }

    /// Creates a new regular file for writing; never follows a symlink, never replaces a file.
    func createFile(_ relative: String, mode: UInt16) throws -> Int32 {
        let path = path(relative)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode_t(mode))
        guard fd >= 0 else { throw ArchiveError.system("creating file", path: path, errno: errno) }
        // The process umask must not change the owner bits the policy grants.
        if umaskMasksOwnerBits, fchmod(fd, mode_t(mode)) != 0 {
            let code = errno
            close(fd)
            throw ArchiveError.system("setting the mode of", path: path, errno: code)
        }
        return fd
    }

    /// Creates a symbolic link at `relative` pointing to `target`.
    func createSymlink(_ relative: String, target: String) throws {
        let path = path(relative)
        guard symlink(target, path) == 0 else {
            throw ArchiveError.system("creating symlink", path: path, errno: errno)
        }
    }

    /// Moves the partial directory onto the destination (replacing it if it is an empty directory).
    func commit() throws {
        guard rename(root, destination) == 0 else {
            let code = errno
            if code == ENOTEMPTY || code == EEXIST || code == ENOTDIR {
                throw HotUpdateError(
                    .invalidArgument,
                    "the destination '\(destination)' was filled while the archive was being extracted",
                    subject: destination
                )
            }
            throw ArchiveError.system("moving the extracted tree to", path: destination, errno: code)
        }
    }

    /// Removes the partial directory and everything in it (links are removed, not followed).
    func discard() {
        try? FileManager.default.removeItem(atPath: root)
    }
}

/// Writes all of `bytes` to `fd`.
func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: @autoclosure () -> String) throws {
    guard var base = bytes.baseAddress else { return }
    var left = bytes.count
    while left > 0 {
        let n = write(fd, base, left)
        if n < 0 {
            if errno == EINTR { continue }
            throw ArchiveError.system("writing", path: path(), errno: errno)
        }
        base += n
        left -= n
    }
}

extension PartialDirectory {
    /// Runs one extraction of `archive` into `destination`, all or nothing: the part
    /// both unarchivers share.
    ///
    /// Off the cooperative pool, `makePlan` reads and checks the archive (nothing is
    /// written before it succeeds) and the partial directory is created beside the
    /// destination; then the plan's directories are created, `run` writes the files
    /// (on threads of its own, recording failures in the state), and ``finish(_:_:)``
    /// creates the links and moves the tree into place. On any failure or cancellation
    /// the partial directory is removed and the destination is left as it was.
    ///
    /// - Parameters:
    ///   - makePlan: Reads the archive's structure and admits its entries.
    ///   - run: Writes the plan's files into the partial directory, given how many workers
    ///     the options allow (``ExtractOptions/concurrency``, or one per active core).
    /// - Throws: ``HotUpdateError``, from the plan, the workers or the file system.
    static func extract(
        _ archive: URL,
        to destination: URL,
        options: ExtractOptions,
        progress: (@Sendable (ExtractionReport.Progress) -> Void)?,
        plan makePlan: @escaping @Sendable (ReadOnlyFile) throws -> ZipArchivePlan,
        run: (
            _ file: ReadOnlyFile, _ plan: ZipArchivePlan, _ partial: PartialDirectory, _ state: ExtractionState,
            _ workers: Int
        ) async -> Void
    ) async throws -> ExtractionReport {
        try Task.checkCancellation()
        let name = archive.lastPathComponent
        let (file, plan, partial) = try await BlockingThreads.perform {
            do {
                let file = try ReadOnlyFile(archive)
                let plan = try makePlan(file)
                return (file, plan, try PartialDirectory.create(for: destination))
            } catch {
                throw HotUpdateError.wrap(error, as: .fileSystem, "extracting '\(name)'")
            }
        }
        let state = ExtractionState(
            archive: name,
            entriesTotal: plan.entries.count,
            bytesTotal: plan.declaredBytes,
            maxTotalBytes: options.maxTotalBytes,
            progress: progress
        )
        do {
            try partial.createDirectories(plan.directories)
            let explicitDirectories = plan.entries.count(where: { $0.kind == .directory })
            if explicitDirectories > 0 { state.finished(entries: explicitDirectories) }

            let workers = options.concurrency > 0 ? options.concurrency : ProcessInfo.processInfo.activeProcessorCount
            await withTaskCancellationHandler {
                await run(file, plan, partial, state, max(1, workers))
            } onCancel: {
                state.cancel()
            }
            if let failure = state.outcome { throw failure }

            return try partial.finish(plan, state)
        } catch {
            partial.discard()
            throw HotUpdateError.wrap(error, as: .fileSystem, "extracting '\(name)'")
        }
    }

    /// Ends a successful extraction: creates the plan's symlinks last, once every file is
    /// written and closed, so nothing is ever written through one; moves the partial
    /// directory into place; and reports what was written.
    private func finish(_ plan: ZipArchivePlan, _ state: ExtractionState) throws -> ExtractionReport {
        var links: [String] = []
        for entry in plan.entries where entry.kind == .symlink {
            guard let target = entry.linkTarget else {
                throw HotUpdateError(
                    .internalInconsistency,
                    "symlink '\(entry.name)' was admitted without a target",
                    subject: entry.name
                )
            }
            try createSymlink(entry.path, target: target)
            links.append(entry.path)
            state.finished()
        }
        try Task.checkCancellation()
        try commit()
        let files = state.writtenFiles
        return ExtractionReport(
            files: files,
            directories: plan.directories,
            symlinks: links,
            totalBytes: files.reduce(0) { $0 + $1.size }
        )
    }
}
