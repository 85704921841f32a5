import Foundation
import HotCore
import Logging

/// Keeps the store's name index (`index/names-<generation>`): a HotCore `StoreCommitHook`
/// that writes, in every commit, before the store file, the index of the generation the
/// commit creates. The resolvers made from an updater
/// (``AssetResolverChain/make(updater:bundle:scales:extensionOrder:rebuildingIndex:)``,
/// ``WebModuleResolver/make(modules:updater:inactiveModuleIDs:rebuildingIndex:)``,
/// ``ResourcePackResolver/open(updater:rebuildingIndex:)``) map it at launch and answer from
/// it without reading a file list; without it they resolve through the file lists, and
/// rebuild the index for the snapshot they read.
///
/// Each generation has its own file, so a kill at any moment leaves the index of the
/// snapshot in place: before the store file's rename the old snapshot and its index stand
/// (the new index is an unused file), after it the new ones. The index of the previous
/// generation is kept for readers that read the snapshot just before a commit; older ones
/// are removed after the commit.
///
/// ```swift
/// var configuration = UpdaterConfiguration(root: root, transport: transport, unarchiver: unarchiver,
///                                          verifier: verifier, store: store)
/// configuration.commitHooks = [NameIndexWriter()]
/// let updater = Updater(configuration: configuration)
/// ```
///
/// The writer also holds the index last mapped for the resolvers made from an updater it is
/// registered with, so they map each generation's index once.
public struct NameIndexWriter: StoreCommitHook {
    /// The indexes last mapped, by store root.
    let mapped = MappedNameIndexes()

    /// Creates a writer.
    public init() {}

    /// Writes the index of `commit.next` durably: a copy of the previous generation's index
    /// when nothing that resolves changed, else one built from the file lists. A failure is
    /// logged: the commit goes ahead, and readers of a generation without an index resolve
    /// through the file lists.
    public func willCommit(_ commit: StoreCommitContext) async {
        let layout = StoreLayout(root: commit.root)
        let generation = commit.generation
        let target = NameIndex.url(in: layout, generation: generation)
        do {
            let packages = Self.indexPackages(of: commit.next)
            var data: Data?
            if Self.indexPackages(of: commit.previous) == packages {
                let previous = commit.previous.generation
                let previousURL = NameIndex.url(in: layout, generation: previous)
                data = try? await FileSystem.offload { () -> Data? in
                    try NameIndex(layout: layout, generation: previous).verifyAll()
                    return NameIndexFormat.retagged(try Data(contentsOf: previousURL), generation: generation)
                }
            }
            if data == nil {
                data = try await Self.build(
                    packages,
                    generation: generation,
                    layout: layout,
                    logger: commit.logger,
                    fileList: commit.fileList(forVersionPath:)
                )
            }
            guard let data else { return }
            try await Self.write(data, layout: layout, generation: generation)
            FaultPoint.reached("after-index")
        } catch {
            try? FileSystem.remove(target)
            commit.logger.warning(
                "cannot write the name index; names resolve through the file lists until it is rebuilt: \(error)",
                metadata: ["generation": "\(generation)"]
            )
        }
    }

    /// Removes the index files of generations other than `generation` and the one before,
    /// and temporary files.
    public func removeLeftovers(keeping generation: Int, root: URL, logger: Logger) async {
        Self.removeOldIndexes(layout: StoreLayout(root: root), keeping: generation)
    }

    /// Whether the index of `generation` is gone from `root`: one `stat`. A sync that finds
    /// it gone writes it again.
    public func isMissing(generation: Int, root: URL) -> Bool {
        !FileSystem.isRegularFile(atPath: NameIndex.url(in: StoreLayout(root: root), generation: generation).path)
    }

    // MARK: - The files

    /// Writes `data` as the index of `generation`, durably.
    static func write(_ data: Data, layout: StoreLayout, generation: Int) async throws {
        try await FileSystem.offload {
            try FileSystem.createDirectory(NameIndex.directory(in: layout))
            try FileSystem.replaceDurably(
                NameIndex.url(in: layout, generation: generation),
                with: data,
                chunkSize: NameIndexFormat.writeChunk
            )
        }
    }

    /// Removes the index files of generations other than `generation` and the one before,
    /// and temporary files; under the exclusive lock.
    static func removeOldIndexes(layout: StoreLayout, keeping generation: Int) {
        let directory = NameIndex.directory(in: layout)
        for name in FileSystem.contents(of: directory) {
            if name.hasPrefix("names-"), let number = Int(name.dropFirst("names-".count)),
                number == generation || number == generation - 1
            {
                continue
            }
            try? FileSystem.remove(directory.appendingPathComponent(name))
        }
    }

    // MARK: - The content

    /// The packages names resolve from, in the order they win: every package with an active
    /// version that is not disabled or known to be damaged, most recently installed first
    /// (as `Updater.installedPackages()` orders them).
    static func resolvingPackages(of snapshot: StoreSnapshot) -> [(record: PackageRecord, active: InstalledVersion)] {
        snapshot.packages.values.compactMap { record in
            guard let active = record.active, record.state.servesAssets else {
                return nil
            }
            return (record, active)
        }
        .sorted { ($0.active.installedAt, $0.record.id) > ($1.active.installedAt, $1.record.id) }
    }

    /// The index's packages for `snapshot`: ids, versions and version paths.
    static func indexPackages(of snapshot: StoreSnapshot) -> [NameIndexFormat.Package] {
        resolvingPackages(of: snapshot).map {
            NameIndexFormat.Package(id: $0.record.id, version: $0.active.version, path: $0.active.path)
        }
    }

    /// The bytes of the index of `packages`, from their file lists. A package whose tree is
    /// gone or whose list cannot be read is left out (with a logged reason), as the chain
    /// built from the file lists leaves it out.
    static func build(
        _ packages: [NameIndexFormat.Package],
        generation: Int,
        layout: StoreLayout,
        logger: Logger,
        fileList: (String) async throws -> FileList
    ) async throws -> Data {
        var lists: [(package: NameIndexFormat.Package, files: [FileList.Entry])] = []
        for package in packages {
            let metadata: Logger.Metadata = ["package": "\(package.id)", "version": "\(package.version)"]
            guard let tree = try? layout.url(forRelativePath: package.path), FileSystem.isDirectory(tree) else {
                logger.warning("the name index leaves out a package whose tree is gone", metadata: metadata)
                continue
            }
            do {
                lists.append((package, try await fileList(package.path).files))
            } catch {
                logger.warning(
                    "the name index leaves out a package whose file list cannot be read: \(error)",
                    metadata: metadata
                )
            }
        }
        return try await FileSystem.offload { [lists] in
            try NameIndexFormat.encode(generation: generation, packages: lists)
        }
    }
}

/// The name indexes a ``NameIndexWriter`` last mapped for readers, by store root: each
/// generation's index is mapped once, and a mapping found damaged is replaced only by one
/// checked whole.
final class MappedNameIndexes: Sendable {
    private let indexes = Locked<[String: NameIndex]>([:])

    /// The index last mapped for the store at `root`.
    func index(root: URL) -> NameIndex? {
        indexes.withLock { $0[root.path] }
    }

    /// Records `index` as the one last mapped for the store at `root`.
    func set(_ index: NameIndex, root: URL) {
        indexes.withLock { $0[root.path] = index }
    }
}
