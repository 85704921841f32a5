import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Checks that a path under the store root is made of real directories, none of them a
/// symbolic link (which could lead out of the store) or another kind of file, and makes it so.
///
/// The store's trees are reached through `packages/<id>/<version>/` and the folders inside: a
/// component replaced by a link to a directory elsewhere would have readers serve, and repairs
/// write, files outside the root. Every component is looked at with `lstat`, which never
/// follows a link; the root itself may be a link (the app chooses it).
package enum ContainedDirectory {
    /// What a path under the root is made of.
    package enum Finding: Sendable, Hashable {
        /// Every component is a real directory.
        case real
        /// A component is missing (and every one above it is a real directory).
        case missing
        /// A component is a symbolic link or not a directory: its path relative to the root.
        case foreign(String)
    }

    /// Looks at each component of `relative` (`/`-separated) under `root`, from the top.
    package static func check(_ relative: String, under root: String) -> Finding {
        let base = root.hasSuffix("/") ? String(root.dropLast()) : root
        var path = base
        var prefix = ""
        for component in relative.split(separator: "/") {
            path += "/" + component
            prefix += (prefix.isEmpty ? "" : "/") + component
            var info = stat()
            guard lstat(path, &info) == 0 else { return .missing }
            guard (info.st_mode & S_IFMT) == S_IFDIR else { return .foreign(prefix) }
        }
        return .real
    }

    /// Looks at each component of `tree` below `root` (see ``check(_:under:)``); a tree that
    /// is not under `root` is foreign.
    package static func check(tree: URL, root: URL) -> Finding {
        let base = root.path.hasSuffix("/") ? root.path : root.path + "/"
        let path = tree.path
        guard path.hasPrefix(base), path.count > base.count else { return .foreign(path) }
        return check(String(path.dropFirst(base.count)), under: root.path)
    }

    /// Whether every component of `relative` under `root` is a real directory.
    package static func isReal(_ relative: String, under root: String) -> Bool {
        check(relative, under: root) == .real
    }

    /// Makes every component of `relative` under `root` a real directory: a symbolic link or
    /// a file in the way is removed (a link itself, never what it points to) and a directory
    /// made in its place; missing ones are made.
    ///
    /// - Returns: The components that were removed, relative to the root.
    /// - Throws: ``HotUpdateError/Code/fileSystem`` when one cannot be removed or made.
    @discardableResult
    package static func make(_ relative: String, under root: String) throws -> [String] {
        let base = root.hasSuffix("/") ? String(root.dropLast()) : root
        var path = base
        var prefix = ""
        var removed: [String] = []
        for component in relative.split(separator: "/") {
            path += "/" + component
            prefix += (prefix.isEmpty ? "" : "/") + component
            var info = stat()
            if lstat(path, &info) == 0 {
                if (info.st_mode & S_IFMT) == S_IFDIR { continue }
                // unlink removes the link (or file) itself; nothing it points to is touched.
                guard unlink(path) == 0 || errno == ENOENT else {
                    throw HotUpdateError(
                        .fileSystem,
                        "cannot remove \(prefix), which is not a directory inside the store: \(String(cString: strerror(errno)))",
                        subject: path
                    )
                }
                removed.append(prefix)
            }
            guard mkdir(path, 0o755) == 0 || errno == EEXIST else {
                throw HotUpdateError(
                    .fileSystem,
                    "cannot create \(prefix): \(String(cString: strerror(errno)))",
                    subject: path
                )
            }
            // Made by another writer meanwhile: it must be a real directory all the same.
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
                throw HotUpdateError(.fileSystem, "\(prefix) is not a directory inside the store", subject: path)
            }
        }
        return removed
    }

    /// The paths of `files` (relative to `tree`, `/`-separated) that are regular files reached
    /// through real directories only (see ``Folders``).
    package static func regularFiles(_ files: [String], under tree: String) -> [String] {
        var folders = Folders(tree: tree)
        return files.filter { folders.holdsReal($0) && FileSystem.isRegularFile(atPath: folders.base + $0) }
    }

    /// Whether the folders of files inside a tree are real directories: each folder is looked
    /// at once (one `lstat`), and remembered for the other files in it.
    package struct Folders {
        /// The tree's path, ending in `/`.
        package let base: String
        private var known: [Substring: Bool] = ["": true]

        /// A check of the folders under `tree`.
        package init(tree: String) {
            base = tree.hasSuffix("/") ? tree : tree + "/"
        }

        /// Whether every folder above `file` (relative to the tree) is a real directory.
        package mutating func holdsReal(_ file: String) -> Bool {
            isReal(file.lastIndex(of: "/").map { file[..<$0] } ?? "")
        }

        /// Whether `folder` (relative to the tree) and every folder above it are real
        /// directories.
        package mutating func isRealFolder(_ folder: String) -> Bool {
            isReal(Substring(folder))
        }

        private mutating func isReal(_ folder: Substring) -> Bool {
            if let found = known[folder] { return found }
            let parent = folder.lastIndex(of: "/").map { folder[..<$0] } ?? ""
            var info = stat()
            let real = isReal(parent) && lstat(base + String(folder), &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
            known[folder] = real
            return real
        }
    }
}
