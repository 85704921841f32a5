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
        try walk(root, relative: "", storeSymlinks: storeSymlinks, skipping: skipping, into: &items)
        items.sort { $0.archiveName.utf8.lexicographicallyPrecedes($1.archiveName.utf8) }
        return items
    }

    private static func walk(
        _ directory: String,
        relative: String,
        storeSymlinks: Bool,
        skipping: Set<String>,
        into items: inout [SourceItem]
    ) throws {
        guard let handle = opendir(directory) else {
            throw ArchiveError.system("listing", path: directory, errno: errno)
        }
        var names: [String] = []
        defer { closedir(handle) }
        while let entry = readdir(handle) {
            let bytes = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix(while: { $0 != 0 })) }
            guard let name = validUTF8(bytes) else {
                throw HotUpdateError(
                    .invalidArgument,
                    "'\(directory)' holds a name that is not UTF-8, which a package cannot carry",
                    subject: directory
                )
            }
            if name != "." && name != ".." { names.append(name) }
        }
        for name in names {
            let absolute = directory + "/" + name
            if skipping.contains(absolute) { continue }
            let path = relative.isEmpty ? name : relative + "/" + name
            var info = stat()
            guard lstat(absolute, &info) == 0 else {
                throw ArchiveError.system("inspecting", path: absolute, errno: errno)
            }
            let permissions = UInt16(info.st_mode & 0o777)
            switch info.st_mode & S_IFMT {
            case S_IFREG:
                items.append(SourceItem(path: path, kind: .file, permissions: permissions, size: Int64(info.st_size)))
            case S_IFDIR:
                items.append(SourceItem(path: path, kind: .directory, permissions: permissions, size: 0))
                try walk(absolute, relative: path, storeSymlinks: storeSymlinks, skipping: skipping, into: &items)
            case S_IFLNK:
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
                items.append(
                    SourceItem(path: path, kind: .symlink(target: target), permissions: 0o777, size: Int64(count))
                )
            default:
                throw HotUpdateError(
                    .invalidArgument,
                    "'\(path)' is a device, FIFO or socket, which a package cannot carry",
                    subject: absolute
                )
            }
        }
    }
}
