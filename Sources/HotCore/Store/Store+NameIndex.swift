import Foundation
import Logging

/// The store's name index (``NameIndex``): written with every commit, before the store file,
/// for the generation the commit creates; rebuilt on request when it is missing or damaged.
///
/// Each generation has its own file (`index/names-<generation>`), so a kill at any moment
/// leaves the index of the snapshot in place: before the store file's rename the old
/// snapshot and its index stand (the new index is an unused file), after it the new ones.
/// The index of the previous generation is kept for readers that read the snapshot just
/// before a commit; older ones are removed after the commit.
extension Store {
    /// The packages names resolve from, in the order they win: every package with an active
    /// version that is not disabled or known to be damaged, most recently installed first
    /// (as `Updater.installedPackages()` orders them).
    static func resolvingPackages(of snapshot: StoreSnapshot) -> [(record: InstallRecord, active: InstalledVersion)] {
        snapshot.packages.values.compactMap { record in
            guard let active = record.active, record.state.servesAssets else { return nil }
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

    /// Writes the index of `next` (about to be committed as `generation`) durably: a copy of
    /// the previous generation's index when nothing that resolves changed, else one built
    /// from the file lists. A failure is logged, not thrown: the commit goes ahead, and
    /// readers of a generation without an index resolve through the file lists.
    func writeNameIndex(for next: StoreSnapshot, generation: Int, previous: StoreSnapshot) async {
        let layout = self.layout
        let target = NameIndex.url(in: layout, generation: generation)
        do {
            let packages = Self.indexPackages(of: next)
            var data: Data?
            if Self.indexPackages(of: previous) == packages {
                let previousURL = NameIndex.url(in: layout, generation: previous.generation)
                data = try? await FileSystem.offload { () -> Data? in
                    try NameIndex(layout: layout, generation: previous.generation).verifyAll()
                    return NameIndexFormat.retagged(try Data(contentsOf: previousURL), generation: generation)
                }
            }
            if data == nil {
                data = try await buildNameIndex(packages, generation: generation)
            }
            guard let data else { return }
            try await FileSystem.offload {
                try FileSystem.createDirectory(layout.indexDirectory)
                try FileSystem.replaceDurably(target, with: data, chunkSize: NameIndexFormat.writeChunk)
            }
            FaultPoint.reached("after-index")
        } catch {
            try? FileSystem.remove(target)
            logger.warning(
                "cannot write the name index; names resolve through the file lists until it is rebuilt: \(error)",
                metadata: ["generation": "\(generation)"]
            )
        }
    }

    /// The bytes of the index of `packages`, from their file lists. A package whose tree is
    /// gone or whose list cannot be read is left out (with a logged reason), as the chain
    /// built from the file lists leaves it out.
    func buildNameIndex(_ packages: [NameIndexFormat.Package], generation: Int) async throws -> Data {
        var lists: [(package: NameIndexFormat.Package, files: [FileList.Entry])] = []
        for package in packages {
            let metadata: Logger.Metadata = ["package": "\(package.id)", "version": "\(package.version)"]
            guard let tree = try? layout.url(forRelativePath: package.path), FileSystem.isDirectory(tree) else {
                logger.warning("the name index leaves out a package whose tree is gone", metadata: metadata)
                continue
            }
            do {
                lists.append((package, try await fileList(forVersionPath: package.path).files))
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

    /// Removes the index files of generations other than `generation` and the one before,
    /// and temporary files; under the exclusive lock.
    func removeOldNameIndexes(keeping generation: Int) {
        let directory = layout.indexDirectory
        for name in FileSystem.contents(of: directory) {
            if name.hasPrefix("names-"), let number = Int(name.dropFirst("names-".count)),
                number == generation || number == generation - 1
            {
                continue
            }
            try? FileSystem.remove(directory.appendingPathComponent(name))
        }
    }

    /// The index of the snapshot committed now, opened under the shared lock with the
    /// snapshot, or nil and why not.
    func readNameIndex() async throws -> (snapshot: StoreSnapshot, index: NameIndex?, problem: HotUpdateError?) {
        guard let lock = try await StoreLock.acquire(root: layout.root, mode: .shared, create: false) else {
            let snapshot = try await read()
            return (snapshot, nil, HotUpdateError(.notFound, "the store has no lock file, so no name index"))
        }
        defer { lock.release() }
        let snapshot = try await current(under: lock)
        let damaged = mappedNameIndex.map { $0.generation == snapshot.generation && $0.isDamaged } ?? false
        if let mapped = mappedNameIndex, mapped.generation == snapshot.generation, !damaged {
            return (snapshot, mapped, nil)
        }
        let layout = self.layout
        do {
            // After a lookup found the mapped index damaged, only a rebuilt one is taken, and
            // it is checked whole first.
            let index = try await FileSystem.offload {
                let index = try NameIndex(layout: layout, generation: snapshot.generation)
                if damaged { try index.verifyAll() }
                return index
            }
            mappedNameIndex = index
            return (snapshot, index, nil)
        } catch let error as HotUpdateError {
            return (snapshot, nil, error)
        } catch {
            return (snapshot, nil, HotUpdateError.wrap(error, as: .storeCorrupt, "cannot open the name index"))
        }
    }

    /// Writes the index of the snapshot committed now when it has none or its index is
    /// damaged, under the exclusive lock (after this process's earlier transactions). The
    /// snapshot does not change.
    ///
    /// - Returns: Whether an index was written.
    @discardableResult
    func rebuildNameIndex() async throws -> Bool {
        try await enqueue { try await self.runRebuild() }.value
    }

    private func runRebuild() async throws -> Bool {
        guard let lock = try await StoreLock.acquire(root: layout.root, mode: .exclusive, create: false) else {
            return false
        }
        defer { lock.release() }
        let snapshot = try await current(under: lock)
        let layout = self.layout
        let sound =
            (try? await FileSystem.offload { () -> Bool in
                try NameIndex(layout: layout, generation: snapshot.generation).verifyAll()
                return true
            }) ?? false
        if sound { return false }
        let data = try await buildNameIndex(Self.indexPackages(of: snapshot), generation: snapshot.generation)
        try await FileSystem.offload {
            try FileSystem.createDirectory(layout.indexDirectory)
            try FileSystem.replaceDurably(
                NameIndex.url(in: layout, generation: snapshot.generation),
                with: data,
                chunkSize: NameIndexFormat.writeChunk
            )
        }
        logger.notice("rebuilt the name index", metadata: ["generation": "\(snapshot.generation)"])
        return true
    }
}
