import Foundation
import Logging

/// Runs updates: check, plan, fetch, verify, unpack, deduplicate, commit; and answers what
/// is installed, whether it is intact, and repairs it.
///
/// An updater owns one store root. Work on a package runs as one *flight*: however many
/// callers ask for the same package at once (``install(_:)`` from anywhere in the app, and
/// ``sync(from:)``), it is downloaded and unpacked once and every caller gets the result.
/// Flights run in parallel up to ``UpdaterConfiguration/maxConcurrentPackages``; what
/// changes the store (linking files into `objects/`, commits, deletions) runs one step at a
/// time on a serial queue. A failed package never disturbs the version already active, and
/// a version is recorded, atomically, only after its tree is complete and flushed.
///
/// Every state change and progress step is published on ``events(bufferingNewest:)``.
///
/// ```swift
/// let updater = Updater(configuration: configuration)
/// let report = try await updater.sync(from: StaticManifestSource(url: manifestURL, transport: transport))
/// for failure in report.failures { print(failure.id, failure.error!) }
/// let packages = try await updater.installedPackages()
/// ```
public actor Updater {
    /// The configuration the updater was built with.
    public nonisolated let configuration: UpdaterConfiguration
    /// The store under the root: every read and change of it.
    package nonisolated let store: Store
    /// Where things live under the root.
    package nonisolated var layout: StoreLayout { store.layout }

    /// Flights running, by what they fetch.
    let flights = TaskPool<FlightKey, FlightResult>()
    /// The newest request for each package in this process: a flight whose content is no
    /// longer the newest request does not install.
    var wanted: [String: WantedVersion] = [:]
    /// When each running flight was last asked for: the device's clock (information only)
    /// and the store generation the request had seen, which decides.
    var requested: [FlightKey: (date: Date, generation: Int)] = [:]

    nonisolated let hub = EventHub()
    nonisolated let slots: AsyncSemaphore
    /// The network's state, packs held open, uses recorded (see ``DeliveryState``).
    nonisolated let delivery: DeliveryState
    nonisolated var logger: Logger { configuration.logger }

    /// Creates an updater. Nothing is read or written until the first call.
    public init(configuration: UpdaterConfiguration) {
        self.configuration = configuration
        self.slots = AsyncSemaphore(slots: configuration.maxConcurrentPackages)
        self.delivery = DeliveryState(network: configuration.initialNetwork)
        self.store = Store(
            layout: StoreLayout(root: configuration.root),
            metadata: configuration.store,
            verifier: configuration.verifier,
            logger: configuration.logger,
            hooks: configuration.commitHooks,
            lockWait: configuration.lockWait
        )
    }

    /// Launch trials, versions waiting for a restart, and blocked versions.
    public nonisolated var launch: UpdaterLaunch { UpdaterLaunch(updater: self) }
    /// Whether packages can be used, checks of their files, and repairs.
    public nonisolated var health: UpdaterHealth { UpdaterHealth(updater: self) }
    /// Script patches: activation at launch, patch lists, local folders.
    public nonisolated var patches: UpdaterPatches { UpdaterPatches(updater: self) }

    deinit {
        hub.finishAll()
    }

    // MARK: - Events

    /// A new subscription to everything the updater does: state changes, per-package
    /// progress and overall progress.
    ///
    /// Any number of subscribers may listen. Publishing never waits for a subscriber: each
    /// stream keeps the newest `limit` events and drops older ones beyond that, so a
    /// subscriber that falls behind loses old progress, never stalls a download. The
    /// stream ends when the updater is released or the consumer stops iterating.
    ///
    /// - Parameter limit: How many unconsumed events the stream keeps.
    ///
    /// ```swift
    /// let events = updater.events()
    /// Task { for await case .state(let change) in events { print(change.id, change.state) } }
    /// ```
    public nonisolated func events(bufferingNewest limit: Int = 4096) -> AsyncStream<UpdateEvent> {
        hub.subscribe(bufferingNewest: limit)
    }

    // MARK: - Reading

    /// The current snapshot of the store.
    ///
    /// - Throws: ``HotUpdateError`` from the metadata store.
    public func currentSnapshot() async throws -> StoreSnapshot {
        try await open()
    }

    /// Where a package stands now: a transient state (downloading, verifying) while a
    /// flight runs for it, else the stored one; nil for a package the store does not know.
    ///
    /// - Throws: ``HotUpdateError`` from the metadata store.
    public func state(of packageID: String) async throws -> PackageState? {
        if let transient = hub.transientState(of: packageID) { return transient }
        return try await open().packages[packageID]?.state
    }

    /// The packages with an active version that is not disabled, most recently installed
    /// first. A damaged package is listed with its state; it serves no assets (see
    /// ``PackageState/servesAssets``). A package whose tree is reached through a link in place
    /// of one of its directories (``PackageState/treeOutsideStore``) is not listed at all, so
    /// no reader looks into it, and is marked for the next sync to heal.
    ///
    /// - Throws: ``HotUpdateError`` from the metadata store.
    public func installedPackages() async throws -> [InstalledPackage] {
        try await store.servedPackages()
    }

    /// Compares `manifest` with what is installed.
    ///
    /// - Throws: ``HotUpdateError`` from the metadata store.
    public func plan(for manifest: Manifest) async throws -> UpdatePlan {
        UpdatePlan.make(manifest: manifest, snapshot: try await open())
    }

    /// The snapshot committed now (see ``Store/read()``): read-only, shared lock.
    func open() async throws -> StoreSnapshot {
        try await store.read()
    }

    /// The files of `package`'s active version as the store recorded them when it was
    /// installed (path, size, SHA-256), read from `filelists/` once per launch: what an asset
    /// resolver needs to index the package without walking its tree.
    ///
    /// ```swift
    /// for package in try await updater.installedPackages() {
    ///     let paths = try await updater.fileList(of: package).files.map(\.path)
    /// }
    /// ```
    ///
    /// - Parameter package: A package from ``installedPackages()``.
    /// - Returns: The list.
    /// - Throws: ``HotUpdateError/Code/notFound`` when the package or that version is no
    ///   longer installed, or its list is missing; ``HotUpdateError/Code/storeCorrupt`` when
    ///   the list cannot be decoded.
    public func fileList(of package: InstalledPackage) async throws -> FileList {
        try await store.activeFileList(package.id, version: package.version)
    }
}
