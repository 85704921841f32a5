import Foundation
import Logging

/// What an updater keeps for delivery modes in this process: the network's state, the packs
/// held open, and the uses already recorded.
final class DeliveryState: Sendable {
    struct Value: Sendable {
        var network: NetworkConditions
        /// Open holds by package (``Updater/beginUsing(packageID:)``).
        var holds: [String: Int] = [:]
        /// When this process last recorded a use of each package.
        var usesRecorded: [String: Date] = [:]
        /// The catalog last read, and the file it was read from (inode, size, modification).
        var catalog: (key: [String], catalog: OfferedCatalog)?
    }

    let value: Locked<Value>

    init(network: NetworkConditions) {
        value = Locked(Value(network: network))
    }

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
        if let cached = value.withLock({ $0.catalog }), cached.key == key { return cached.catalog }
        let catalog = try OfferedCatalog.read(root: root, expected: expected, verifier: verifier)
        value.withLock { $0.catalog = catalog.map { (key, $0) } }
        return catalog
    }
}

/// How a download waits for a slot: a launch package first, then a pack a user waits for,
/// then updates of installed packages, then prefetching.
enum DownloadPriority: Int, Sendable, Comparable {
    case prefetch = 0
    case update = 1
    case requested = 2
    case launch = 3

    static func < (lhs: DownloadPriority, rhs: DownloadPriority) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The priority of a sync's download.
    static func of(_ change: UpdatePlan.Change, _ offered: PackageDescriptor) -> DownloadPriority {
        if offered.delivery.effective == .launch { return .launch }
        return change == .add && offered.delivery.effective != .onDemand ? .prefetch : .update
    }
}

/// What ``Updater/waitForLaunchPackages(timeout:)`` found when it returned.
public struct LaunchPackagesWait: Sendable, Hashable {
    /// Whether every launch package of the last manifest applied is installed at the version
    /// it offers.
    public var isReady: Bool
    /// The launch packages not installed at the offered version when the wait ended: the app
    /// uses its bundled copies of these.
    public var missing: [String]
    /// Those of ``missing`` whose download failed during the wait.
    public var failed: [String]

    /// Creates a value.
    public init(isReady: Bool, missing: [String], failed: [String] = []) {
        self.isReady = isReady
        self.missing = missing
        self.failed = failed
    }
}

/// What an eviction of on-demand packs did.
public struct EvictionReport: Sendable, Hashable {
    /// The packs evicted, least recently used first.
    public var evicted: [String]
    /// The bytes of their files (shared files are freed only when nothing else links them:
    /// see ``garbage``).
    public var bytes: Int64
    /// The versions deleted and the objects freed.
    public var garbage: GarbageReport

    /// Creates a report.
    public init(evicted: [String], bytes: Int64, garbage: GarbageReport) {
        self.evicted = evicted
        self.bytes = bytes
        self.garbage = garbage
    }
}

extension Updater {
    // MARK: - Network

    /// Tells the updater what the network is like now; downloads the policy holds back on a
    /// metered network (``UpdaterConfiguration/network``) wait until a sync on an unmetered
    /// one. On Apple platforms HotTransport's `NetworkPathObserver` calls this for every path
    /// `NWPathMonitor` reports; elsewhere the app sets it.
    ///
    /// ```swift
    /// updater.setNetworkConditions(.metered)
    /// ```
    public nonisolated func setNetworkConditions(_ conditions: NetworkConditions) {
        delivery.value.withLock { $0.network = conditions }
    }

    /// The network's state as last told (``UpdaterConfiguration/initialNetwork`` until then).
    public nonisolated var networkConditions: NetworkConditions {
        delivery.value.withLock { $0.network }
    }

    /// Whether `offered` waits for an unmetered network now.
    nonisolated func waitsForNetwork(_ offered: PackageDescriptor) -> Bool {
        configuration.network.waits(offered, on: networkConditions)
    }

    /// The outcome of a sync's download the network holds back, or nil when it may go.
    func networkWait(_ entry: UpdatePlan.PackagePlan, _ offered: PackageDescriptor) -> SyncReport.PackageOutcome? {
        guard waitsForNetwork(offered) else { return nil }
        logger.info(
            "waiting for an unmetered network",
            metadata: [
                "package": "\(offered.id)", "size": "\(offered.size.map(String.init) ?? "unknown")",
                "network": "\(networkConditions)",
            ]
        )
        hub.publish(offered.id, offered.version, .waitingForNetwork)
        var outcome = SyncReport.PackageOutcome(
            id: entry.id,
            change: entry.change,
            activeVersion: entry.installed?.version
        )
        outcome.isWaitingForNetwork = true
        return outcome
    }

    /// How many downloads wait for a free slot (for tests).
    package nonisolated var queuedDownloads: Int { slots.waiting }

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
        guard let catalog = try await readCatalog() else { return [] }
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

    /// The catalog under the root (see ``DeliveryState/catalog(root:)``), off the actor.
    ///
    /// - Throws: ``HotUpdateError/Code/catalogUntrusted`` when the file is not the catalog the
    ///   store recorded with its last trusted manifest.
    func readCatalog() async throws -> OfferedCatalog? {
        let root = layout.root
        let delivery = self.delivery
        let verifier = configuration.verifier
        let expected = try await store.read().catalogSHA256
        do {
            return try await FileSystem.offload {
                try delivery.catalog(root: root, expected: expected, verifier: verifier)
            }
        } catch let error as HotUpdateError where error.code == .catalogUntrusted {
            // Another process's sync may have committed a new catalog between the two reads:
            // once more with the digest it recorded, if it differs.
            let again = try await store.read().catalogSHA256
            guard again != expected else { throw error }
            return try await FileSystem.offload {
                try delivery.catalog(root: root, expected: again, verifier: verifier)
            }
        }
    }

    /// The descriptor the catalog offers for `id`.
    ///
    /// - Throws: ``HotUpdateError/Code/notFound`` when no manifest was applied, or the last
    ///   one does not offer `id` to this client.
    func offeredDescriptor(_ id: String) async throws -> (PackageDescriptor, OfferedCatalog) {
        guard let catalog = try await readCatalog() else {
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
        return (try entry.descriptor(), catalog)
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
        let (descriptor, _) = try await offeredDescriptor(id)
        let snapshot = try await open()
        let record = snapshot.packages[id]
        if waitsForNetwork(descriptor) {
            // An installed version serves until the network lets the new one through.
            if let record, let active = record.active, record.state != .disabled {
                await noteUse(id)
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
        await noteUse(id)
        return installed
    }

    /// Records a use of `id` when none was recorded for an interval.
    private func noteUse(_ id: String) async {
        let now = Date()
        let interval = configuration.usageRecordingInterval
        let stored = await store.cachedRecord(id)?.lastUsedAt
        let due = delivery.value.withLock { value -> Bool in
            let last = [value.usesRecorded[id], stored].compactMap { $0 }.max()
            guard last.map({ now.timeIntervalSince($0) >= interval || now < $0 }) ?? true else { return false }
            value.usesRecorded[id] = now
            return true
        }
        guard due else { return }
        do {
            try await store.recordUse(id, at: now)
        } catch {
            logger.warning("cannot record the use of a pack: \(error)", metadata: ["package": "\(id)"])
        }
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

    // MARK: - Waiting for launch packages

    /// Waits until every ``DeliveryMode/launch`` package of the last manifest applied is
    /// installed at the version it offers, or the timeout passes, or their downloads failed:
    /// the app then uses its bundled copy of what is missing. Start the sync first; when no
    /// manifest was applied yet, the wait lasts until a sync records one.
    ///
    /// - Parameter timeout: The longest wait.
    /// - Returns: Whether they are ready, and which are not.
    ///
    /// ```swift
    /// Task { try await updater.sync(from: source) }
    /// let wait = await updater.waitForLaunchPackages(timeout: .seconds(3))
    /// if !wait.isReady { logger.info("launching with bundled \(wait.missing)") }
    /// ```
    public func waitForLaunchPackages(timeout: Duration) async -> LaunchPackagesWait {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        var failed: Set<String> = []
        while true {
            // Subscribed before the check, so no change between the two is missed.
            let events = hub.subscribe(bufferingNewest: 64)
            let missing = await missingLaunchPackages()
            if let missing, missing.allSatisfy(failed.contains) {
                return LaunchPackagesWait(isReady: missing.isEmpty, missing: missing, failed: failed.sorted())
            }
            guard ContinuousClock.now < deadline else {
                return LaunchPackagesWait(isReady: false, missing: missing ?? [], failed: failed.sorted())
            }
            let change = await withTaskGroup(of: UpdateEvent.StateChange?.self) { group in
                group.addTask {
                    for await event in events { if case .state(let change) = event { return change } }
                    return nil
                }
                group.addTask {
                    try? await Task.sleep(until: deadline, clock: .continuous)
                    return nil
                }
                let first = await group.next() ?? nil
                group.cancelAll()
                return first
            }
            if let change, change.state == .failed { failed.insert(change.id) }
        }
    }

    /// The launch packages of the catalog not installed at the offered version; nil when no
    /// manifest was applied yet.
    private func missingLaunchPackages() async -> [String]? {
        guard let catalog = try? await readCatalog(), let snapshot = try? await open()
        else { return nil }
        return catalog.packages.filter { entry in
            guard entry.delivery?.effective == .launch, let offered = try? entry.descriptor() else { return false }
            guard let record = snapshot.packages[entry.id], let active = record.active else { return true }
            return !UpdatePlan.isSame(offered, active)
        }.map(\.id)
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
        guard let catalog = try await readCatalog() else {
            return EvictionReport(
                evicted: [],
                bytes: 0,
                garbage: GarbageReport(versionsRemoved: 0, objectsRemoved: 0, bytesFreed: 0)
            )
        }
        let held = delivery.value.withLock { Set($0.holds.keys) }
        let guarded = configuration.launch.guarded
        // A pack downloading or unpacking in this process right now is in use too.
        let busy = Set(catalog.packages.map(\.id).filter { hub.transientState(of: $0) != nil })
        let committed = try await store.evictOnDemand(
            budget: budget,
            deliveries: catalog.deliveries,
            protected: held.union(guarded).union(busy),
            now: Date()
        )
        for candidate in committed.value {
            hub.publish(candidate.id, nil, .evicted)
            logger.info(
                "evicted an on-demand pack",
                metadata: ["package": "\(candidate.id)", "bytes": "\(candidate.bytes)"]
            )
        }
        delivery.value.withLock { value in
            for candidate in committed.value { value.usesRecorded[candidate.id] = nil }
        }
        return EvictionReport(
            evicted: committed.value.map(\.id),
            bytes: committed.value.reduce(Int64(0)) { $0 + $1.bytes },
            garbage: committed.garbage
        )
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
