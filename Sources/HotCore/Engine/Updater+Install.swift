import Foundation
import Logging

extension Updater {
    /// Installs one package, downloading it only if that version is not already active.
    ///
    /// Call it from as many places as you like at once: every concurrent call for the same
    /// package content shares one flight (one download, one unpack), in the manner of
    /// Nuke's task coalescing, and ``sync(from:)`` joins the same flights. Cancelling the
    /// calling task makes this call throw `CancellationError` at once; the flight goes on
    /// while any other caller still waits, and stops (leaving nothing behind) when none
    /// does. Progress is published on ``events(bufferingNewest:)``.
    ///
    /// - Parameter descriptor: The package to install.
    /// - Returns: The installed package.
    /// - Throws: ``HotUpdateError`` naming the package when it cannot be fetched, checked,
    ///   unpacked or recorded (the previous version stays active), `CancellationError` when
    ///   the caller was cancelled, ``HotUpdateError/Code/cancelled`` after ``cancel(packageID:)``
    ///   or ``cancelAll()``.
    ///
    /// ```swift
    /// async let a = updater.install(filters)   // one download …
    /// async let b = updater.install(filters)   // … for both
    /// let directory = try await a.directory
    /// _ = try await b
    /// ```
    public func install(_ descriptor: PackageDescriptor) async throws -> InstalledPackage {
        try await install(descriptor, priority: .requested)
    }

    /// ``install(_:)`` at a priority.
    func install(_ descriptor: PackageDescriptor, priority: DownloadPriority) async throws -> InstalledPackage {
        // A caller cancelled before it asks, or while the store is read, gets no answer even
        // when the version is already installed.
        try Task.checkCancellation()
        let snapshot = try await open()
        try Task.checkCancellation()
        if let record = snapshot.packages[descriptor.id], let active = record.active,
            UpdatePlan.isSame(descriptor, active), !record.state.isDamage
        {
            return try store.installedPackage(record, version: active)
        }
        let result = try await join(descriptor, priority: priority)
        guard let record = await store.cachedRecord(descriptor.id) else {
            throw HotUpdateError(.internalInconsistency, "installed but not recorded", packageID: descriptor.id)
        }
        return try store.installedPackage(record, version: result.version)
    }

    /// Hands a staged package to the store's next install group (see ``Store/install(_:)``)
    /// and publishes the version recorded.
    ///
    /// - Parameter key: The flight that staged it; nil for a local folder.
    func installStaged(
        _ staged: StagedPackage,
        _ offered: PackageDescriptor,
        key: FlightKey?
    ) async throws
        -> InstalledVersion
    {
        let asked = key.flatMap { requested[$0] }
        let seen: Int
        if let asked {
            seen = asked.generation
        } else {
            seen = await seenGeneration()
        }
        let request = InstallRequest(
            staged: staged,
            offered: offered,
            chosenAt: asked?.date ?? Date(),
            seenGeneration: seen,
            newerRequest: { [weak self] in await self?.newerRequest(than: key, for: offered.id) },
            policy: configuration.launch,
            keep: configuration.keepPreviousVersions
        )
        let version = try await store.install(request)
        hub.publish(offered.id, offered.version, .installed)
        logger.info("installed", metadata: ["package": "\(offered.id)", "version": "\(offered.version)"])
        return version
    }

    /// The version asked for since `key` was, when a newer request for `id` is running in
    /// this process; nil when `key` is still the newest (or installs a local folder).
    private func newerRequest(than key: FlightKey?, for id: String) -> String? {
        guard let key, let newest = wanted[id], newest.key != key else { return nil }
        return newest.key.version
    }

    /// Records a failure (state ``PackageState/failed`` with the error) and publishes it.
    func recordFailure(_ id: String, version: String?, _ error: HotUpdateError) async {
        hub.publish(id, version, .failed, error)
        do {
            try await store.recordFailure(id, error)
        } catch {
            logger.error("cannot record the failure of \(id): \(error)")
        }
    }

    /// How many staged packages wait for the next install group (for tests).
    package var pendingInstallCount: Int {
        get async { await store.waitingInstallCount }
    }
}
