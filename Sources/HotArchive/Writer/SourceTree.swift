import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One thing under the directory being packed.
struct SourceItem: Sendable {
    enum Kind: Sendable {
        case file
        case directory
        case symlink(target: String)
    }

    /// Path relative to the packed directory, `/`-separated (no trailing slash).
    var path: String
    var kind: Kind
    /// Permission bits (0o777 at most).
    var permissions: UInt16
    /// The size `lstat` reported, for files.
    var size: Int64

    /// The name stored in the archive: directories end with `/`.
    var archiveName: String {
        if case .directory = kind { return path + "/" }
        return path
    }
}

/// Walks a directory without following symlinks.
enum SourceTree {
    /// Every file, directory and (when stored) symlink under `root`, sorted by
    /// archive name, byte-wise.
    ///
    /// - Parameter skipping: Absolute paths left out (the archive being written).
    /// - Throws: `.invalidArgument` for symlinks when they are refused, for devices,
    ///   FIFOs and sockets, and for names that are not UTF-8; `.fileSystem` when listing fails.
    static func scan(_ root: String, storeSymlinks: Bool, skipping: Set<String>) throws -> [SourceItem] {
        var items: [SourceItem] = []
        var info = stat()
        guard stat(root, &info) == 0 else { throw ArchiveError.system("inspecting", path: root, errno: errno) }
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw HotUpdateError(.invalidArgument, "'\(root)' is not a directory", subject: root)
        }
        try DirectoryWalker.walk(root, skipping: skipping) { entry in
            items.append(try item(entry, storeSymlinks: storeSymlinks))
            return true
        }
        items.sort { $0.archiveName.utf8.lexicographicallyPrecedes($1.archiveName.utf8) }
        return items
    }

    /// What an entry of the walk packs as.
    private static func item(_ entry: DirectoryWalker.Item, storeSymlinks: Bool) throws -> SourceItem {
        let path = entry.path
        let absolute = entry.absolute
        let permissions = entry.permissions & 0o777
        switch entry.kind {
        case .file:
            return SourceItem(path: path, kind: .file, permissions: permissions, size: entry.size)
        case .directory:
            return SourceItem(path: path, kind: .directory, permissions: permissions, size: 0)
        case .symlink:
            guard storeSymlinks else {
                throw HotUpdateError(
                    .invalidArgument,
                    "'\(path)' is a symbolic link; packages carry no links unless ZipWriter.Options.symlinks is .store",
                    subject: absolute
                )
            }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = readlink(absolute, &buffer, buffer.count)
            guard count >= 0 else { throw ArchiveError.system("reading link", path: absolute, errno: errno) }
            guard let target = validUTF8(buffer[0..<count]) else {
                throw HotUpdateError(
                    .invalidArgument,
                    "the target of link '\(path)' is not UTF-8",
                    subject: absolute
                )
            }
            return SourceItem(path: path, kind: .symlink(target: target), permissions: 0o777, size: Int64(count))
        case .other:
            throw HotUpdateError(
                .invalidArgument,
                "'\(path)' is a device, FIFO or socket, which a package cannot carry",
                subject: absolute
            )
        }
    }
}
