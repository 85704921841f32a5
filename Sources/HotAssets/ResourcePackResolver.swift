import Foundation
import HotCore
import Logging

/// A resource pack opened from an installed package: its index, and for every handled type
/// the name → local file URL of each listed resource.
///
/// The URLs are computed from the package's directory of this launch and live only in
/// memory: never store them (an app's container moves between launches). Store the pack id
/// and resource names, and open the pack again.
public struct ResourcePack: Sendable, Hashable {
    /// The package the pack is installed as.
    public var packageID: String
    /// The package's installed version.
    public var version: String
    /// The package's installed tree.
    public var directory: URL
    /// The pack's `index.json`.
    public var index: ResourcePackIndex
    /// Name → file, for each handled type the index lists.
    public var resources: [ResourceType: [String: URL]]

    /// The file of resource `name` of `type`, or nil when the pack does not list it.
    public func url(for name: String, type: ResourceType) -> URL? {
        resources[type]?[name]
    }
}

/// Opens resource packs: packages carrying an `index.json` (``ResourcePackIndex``) that
/// lists typed resources, as resource-pack servers publish them (overlays, images, filters,
/// fonts).
///
/// Only the types in ``types`` are handled; the index's other lists are ignored. Every name
/// of a handled type is checked before the pack is returned: it must be relative, without
/// `..`, `.` or empty components or a backslash, and name a regular file inside the package
/// (a symbolic link leading out of it is refused). A pack breaking any rule is refused
/// whole, with the offending name in the error, so an app never shows half a pack.
///
/// ```swift
/// let resolver = ResourcePackResolver()          // overlay, image, filter, font
/// let library = resolver.open(try await updater.installedPackages())
/// if let blend = library.url(for: "blend.jpg", type: .overlay) { show(blend) }
/// for (id, error) in library.failures { log("pack \(id): \(error)") }
/// ```
public struct ResourcePackResolver: Sendable {
    /// The types handled.
    public var types: Set<ResourceType>

    /// Creates a resolver.
    ///
    /// - Parameter types: The types handled; ``ResourceType/defaults`` (overlay, image, filter,
    ///   font) unless the app says otherwise.
    public init(types: Set<ResourceType> = ResourceType.defaults) {
        self.types = types
    }

    /// Opens the pack installed as `package`.
    ///
    /// - Parameter package: The installed package.
    /// - Returns: The pack, every handled resource checked.
    /// - Throws: `HotUpdateError` naming the package: `HotUpdateError.Code.notFound` (no
    ///   `index.json`, or a listed file is missing), `HotUpdateError.Code.manifestInvalid` (a
    ///   malformed index), `HotUpdateError.Code.unsafeEntry` (a name that is absolute, has
    ///   `..`, or leads out of the package).
    public func open(_ package: InstalledPackage) throws -> ResourcePack {
        try open(package, root: nil, has: nil)
    }

    /// Opens the pack installed as `package`, checking each listed name with `has` (the
    /// store's name index: whether the package has that regular file) when given, else on
    /// the file system. `root` is the package's directory with symbolic links resolved,
    /// when known.
    private func open(
        _ package: InstalledPackage,
        root: URL?,
        has: ((String) -> Bool)?
    ) throws
        -> ResourcePack
    {
        do {
            let index = try ResourcePackIndex.load(fromPackage: package.directory)
            let root = root ?? package.directory.standardizedFileURL.resolvingSymlinksInPath()
            var resources: [ResourceType: [String: URL]] = [:]
            for (type, names) in index.names where types.contains(type) {
                var files: [String: URL] = [:]
                for name in names {
                    if let has {
                        let components = try Self.checkedComponents(of: name, type: type)
                        guard has(name) else { throw Self.notAFile(name, type: type) }
                        files[name] = components.reduce(root) { $0.appendingPathComponent(String($1)) }
                    } else {
                        files[name] = try Self.file(named: name, type: type, in: root)
                    }
                }
                resources[type] = files
            }
            return ResourcePack(
                packageID: package.id,
                version: package.version,
                directory: package.directory,
                index: index,
                resources: resources
            )
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot open the resource pack", packageID: package.id)
        }
    }

    /// Opens every package that is a resource pack (has an `index.json`); packages without one
    /// are skipped, packs that fail to open are reported in ``ResourcePackLibrary/failures``.
    ///
    /// - Parameter packages: The installed packages, the one to prefer first (as
    ///   `Updater.installedPackages()` orders them: most recently installed first).
    public func open(_ packages: [InstalledPackage]) -> ResourcePackLibrary {
        var packs: [ResourcePack] = []
        var failures: [String: HotUpdateError] = [:]
        for package in packages {
            let index = package.directory.appendingPathComponent(ResourcePackIndex.fileName)
            guard FileManager.default.fileExists(atPath: index.path) else { continue }
            do {
                packs.append(try open(package))
            } catch {
                failures[package.id] = HotUpdateError.wrap(error, as: .fileSystem, "cannot open", packageID: package.id)
            }
        }
        return ResourcePackLibrary(packs: packs, failures: failures)
    }

    /// Opens every resource pack among the packages `updater` has installed and not
    /// disabled, checking each listed resource against the store's name index: which
    /// packages carry an `index.json` and whether each listed file is one of the package's
    /// regular files is answered from the mapped index (each pack's `index.json` is read),
    /// then one `stat` per listed file finds those deleted since they were installed: such a
    /// pack is refused until the next sync heals it (it is marked for that sync).
    ///
    /// When the store has no usable index for its current snapshot (missing, damaged, of an
    /// older format, or naming a tree that is gone; the reason is logged on the updater's
    /// logger), the packs are opened from `Updater.installedPackages()` on the file system,
    /// as opening a list of packages does; when the store cannot be read at
    /// all, the library is empty.
    ///
    /// ```swift
    /// let library = await ResourcePackResolver().open(updater: updater)
    /// if let blend = library.url(for: "blend.jpg", type: .overlay) { show(blend) }
    /// ```
    ///
    /// - Parameters:
    ///   - updater: The updater whose installed packages are opened, most recently installed first.
    ///   - rebuildingIndex: Whether a missing or damaged name index is rebuilt in the
    ///     background (under the store's exclusive lock); false for read-only use.
    public func open(updater: Updater, rebuildingIndex: Bool = true) async -> ResourcePackLibrary {
        guard let store = await IndexedStore.open(updater, rebuilding: rebuildingIndex, resolvingLinks: true) else {
            do {
                return open(try await updater.installedPackages())
            } catch {
                updater.configuration.logger.error("the store cannot be read; no resource packs: \(error)")
                return ResourcePackLibrary(packs: [])
            }
        }
        var packs: [ResourcePack] = []
        var failures: [String: HotUpdateError] = [:]
        for (number, package) in store.locations.enumerated()
        where store.contains(package: number, path: ResourcePackIndex.fileName) {
            do {
                let directory = store.directory(number).path + "/"
                packs.append(
                    try open(package, root: store.resolvedDirectory(number)) { name in
                        guard store.contains(package: number, path: name) else { return false }
                        // Installed, and gone since: the pack is refused whole, as for any
                        // listed file it lacks, and marked for the next sync to heal.
                        guard FileSystem.isRegularFile(atPath: directory + name) else {
                            store.damage.reportLoss(package: number, id: package.id, path: name, root: store.root)
                            return false
                        }
                        return true
                    }
                )
            } catch {
                failures[package.id] = HotUpdateError.wrap(error, as: .fileSystem, "cannot open", packageID: package.id)
            }
        }
        return ResourcePackLibrary(packs: packs, failures: failures)
    }

    /// The components of resource `name`, checked: relative, without `..`, `.` or empty
    /// components, a backslash or a NUL.
    static func checkedComponents(of name: String, type: ResourceType) throws -> [Substring] {
        let components = name.split(separator: "/", omittingEmptySubsequences: false)
        guard !name.isEmpty, !name.hasPrefix("/"), !name.contains("\\"), !name.utf8.contains(0),
            components.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." })
        else {
            throw HotUpdateError(
                .unsafeEntry,
                "\(type) resource '\(name)' must be a relative path without '..', '.', empty components or '\\'",
                subject: name
            )
        }
        return components
    }

    /// The error for a listed name that is not a file of the package.
    private static func notAFile(_ name: String, type: ResourceType) -> HotUpdateError {
        HotUpdateError(
            .notFound,
            "\(type) resource '\(name)' listed in index.json is not a file of the package",
            subject: name
        )
    }

    /// Checks `name` and returns its file under `root` (already free of symbolic links).
    static func file(named name: String, type: ResourceType, in root: URL) throws -> URL {
        let components = try checkedComponents(of: name, type: type)
        let url = components.reduce(root) { $0.appendingPathComponent(String($1)) }
        let resolved = url.resolvingSymlinksInPath()
        guard resolved.path.hasPrefix(root.path + "/") else {
            throw HotUpdateError(.unsafeEntry, "\(type) resource '\(name)' leads out of the package", subject: name)
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: resolved.path, isDirectory: &isDirectory), !isDirectory.boolValue
        else {
            throw notAFile(name, type: type)
        }
        return url
    }
}

/// The resource packs among the installed packages.
public struct ResourcePackLibrary: Sendable {
    /// The packs, in the order the packages were given (the preferred first).
    public var packs: [ResourcePack]
    /// The packages that carry an `index.json` but could not be opened, by package id.
    public var failures: [String: HotUpdateError]

    /// Creates a library.
    public init(packs: [ResourcePack], failures: [String: HotUpdateError] = [:]) {
        self.packs = packs
        self.failures = failures
    }

    /// The pack installed as `packageID`, or nil.
    public func pack(packageID: String) -> ResourcePack? {
        packs.first { $0.packageID == packageID }
    }

    /// The pack whose `index.json` has `id`, or nil.
    public func pack(indexID: String) -> ResourcePack? {
        packs.first { $0.index.id == indexID }
    }

    /// The file of resource `name` of `type` from the first pack listing it, or nil.
    public func url(for name: String, type: ResourceType) -> URL? {
        for pack in packs {
            if let url = pack.url(for: name, type: type) { return url }
        }
        return nil
    }

    /// Every resource of `type`, name → file; a name in several packs maps to the first pack's.
    public func resources(of type: ResourceType) -> [String: URL] {
        var result: [String: URL] = [:]
        for pack in packs.reversed() {
            result.merge(pack.resources[type] ?? [:]) { _, preferred in preferred }
        }
        return result
    }
}
