import Foundation
import HotCore
import Logging

/// A store's name index opened for the resolvers of this module, with the store's root:
/// which packages names resolve from and which files each one has, answered from the
/// mapped index without reading a file list or the trees.
struct IndexedStore: Sendable {
    let index: NameIndex
    /// Where a damaged block found by a lookup is reported.
    let damage: IndexDamage
    /// The store's root, as the updater was given it.
    let root: URL
    /// The root's path, ending with `/`: made once, for the paths built for every request.
    let rootPath: String
    /// The root with its symbolic links resolved when the store was opened for resolvers
    /// that hand out read-access roots (one `realpath`), else ``root``.
    let resolvedRoot: URL

    /// The index of `updater`'s store for its current snapshot, or nil when there is none
    /// usable (missing, damaged, of another format, or naming a package whose tree is gone):
    /// the reason is logged on the updater's logger, and the caller falls back to the file
    /// lists or the trees.
    ///
    /// - Parameters:
    ///   - rebuilding: Whether a missing or damaged index is rebuilt in the background.
    ///   - resolvingLinks: Whether to resolve the root's symbolic links (``resolvedRoot``).
    static func open(_ updater: Updater, rebuilding: Bool, resolvingLinks: Bool = false) async -> IndexedStore? {
        guard let index = await updater.nameIndex(rebuildingWhenStale: rebuilding),
            treesPresent(index, root: updater.layout.root, logger: updater.configuration.logger)
        else { return nil }
        let root = updater.layout.root
        return IndexedStore(
            index: index,
            damage: IndexDamage(updater: updater, rebuilding: rebuilding),
            root: root,
            rootPath: root.path.hasSuffix("/") ? root.path : root.path + "/",
            resolvedRoot: resolvingLinks ? root.standardizedFileURL.resolvingSymlinksInPath() : root
        )
    }

    /// The directory of package `number` (`<root>/<version path>`).
    func directory(_ number: Int) -> URL {
        root.appendingPathComponent(index.package(number).path, isDirectory: true)
    }

    /// ``directory(_:)`` as a path, built without a URL.
    func directoryPath(_ number: Int) -> String {
        rootPath + index.package(number).path
    }

    /// The same under ``resolvedRoot``.
    func resolvedDirectory(_ number: Int) -> URL {
        resolvedRoot.appendingPathComponent(index.package(number).path, isDirectory: true)
    }

    /// The packages of the index, in the order they win names (as
    /// `Updater.installedPackages()` orders the enabled ones).
    var locations: [InstalledPackage] {
        (0..<index.packageCount).map { number in
            let package = index.package(number)
            return InstalledPackage(id: package.id, version: package.version, directory: directory(number))
        }
    }

    /// Whether package `number` has a regular file at `path` (relative to its tree): from
    /// the index, or, once the index is found damaged, from the tree (a regular file, not a
    /// link, whose real path is inside the package's).
    func contains(package number: Int, path: String) -> Bool {
        do throws(HotUpdateError) {
            return try index.file(package: number, path: path) != nil
        } catch {
            damage.report(error)
            let directory = directory(number).path
            let file = directory + "/" + path
            guard FileSystem.isRegularFile(atPath: file), let real = Self.realPath(file),
                let inside = Self.realPath(directory)
            else { return false }
            return real.hasPrefix(inside + "/")
        }
    }

    /// `path` with its links resolved, or nil when it cannot be.
    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

/// Whether the tree of every package of `index` is there (one `stat` per package): a tree
/// gone without the store knowing would leave names the index gives it pointing at nothing,
/// and the index cannot say which package comes next for them, so the callers then fall
/// back to the file lists, which leave that package out.
func treesPresent(_ index: NameIndex, root: URL, logger: Logger) -> Bool {
    let base = root.path.hasSuffix("/") ? root.path : root.path + "/"
    for number in 0..<index.packageCount {
        let package = index.package(number)
        // Each directory of the path is a real one: a link in place of one (perhaps out of the
        // store) is never served; the file lists' path leaves that package out and marks it.
        guard ContainedDirectory.isReal(package.path, under: base) else {
            logger.warning(
                "a package's tree is gone or not a directory inside the store: resolving through the file lists",
                metadata: ["package": "\(package.id)", "version": "\(package.version)"]
            )
            return false
        }
    }
    return true
}
