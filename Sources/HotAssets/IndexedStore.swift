import Foundation
import HotCore
import Logging

/// A store's name index opened for the resolvers of this module, with the store's root:
/// which packages names resolve from and which files each one has, answered from the
/// mapped index without reading a file list or the trees.
struct IndexedStore: Sendable {
    let index: NameIndex
    /// The store's root, as the updater was given it.
    let root: URL
    /// The directory of each package of the index (`<root>/<version path>`), in index order.
    let directories: [URL]
    /// The same with the root's symbolic links resolved (one `realpath` when opened), as
    /// the resolvers that hand out read-access roots and file URLs need them.
    let resolvedDirectories: [URL]

    /// The index of `updater`'s store for its current snapshot, or nil when there is none
    /// usable (missing, damaged, of another format, or naming a package whose tree is gone):
    /// the reason is logged on the updater's logger, and the caller falls back to the file
    /// lists or the trees.
    ///
    /// - Parameter rebuilding: Whether a missing or damaged index is rebuilt in the background.
    static func open(_ updater: Updater, rebuilding: Bool) async -> IndexedStore? {
        guard let index = await updater.nameIndex(rebuildingWhenStale: rebuilding),
            treesPresent(index, root: updater.layout.root, logger: updater.configuration.logger)
        else { return nil }
        return IndexedStore(index: index, root: updater.layout.root)
    }

    init(index: NameIndex, root: URL) {
        self.index = index
        self.root = root
        let paths = (0..<index.packageCount).map { index.package($0).path }
        directories = paths.map { root.appendingPathComponent($0, isDirectory: true) }
        let resolvedRoot = root.standardizedFileURL.resolvingSymlinksInPath()
        resolvedDirectories = paths.map { resolvedRoot.appendingPathComponent($0, isDirectory: true) }
    }

    /// The packages of the index, in the order they win names (as
    /// `Updater.installedPackages()` orders the enabled ones).
    var locations: [InstalledPackageLocation] {
        (0..<index.packageCount).map { number in
            let package = index.package(number)
            return InstalledPackageLocation(id: package.id, version: package.version, directory: directories[number])
        }
    }

    /// Whether package `number` has a regular file at `path` (relative to its tree).
    func contains(package number: Int, path: String) -> Bool {
        index.file(package: number, path: path) != nil
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
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: base + package.path, isDirectory: &isDirectory),
            isDirectory.boolValue
        else {
            logger.warning(
                "a package's tree is gone: resolving through the file lists",
                metadata: ["package": "\(package.id)", "version": "\(package.version)"]
            )
            return false
        }
    }
    return true
}
