import Foundation
import HotCore
import Logging

/// Reading the store's name index (``NameIndex``, kept by ``NameIndexWriter``) as of the
/// snapshot committed now, and writing it again when it is missing or damaged.
extension Updater {
    /// The store's name index for the snapshot committed now, mapped, or nil when the
    /// snapshot has none or it is damaged (the reason is logged): names then resolve through
    /// the file lists. With `rebuildingWhenStale`, a missing or damaged index is rebuilt in
    /// the background for the next reader.
    ///
    /// - Parameter rebuildingWhenStale: Whether to rebuild a missing or damaged index (this
    ///   takes the store's exclusive lock and writes under the root: read-only callers pass false).
    package nonisolated func nameIndex(rebuildingWhenStale: Bool) async -> NameIndex? {
        let logger = configuration.logger
        let found: (generation: Int, index: NameIndex?, problem: HotUpdateError?)
        do {
            found = try await readNameIndex()
        } catch {
            logger.warning("the store cannot be read, so neither can its name index: \(error)")
            return nil
        }
        if let index = found.index { return index }
        guard found.generation > 0 else { return nil }  // nothing committed: nothing to index
        logger.notice(
            "resolving through the file lists: \(found.problem?.description ?? "no name index")",
            metadata: ["generation": "\(found.generation)"]
        )
        if rebuildingWhenStale {
            Task {
                do {
                    try await self.rebuildNameIndex()
                } catch {
                    logger.warning("cannot rebuild the name index: \(error)")
                }
            }
        }
        return nil
    }

    /// The index of the snapshot committed now, opened under the shared lock, with the
    /// snapshot's generation; or nil and why not.
    private nonisolated func readNameIndex() async throws
        -> (generation: Int, index: NameIndex?, problem: HotUpdateError?)
    {
        let layout = self.layout
        let mapped = configuration.commitHooks.lazy.compactMap { ($0 as? NameIndexWriter)?.mapped }.first
        let found = try await withSharedStoreLock { snapshot -> (Int, NameIndex?, HotUpdateError?) in
            let generation = snapshot.generation
            let last = mapped?.index(root: layout.root)
            let damaged = last.map { $0.generation == generation && $0.isDamaged } ?? false
            if let last, last.generation == generation, !damaged {
                return (generation, last, nil)
            }
            do {
                // After a lookup found the mapped index damaged, only a rebuilt one is taken,
                // and it is checked whole first.
                let index = try await FileSystem.offload {
                    let index = try NameIndex(layout: layout, generation: generation)
                    if damaged { try index.verifyAll() }
                    return index
                }
                mapped?.set(index, root: layout.root)
                return (generation, index, nil)
            } catch let error as HotUpdateError {
                return (generation, nil, error)
            } catch {
                return (generation, nil, HotUpdateError.wrap(error, as: .storeCorrupt, "cannot open the name index"))
            }
        }
        if let found { return found }
        let snapshot = try await currentSnapshot()
        return (snapshot.generation, nil, HotUpdateError(.notFound, "the store has no lock file, so no name index"))
    }

    /// Writes the name index of the snapshot committed now when it is missing or damaged,
    /// under the store's exclusive lock (after this process's earlier changes), and removes
    /// the indexes of older generations. The snapshot does not change.
    ///
    /// - Returns: Whether an index was written.
    /// - Throws: ``HotUpdateError`` when the store cannot be read or the index written.
    @discardableResult
    package nonisolated func rebuildNameIndex() async throws -> Bool {
        let layout = self.layout
        let logger = configuration.logger
        let rebuilt = try await withExclusiveStoreLock { snapshot -> Bool in
            let generation = snapshot.generation
            let sound =
                (try? await FileSystem.offload { () -> Bool in
                    try NameIndex(layout: layout, generation: generation).verifyAll()
                    return true
                }) ?? false
            if sound { return false }
            let data = try await NameIndexWriter.build(
                NameIndexWriter.indexPackages(of: snapshot),
                generation: generation,
                layout: layout,
                logger: logger,
                fileList: { try await self.cachedFileList(forVersionPath: $0) }
            )
            try await NameIndexWriter.write(data, layout: layout, generation: generation)
            NameIndexWriter.removeOldIndexes(layout: layout, keeping: generation)
            logger.notice("rebuilt the name index", metadata: ["generation": "\(generation)"])
            return true
        }
        return rebuilt ?? false
    }
}
