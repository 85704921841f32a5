import Foundation

/// The store's changes for delivery modes: the catalog of what was offered, the last use of
/// packs, and evictions.
extension Store {
    /// Records what `manifest` offers as the store's catalog (``OfferedCatalog``), under the
    /// exclusive lock, and its digest (``StoreSnapshot/catalogSHA256``) in the same commit;
    /// the records do not change.
    func recordCatalog(_ manifest: Manifest) async throws {
        let data = try OfferedCatalog(manifest).encoded()
        let digest = try OfferedCatalog.digest(of: data, verifier: verifier)
        _ = try await transaction { transaction in
            try StoreStateFile.catalog.replace(root: transaction.layout.root, with: data)
            transaction.setCatalogDigest(digest)
        }
    }

    /// Records that `id` was used at `date`, when the store has a record of it.
    func recordUse(_ id: String, at date: Date) async throws {
        _ = try await transaction { transaction in
            transaction.updateExisting(id) { $0.lastUsedAt = date }
        }
    }

    /// Evicts the on-demand packs `budget` does not keep, in one transaction: their records go
    /// and their versions are deleted after the commit (kill-safe, see ``deleteVersions``).
    ///
    /// - Parameters:
    ///   - budget: The budget.
    ///   - deliveries: Each offered package's delivery mode (from the catalog).
    ///   - protected: Packages never evicted besides those live launches run from and those
    ///     with a launch trial: the guarded ones, and those the app holds open.
    ///   - now: The device's clock, for the days unused.
    /// - Returns: The packs evicted, and what deleting them freed.
    func evictOnDemand(
        budget: OnDemandBudget,
        deliveries: [String: DeliveryMode],
        protected: Set<String>,
        now: Date
    ) async throws -> Committed<[EvictionPlan.Candidate]> {
        try await transaction { transaction in
            let live = LaunchOwner.live(in: transaction.layout).paths
            var candidates: [EvictionPlan.Candidate] = []
            for (id, record) in transaction.records.sorted(by: { $0.key < $1.key })
            where deliveries[id] == .onDemand {
                let kept = record.keptVersions
                guard !kept.isEmpty else { continue }
                var bytes: Int64 = 0
                for version in kept {
                    if let list = try? await self.fileList(forVersionPath: version.path) {
                        bytes += list.files.reduce(Int64(0)) { $0 + $1.size }
                    } else {
                        bytes += version.archiveSize
                    }
                }
                let lastUsed = record.lastUsedAt ?? record.active?.installedAt ?? kept[0].installedAt
                let isProtected =
                    protected.contains(id) || record.launch != nil || kept.contains { live.contains($0.path) }
                candidates.append(
                    EvictionPlan.Candidate(id: id, bytes: bytes, lastUsed: lastUsed, isProtected: isProtected)
                )
            }
            let chosen = EvictionPlan.choose(candidates, budget: budget, now: now)
            for candidate in chosen { _ = transaction.removeRecord(candidate.id) }
            return chosen
        }
    }
}
