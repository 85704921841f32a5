import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The one walk of a directory tree in the package: `readdir` and `lstat`, never following
/// a symbolic link, names in byte order within each directory. The packer, the asset
/// indexes, local folders and the repository's listing all walk through it.
///
/// ```swift
/// try DirectoryWalker.walk("/tmp/tree") { item in
///     if item.kind == .file { print(item.path, item.size) }
///     return true  // descend into directories
/// }
/// ```
package enum DirectoryWalker {
    /// What an entry is, as `lstat` reports it.
    package enum Kind: Sendable, Hashable {
        case file
        case directory
        case symlink
        /// A device, FIFO or socket.
        case other
    }

    /// One entry under the root.
    package struct Item: Sendable, Hashable {
        /// The path relative to the root, `/`-separated.
        package var path: String
        /// The absolute path.
        package var absolute: String
        /// The entry's name (the last component of ``path``).
        package var name: String
        package var kind: Kind
        /// The permission bits.
        package var permissions: UInt16
        /// The size `lstat` reports (a link's target length for a link).
        package var size: Int64
    }

    /// Visits every entry under `root` depth first; `visit` returns whether to descend into
    /// a directory (ignored for other kinds).
    ///
    /// - Parameters:
    ///   - root: An existing directory.
    ///   - skipping: Absolute paths left out, with what is under them.
    /// - Throws: `HotUpdateError.Code.invalidArgument` for a name that is not UTF-8;
    ///   `HotUpdateError.Code.notFound` or `.fileSystem` when a directory cannot be listed or
    ///   an entry inspected; what `visit` throws.
    package static func walk(
        _ root: String,
        skipping: Set<String> = [],
        _ visit: (Item) throws -> Bool
    ) throws {
        try walk(root, relative: "", skipping: skipping, visit)
    }

    private static func walk(
        _ directory: String,
        relative: String,
        skipping: Set<String>,
        _ visit: (Item) throws -> Bool
    ) throws {
        for name in try names(in: directory) {
            let absolute = directory.hasSuffix("/") ? directory + name : directory + "/" + name
            if skipping.contains(absolute) { continue }
            let path = relative.isEmpty ? name : relative + "/" + name
            var info = stat()
            guard lstat(absolute, &info) == 0 else {
                throw HotUpdateError.system("cannot inspect \(absolute)", errno: errno, subject: absolute)
            }
            let kind: Kind =
                switch info.st_mode & S_IFMT {
                case S_IFREG: .file
                case S_IFDIR: .directory
                case S_IFLNK: .symlink
                default: .other
                }
            let item = Item(
                path: path,
                absolute: absolute,
                name: name,
                kind: kind,
                permissions: UInt16(info.st_mode & 0o7777),
                size: Int64(info.st_size)
            )
            if try visit(item), kind == .directory {
                try walk(absolute, relative: path, skipping: skipping, visit)
            }
        }
    }

    /// The names in `directory` but `.` and `..`, in byte order.
    private static func names(in directory: String) throws -> [String] {
        guard let handle = opendir(directory) else {
            let code = errno
            throw HotUpdateError.system(
                "cannot list \(directory)",
                errno: code,
                otherwise: code == ENOENT ? .notFound : .fileSystem,
                subject: directory
            )
        }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let bytes = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix(while: { $0 != 0 })) }
            let name = String(decoding: bytes, as: UTF8.self)
            guard name.utf8.elementsEqual(bytes) else {
                throw HotUpdateError(
                    .invalidArgument,
                    "'\(directory)' holds a name that is not UTF-8, which a package cannot carry",
                    subject: directory
                )
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }
}
