import Foundation
import Logging

/// An installed package, located under the store root of this launch.
public struct InstalledPackage: Sendable, Hashable {
    /// The package id.
    public var id: String
    /// The active version.
    public var version: String
    /// The installed tree, absolute for this launch (computed from the relative stored path).
    public var directory: URL
    /// Where the package stands.
    public var state: PackageState
    /// When the active version was installed.
    public var installedAt: Date

    /// Creates a value.
    public init(id: String, version: String, directory: URL, state: PackageState, installedAt: Date) {
        self.id = id
        self.version = version
        self.directory = directory
        self.state = state
        self.installedAt = installedAt
    }
}

/// Runs updates: check, plan, fetch, verify, unpack, commit; and answers what is installed.
///
/// An updater owns one store root. Syncs are serialised: a second `sync` waits for the
/// first. A failed package never disturbs the version already active, and the store is
/// only written, atomically, after a package is fully unpacked in place.
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
    /// Where things live under the root.
    public nonisolated let layout: StoreLayout

    private var snapshot: StoreSnapshot?
    private var syncTail: Task<Void, Never>?
    private nonisolated var logger: Logger { configuration.logger }

    /// Creates an updater. Nothing is read or written until the first call.
    public init(configuration: UpdaterConfiguration) {
        self.configuration = configuration
        self.layout = StoreLayout(root: configuration.root)
    }

    // MARK: - Reading

    /// The current snapshot of the store.
    ///
    /// - Throws: ``HotUpdateError`` from the metadata store.
    public func currentSnapshot() async throws -> StoreSnapshot {
        try await open()
    }

    /// The packages with an active version that assets may be resolved from (not disabled),
    /// most recently installed first.
    ///
    /// - Throws: ``HotUpdateError`` from the metadata store.
    public func installedPackages() async throws -> [InstalledPackage] {
        let snapshot = try await open()
        var result: [InstalledPackage] = []
        for record in snapshot.packages.values {
            guard let active = record.active, record.state != .disabled else { continue }
            result.append(
                InstalledPackage(
                    id: record.id, version: active.version,
                    directory: try layout.url(forRelativePath: active.path),
                    state: record.state, installedAt: active.installedAt))
        }
        return result.sorted { ($0.installedAt, $0.id) > ($1.installedAt, $1.id) }
    }

    /// Compares `manifest` with what is installed.
    ///
    /// - Throws: ``HotUpdateError`` from the metadata store.
    public func plan(for manifest: Manifest) async throws -> UpdatePlan {
        UpdatePlan.make(manifest: manifest, snapshot: try await open())
    }

    // MARK: - Updating

    /// Fetches the manifest from `source` and brings the store up to date with it.
    ///
    /// Package failures do not throw: they are in the report (see
    /// ``SyncReport/throwIfFailed()``), recorded as ``PackageState/failed``, and leave the
    /// previous version active.
    ///
    /// - Throws: ``HotUpdateError`` when the manifest cannot be fetched or read, or the
    ///   store cannot be opened.
    public func sync(from source: any ManifestSource) async throws -> SyncReport {
        try await serialized {
            let manifest: Manifest
            do {
                manifest = try await source.fetchManifest()
            } catch {
                throw HotUpdateError.wrap(error, as: .manifestInvalid, "cannot fetch the manifest")
            }
            return try await self.performApply(UpdatePlan.make(manifest: manifest, snapshot: try await self.open()))
        }
    }

    /// Brings the store up to date with `manifest`.
    ///
    /// - Throws: ``HotUpdateError`` when the store cannot be opened.
    public func apply(_ manifest: Manifest) async throws -> SyncReport {
        try await serialized {
            try await self.performApply(UpdatePlan.make(manifest: manifest, snapshot: try await self.open()))
        }
    }

    /// Makes the newest previous version of a package active again.
    ///
    /// - Throws: ``HotUpdateError/Code/notFound`` when the package has no previous version.
    public func rollback(packageID: String) async throws {
        try await serialized { try await self.performRollback(packageID: packageID) }
    }

    private func performRollback(packageID: String) async throws {
        var snapshot = try await self.open()
        guard var record = snapshot.packages[packageID], !record.previous.isEmpty else {
            throw HotUpdateError(.notFound, "no previous version to roll back to", packageID: packageID)
        }
        let restored = record.previous.removeFirst()
        if let active = record.active { record.previous.insert(active, at: 0) }
        record.active = restored
        record.state = .installed
        record.lastError = nil
        snapshot.packages[packageID] = record
        try await self.commit(snapshot)
        self.logger.info("rolled back", metadata: ["package": "\(packageID)", "version": "\(restored.version)"])
    }

    /// Removes a package and every version of it.
    ///
    /// - Throws: ``HotUpdateError/Code/notFound`` when it is not installed.
    public func remove(packageID: String) async throws {
        try await serialized { try await self.performRemove(packageID: packageID) }
    }

    private func performRemove(packageID: String) async throws {
        var snapshot = try await self.open()
        guard let record = snapshot.packages.removeValue(forKey: packageID) else {
            throw HotUpdateError(.notFound, "not installed", packageID: packageID)
        }
        try await self.commit(snapshot)
        self.deleteVersions(([record.active].compactMap { $0 }) + record.previous, of: packageID)
    }

    // MARK: - Internals

    /// Runs `work` after every earlier serialized call has finished.
    private func serialized<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
        let previous = syncTail
        let task = Task<T, any Error> {
            await previous?.value
            return try await work()
        }
        syncTail = Task { _ = await task.result }
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// Loads the snapshot once, and on the first load sweeps what a crash may have left:
    /// staging, and installed directories no record refers to.
    private func open() async throws -> StoreSnapshot {
        if let snapshot { return snapshot }
        try FileSystem.createDirectory(layout.root)
        let loaded = try await configuration.store.load()
        guard loaded.schema <= StoreSnapshot.currentSchema else {
            throw HotUpdateError(.storeCorrupt, "the store was written by a newer HotUpdate (schema \(loaded.schema))")
        }
        if snapshot == nil {
            snapshot = loaded
            sweep(loaded)
        }
        return snapshot ?? loaded
    }

    private func sweep(_ snapshot: StoreSnapshot) {
        try? FileSystem.remove(layout.stagingDirectory)
        var referenced = Set<String>()
        for record in snapshot.packages.values {
            for version in [record.active].compactMap({ $0 }) + record.previous {
                referenced.insert(version.path)
            }
        }
        for id in FileSystem.contents(of: layout.packagesDirectory) {
            let idDirectory = layout.packageDirectory(id: id)
            for name in FileSystem.contents(of: idDirectory) {
                let relative = layout.relativeVersionPath(id: id, directoryName: name)
                if !referenced.contains(relative) {
                    logger.notice("removing an install no record refers to", metadata: ["path": "\(relative)"])
                    try? FileSystem.remove(idDirectory.appendingPathComponent(name))
                }
            }
            if FileSystem.contents(of: idDirectory).isEmpty { try? FileSystem.remove(idDirectory) }
        }
    }

    private func commit(_ newSnapshot: StoreSnapshot) async throws {
        var next = newSnapshot
        next.generation = (snapshot?.generation ?? 0) + 1
        try await configuration.store.commit(next)
        snapshot = next
    }

    private func performApply(_ plan: UpdatePlan) async throws -> SyncReport {
        var outcomes: [String: PackageOutcome] = [:]

        // Unchanged packages: clear a failure left by an earlier attempt at another version.
        var snapshot = try await open()
        var touched = false
        for entry in plan.packages where entry.change == .unchanged {
            if var record = snapshot.packages[entry.id], record.state == .failed {
                record.state = .installed
                record.lastError = nil
                snapshot.packages[entry.id] = record
                touched = true
            }
            outcomes[entry.id] = PackageOutcome(
                id: entry.id, change: .unchanged, activeVersion: entry.installed?.version)
        }
        if touched { try await commit(snapshot) }

        // Disable and enable: the files stay, only the state changes; nothing is downloaded.
        let toggles = plan.packages.filter { $0.change == .disable || $0.change == .enable }
        if !toggles.isEmpty {
            var snapshot = try await open()
            for entry in toggles { outcomes[entry.id] = snapshot.setAvailability(entry, logger: logger) }
            try await commit(snapshot)
        }

        // Downloads, with bounded parallelism; each commits as soon as it is unpacked.
        let fetcher = PackageFetcher(configuration: configuration, layout: layout)
        let downloads = plan.packages.filter { $0.change.downloads }
        await withTaskGroup(of: (PackagePlan, Result<StagedPackage, HotUpdateError>).self) { group in
            var pending = downloads[...]
            func startNext() {
                guard let entry = pending.popFirst(), let offered = entry.offered else { return }
                group.addTask {
                    do {
                        return (entry, .success(try await fetcher.stage(offered)))
                    } catch {
                        return (entry, .failure(HotUpdateError.wrap(error, as: .internalInconsistency, "failed",
                                                                    packageID: entry.id)))
                    }
                }
            }
            for _ in 0..<configuration.maxConcurrentPackages { startNext() }
            while let (entry, result) = await group.next() {
                startNext()
                outcomes[entry.id] = await self.finish(entry, result)
            }
        }

        // Removals.
        for entry in plan.packages where entry.change == .remove {
            do {
                var snapshot = try await open()
                if let record = snapshot.packages.removeValue(forKey: entry.id) {
                    try await commit(snapshot)
                    deleteVersions(([record.active].compactMap { $0 }) + record.previous, of: entry.id)
                }
                logger.info("removed", metadata: ["package": "\(entry.id)"])
                outcomes[entry.id] = PackageOutcome(id: entry.id, change: .remove, activeVersion: nil)
            } catch {
                outcomes[entry.id] = PackageOutcome(
                    id: entry.id, change: .remove, activeVersion: entry.installed?.version,
                    error: HotUpdateError.wrap(error, as: .fileSystem, "cannot remove", packageID: entry.id))
            }
        }

        let ordered = plan.packages.compactMap { outcomes[$0.id] }
        return SyncReport(manifestVersion: plan.manifest.version, packages: ordered)
    }

    /// Installs a staged package (move into place, then one atomic commit), or records a failure.
    private func finish(_ entry: PackagePlan, _ result: Result<StagedPackage, HotUpdateError>) async -> PackageOutcome {
        guard let offered = entry.offered else {
            return PackageOutcome(id: entry.id, change: entry.change, activeVersion: nil)
        }
        switch result {
        case .success(let staged):
            defer { try? FileSystem.remove(staged.stagingDirectory) }
            do {
                let installed = try await install(staged, offered: offered)
                logger.info(
                    "installed", metadata: ["package": "\(entry.id)", "version": "\(offered.version)"])
                return PackageOutcome(
                    id: entry.id, change: entry.change, activeVersion: installed.version,
                    bytesDownloaded: staged.size)
            } catch {
                let hot = HotUpdateError.wrap(error, as: .fileSystem, "cannot install", packageID: entry.id)
                await recordFailure(entry.id, hot)
                return PackageOutcome(
                    id: entry.id, change: entry.change, activeVersion: entry.installed?.version, error: hot)
            }
        case .failure(let error):
            logger.warning("update failed: \(error)", metadata: ["package": "\(entry.id)"])
            await recordFailure(entry.id, error)
            return PackageOutcome(
                id: entry.id, change: entry.change, activeVersion: entry.installed?.version, error: error)
        }
    }

    private func install(_ staged: StagedPackage, offered: PackageDescriptor) async throws -> InstalledVersion {
        var snapshot = try await open()
        let existing = snapshot.packages[offered.id]
        let kept = ([existing?.active].compactMap { $0 }) + (existing?.previous ?? [])
        let keptPaths = Set(kept.map(\.path))

        // The version's directory: its version, or the version and digest when a kept
        // version already uses that name (a re-published version).
        var name = offered.version
        if keptPaths.contains(layout.relativeVersionPath(id: offered.id, directoryName: name)) {
            name = "\(offered.version)-\(staged.sha256.hex.prefix(16))"
        }
        let relative = layout.relativeVersionPath(id: offered.id, directoryName: name)
        if keptPaths.contains(relative) {
            throw HotUpdateError(
                .internalInconsistency, "version \(offered.version) with this digest is already kept",
                packageID: offered.id)
        }
        let destination = try layout.url(forRelativePath: relative)
        try FileSystem.createDirectory(layout.packageDirectory(id: offered.id))
        try FileSystem.remove(destination)
        try FileSystem.rename(staged.tree, to: destination)
        do {
            let root = layout.root
            try await FileSystem.offload { try FileSystem.syncFileSystem(containing: root) }
        } catch {
            try? FileSystem.remove(destination)
            throw error
        }

        let version = InstalledVersion(
            version: offered.version, path: relative, archiveSize: staged.size, sha256: staged.sha256.hex,
            md5: staged.md5?.hex, sourceURL: offered.url.absoluteString, installedAt: Date())
        var previous = kept
        let dropped = previous.count > configuration.keepPreviousVersions
            ? Array(previous[configuration.keepPreviousVersions...]) : []
        previous = Array(previous.prefix(configuration.keepPreviousVersions))
        snapshot.packages[offered.id] = InstallRecord(
            id: offered.id, state: .installed, active: version, previous: previous, lastError: nil)
        do {
            try await commit(snapshot)
        } catch {
            try? FileSystem.remove(destination)
            throw error
        }
        deleteVersions(dropped, of: offered.id)
        return version
    }

    private func recordFailure(_ id: String, _ error: HotUpdateError) async {
        guard var snapshot = try? await open() else { return }
        var record = snapshot.packages[id] ?? InstallRecord(id: id, state: .failed, active: nil)
        record.state = .failed
        record.lastError = error.description
        snapshot.packages[id] = record
        do {
            try await commit(snapshot)
        } catch {
            logger.error("cannot record the failure of \(id): \(error)")
        }
    }

    private nonisolated func deleteVersions(_ versions: [InstalledVersion], of id: String) {
        for version in versions {
            guard let url = try? layout.url(forRelativePath: version.path) else { continue }
            do {
                try FileSystem.remove(url)
            } catch {
                logger.warning("cannot delete an old version: \(error)", metadata: ["package": "\(id)"])
            }
        }
        let directory = layout.packageDirectory(id: id)
        if FileSystem.contents(of: directory).isEmpty { try? FileSystem.remove(directory) }
    }
}
