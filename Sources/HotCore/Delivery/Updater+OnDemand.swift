import Foundation
import Logging

/// On-demand packs: what the last trusted manifest offers, installs by id, uses, and
/// eviction under a storage budget.
extension Updater {
    // MARK: - The catalog

    /// The packages the last manifest applied offers this client, in its order: what
    /// ``install(id:)`` can install. Empty when no manifest was applied yet.
    ///
    /// - Throws: ``HotUpdateError/Code/storeCorrupt`` when the catalog cannot be read.
    ///
    /// ```swift
    /// let packs = try await updater.offeredPackages().filter { $0.delivery == .onDemand }
    /// ```
    public func offeredPackages() async throws -> [PackageDescriptor] {
        guard let catalog = try await store.catalog() else { return [] }
        return try catalog.packages.map { try $0.descriptor() }
    }

    /// Fetches the manifest from `source` and records what it offers (see
    /// ``offeredPackages()``) without installing, updating or removing anything: what an app
    /// does to install one pack on demand with a manifest newer than its last sync.
    ///
    /// - Returns: The manifest.
    /// - Throws: ``HotUpdateError`` when the manifest cannot be fetched or is refused.
    public func recordManifest(from source: any ManifestSource) async throws -> Manifest {
        let manifest: Manifest
        do {
            manifest = try await source.fetchManifest()
        } catch {
            throw HotUpdateError.wrap(error, as: .manifestInvalid, "cannot fetch the manifest")
        }
        try await store.recordCatalog(manifest)
        return manifest
    }

    // MARK: - Installing on demand

    /// Installs the package `id` as the last trusted manifest describes it, downloading it
    /// only when that version is not installed yet: how an app asks for an on-demand pack
    /// (``DeliveryMode/onDemand``) each time it needs it. From its first install on, every
    /// sync keeps it current.
    ///
    /// Only a package the last manifest applied offers can be installed this way (see
    /// ``offeredPackages()``): no descriptor enters from anywhere else. The manifest is not
    /// fetched again: it was recorded by the last ``sync(from:)`` (or
    /// ``recordManifest(from:)``), in this process or an earlier one. Concurrent asks make one
    /// download, and a pack a user asks for takes the next free download slot ahead of
    /// background downloads. Each ask counts as a use for the storage budget
    /// (``OnDemandBudget``), recorded at most once per
    /// ``UpdaterConfiguration/usageRecordingInterval``.
    ///
    /// - Parameter id: The package id.
    /// - Returns: The installed package.
    /// - Throws: ``HotUpdateError/Code/notFound`` when the last trusted manifest does not offer
    ///   `id` (or disables it); ``HotUpdateError/Code/waitingForNetwork`` when the pack is
    ///   not installed and larger than the network policy lets through now; otherwise as
    ///   ``install(_:)``.
    ///
    /// ```swift
    /// let pack = try await updater.install(id: "filters-vintage")
    /// let lut = pack.directory.appendingPathComponent("vintage.cube")
    /// ```
    public func install(id: String) async throws -> InstalledPackage {
        try Task.checkCancellation()
        let descriptor = try await store.offeredDescriptor(id)
        let snapshot = try await open()
        let record = snapshot.packages[id]
        if waitsForNetwork(descriptor) {
            // An installed version serves until the network lets the new one through.
            if let record, let active = record.active, record.state != .disabled {
                await store.noteUse(id, now: Date(), interval: configuration.usageRecordingInterval)
                return try store.installedPackage(record, version: active)
            }
            hub.publish(id, descriptor.version, .waitingForNetwork)
            throw HotUpdateError(
                .waitingForNetwork,
                "\(descriptor.size.map { "\($0) bytes" } ?? "a download of unknown size") waits for an unmetered network (\(networkConditions))",
                packageID: id
            )
        }
        let installed = try await install(descriptor, priority: .requested)
        await store.noteUse(id, now: Date(), interval: configuration.usageRecordingInterval)
        return installed
    }

    /// Keeps `packageID` from eviction by this process until as many ``endUsing(packageID:)``
    /// calls: call it while a screen shows the pack's files.
    public nonisolated func beginUsing(packageID: String) {
        delivery.value.withLock { $0.holds[packageID, default: 0] += 1 }
    }

    /// Ends one ``beginUsing(packageID:)``.
    public nonisolated func endUsing(packageID: String) {
        delivery.value.withLock { value in
            let count = (value.holds[packageID] ?? 0) - 1
            value.holds[packageID] = count > 0 ? count : nil
        }
    }

    // MARK: - Eviction

    /// Evicts the on-demand packs the budget does not keep (see ``OnDemandBudget``): unused
    /// for too long, then least recently used first until the rest fit. Each is deleted with
    /// every version in one store transaction, like ``remove(packageID:)``; a process killed
    /// midway leaves a store the next change finishes. The next sync does not fetch an evicted
    /// pack; the next ``install(id:)`` downloads it again.
    ///
    /// Which packs are on-demand is what the last manifest applied says; with none applied,
    /// nothing is evicted.
    ///
    /// - Parameter budget: The budget.
    /// - Returns: What was evicted and freed.
    /// - Throws: ``HotUpdateError`` when the store cannot be read or written.
    ///
    /// ```swift
    /// let report = try await updater.evictOnDemandPacks(budget: OnDemandBudget(maxBytes: 200 << 20))
    /// ```
    @discardableResult
    public func evictOnDemandPacks(budget: OnDemandBudget) async throws -> EvictionReport {
        let hub = self.hub
        let held = delivery.value.withLock { Set($0.holds.keys) }.union(configuration.launch.guarded)
        // A pack downloading or unpacking in this process right now is in use too.
        let report = try await store.evictOnDemand(budget: budget, now: Date()) {
            held.contains($0) || hub.transientState(of: $0) != nil
        }
        for id in report.evicted { hub.publish(id, nil, .evicted) }
        return report
    }

    /// Applies ``UpdaterConfiguration/onDemandBudget`` after a sync, if set; a failure is
    /// logged, not thrown.
    func evictAfterSync() async {
        guard let budget = configuration.onDemandBudget else { return }
        do {
            try await evictOnDemandPacks(budget: budget)
        } catch {
            logger.warning("cannot apply the on-demand storage budget: \(error)")
        }
    }
}
