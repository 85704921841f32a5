import Foundation
import Logging

/// The catalog last read, and the file it was read from (inode, size, modification, and the
/// digest the store recorded with it).
final class CatalogCache: Sendable {
    private let last = Locked<(key: [String], catalog: OfferedCatalog)?>(nil)

    /// The catalog under `root`, checked against `expected` (the digest the store recorded
    /// with it), decoded and checked again only when the file was replaced since the last read
    /// (it is only ever replaced whole, by a rename) or the digest changed: an ask for an
    /// installed pack costs a `stat`, not a parse of every package the manifest offers.
    func catalog(root: URL, expected: String?, verifier: any Verifier) throws -> OfferedCatalog? {
        let url = StoreStateFile.catalog.url(root: root)
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path) else { return nil }
        let key = [
            "\(attributes[.systemFileNumber] ?? "")", "\(attributes[.size] ?? "")",
            "\((attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0)", expected ?? "",
        ]
        if let cached = last.withLock({ $0 }), cached.key == key { return cached.catalog }
        let catalog = try OfferedCatalog.read(root: root, expected: expected, verifier: verifier)
        last.withLock { $0 = catalog.map { (key, $0) } }
        return catalog
    }
}

/// The store's catalog of what the last trusted manifest offered, the last use of packs, and
/// evictions.
extension Store {
    /// The catalog the last trusted manifest recorded (see ``recordCatalog(_:)``), read off
    /// the actor; nil when none was recorded yet.
    ///
    /// - Throws: ``HotUpdateError/Code/catalogUntrusted`` when the file is not the catalog the
    ///   store recorded with its last trusted manifest.
    func catalog() async throws -> OfferedCatalog? {
        let root = layout.root
        let cache = catalogCache
        let verifier = self.verifier
        let expected = try await read().catalogSHA256
        do {
            return try await FileSystem.offload {
                try cache.catalog(root: root, expected: expected, verifier: verifier)
            }
        } catch let error as HotUpdateError where error.code == .catalogUntrusted {
            // Another process's sync may have committed a new catalog between the two reads:
            // once more with the digest it recorded, if it differs.
            let again = try await read().catalogSHA256
            guard again != expected else { throw error }
            return try await FileSystem.offload { try cache.catalog(root: root, expected: again, verifier: verifier) }
        }
    }

    /// The descriptor the catalog offers for `id`.
    ///
    /// - Throws: ``HotUpdateError/Code/notFound`` when no manifest was applied, or the last
    ///   one does not offer `id` to this client.
    func offeredDescriptor(_ id: String) async throws -> PackageDescriptor {
        guard let catalog = try await catalog() else {
            throw HotUpdateError(
                .notFound,
                "no trusted manifest was applied to this store yet: sync first, or record one",
                packageID: id
            )
        }
        if catalog.disabled.contains(id) {
            throw HotUpdateError(.notFound, "the trusted manifest disables the package for this client", packageID: id)
        }
        guard let entry = catalog.entry(id) else {
            throw HotUpdateError(.notFound, "the trusted manifest offers no such package", packageID: id)
        }
        return try entry.descriptor()
    }

    /// The launch packages of the catalog not installed at the offered version; nil when no
    /// manifest was applied yet.
    func missingLaunchPackages() async -> [String]? {
        guard let catalog = try? await catalog(), let snapshot = try? await read() else { return nil }
        return catalog.packages.filter { entry in
            guard entry.delivery?.effective == .launch, let offered = try? entry.descriptor() else { return false }
            guard let record = snapshot.packages[entry.id], let active = record.active else { return true }
            return !UpdatePlan.isSame(offered, active)
        }.map(\.id)
    }

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

    /// Records that `id` was used `now` when no use was recorded for `interval`, by this process
    /// or in its record: asking for a pack each time a screen opens costs no write. A failure
    /// is logged.
    func noteUse(_ id: String, now: Date, interval: TimeInterval) async {
        let last = [usesRecorded[id], cachedRecord(id)?.lastUsedAt].compactMap { $0 }.max()
        guard last.map({ now.timeIntervalSince($0) >= interval || now < $0 }) ?? true else { return }
        usesRecorded[id] = now
        do {
            try await recordUse(id, at: now)
        } catch {
            logger.warning("cannot record the use of a pack: \(error)", metadata: ["package": "\(id)"])
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
    /// Which packs are on-demand is what the catalog says; with none recorded, nothing is
    /// evicted.
    ///
    /// - Parameters:
    ///   - budget: The budget.
    ///   - now: The device's clock, for the days unused.
    ///   - isProtected: Packages never evicted besides those live launches run from and those
    ///     with a launch trial: the guarded ones, those the app holds open, those in flight.
    /// - Returns: The packs evicted, and what deleting them freed.
    func evictOnDemand(
        budget: OnDemandBudget,
        now: Date,
        isProtected protected: @escaping @Sendable (String) -> Bool
    ) async throws -> EvictionReport {
        guard let deliveries = try await catalog()?.deliveries else {
            return EvictionReport(
                evicted: [],
                bytes: 0,
                garbage: GarbageReport(versionsRemoved: 0, objectsRemoved: 0, bytesFreed: 0)
            )
        }
        let committed = try await evictOnDemand(
            budget: budget,
            deliveries: deliveries,
            now: now,
            isProtected: protected
        )
        for candidate in committed.value {
            usesRecorded[candidate.id] = nil
            logger.info(
                "evicted an on-demand pack",
                metadata: ["package": "\(candidate.id)", "bytes": "\(candidate.bytes)"]
            )
        }
        return EvictionReport(
            evicted: committed.value.map(\.id),
            bytes: committed.value.reduce(Int64(0)) { $0 + $1.bytes },
            garbage: committed.garbage
        )
    }

    /// The transaction of ``evictOnDemand(budget:now:isProtected:)``.
    private func evictOnDemand(
        budget: OnDemandBudget,
        deliveries: [String: DeliveryMode],
        now: Date,
        isProtected protected: @escaping @Sendable (String) -> Bool
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
                    protected(id) || record.launch != nil || kept.contains { live.contains($0.path) }
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
