import Foundation
import Logging

extension Updater {
    /// The store's name index for the snapshot committed now, mapped, or nil when the
    /// snapshot has none or it is damaged (the reason is logged): names then resolve through
    /// the file lists. With `rebuildingWhenStale`, a missing or damaged index is rebuilt in
    /// the background for the next reader.
    ///
    /// - Parameter rebuildingWhenStale: Whether to rebuild a missing or damaged index (this
    ///   takes the store's exclusive lock and writes under the root: read-only callers pass false).
    package func nameIndex(rebuildingWhenStale: Bool) async -> NameIndex? {
        let found: (snapshot: StoreSnapshot, index: NameIndex?, problem: HotUpdateError?)
        do {
            found = try await store.readNameIndex()
        } catch {
            logger.warning("the store cannot be read, so neither can its name index: \(error)")
            return nil
        }
        if let index = found.index { return index }
        guard found.snapshot.generation > 0 else { return nil }  // nothing committed: nothing to index
        logger.notice(
            "resolving through the file lists: \(found.problem?.description ?? "no name index")",
            metadata: ["generation": "\(found.snapshot.generation)"]
        )
        if rebuildingWhenStale {
            let store = self.store
            let logger = self.logger
            Task {
                do {
                    try await store.rebuildNameIndex()
                } catch {
                    logger.warning("cannot rebuild the name index: \(error)")
                }
            }
        }
        return nil
    }

    /// Writes the name index of the snapshot committed now when it is missing or damaged.
    ///
    /// - Returns: Whether an index was written.
    /// - Throws: ``HotUpdateError`` when the store cannot be read or the index written.
    @discardableResult
    package func rebuildNameIndex() async throws -> Bool {
        try await store.rebuildNameIndex()
    }
}
