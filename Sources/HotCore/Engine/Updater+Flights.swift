import Foundation
import Logging

extension Updater {
    /// Stops the work on one package for every caller: downloads end, staging is removed,
    /// and nothing half-installed remains when this returns. Callers waiting for it throw
    /// ``HotUpdateError/Code/cancelled``. A later request starts afresh. A flight already
    /// recording its version finishes that step: the version is then fully installed.
    ///
    /// - Parameter packageID: The package.
    public func cancel(packageID: String) async {
        await cancelFlights { $0.id == packageID }
    }

    /// Stops every flight, as ``cancel(packageID:)`` does for one package.
    public func cancelAll() async {
        await cancelFlights { _ in true }
    }

    private func cancelFlights(where matches: @escaping @Sendable (FlightKey) -> Bool) async {
        for (id, wanted) in wanted where matches(wanted.key) { self.wanted[id] = nil }
        await flights.cancel(where: matches) { key in
            HotUpdateError(.cancelled, "the install was cancelled", packageID: key.id)
        }
    }

    /// Waits for the flight fetching `descriptor`, starting it if none runs. An install
    /// (not a repair) becomes the package's newest request: an older flight for other
    /// content that finishes later does not install over it.
    func join(
        _ descriptor: PackageDescriptor,
        repairing: String? = nil,
        priority: DownloadPriority = .update
    ) async throws -> FlightResult {
        let key = FlightKey(descriptor, repairing: repairing)
        // A flight already waiting for a slot goes ahead of what this caller outranks.
        slots.raise(tag: key.slotTag, to: priority.rawValue)
        if repairing == nil {
            // The snapshot the caller read just before it asked (`install` and `sync` read the
            // store first): a version committed after it was chosen after this request.
            let seen = await seenGeneration()
            wanted[descriptor.id] = WantedVersion(key: key, seenGeneration: seen)
            requested[key] = (Date(), seen)
        }
        return try await flights.join(key) { [self] in
            try await self.fly(descriptor, key: key, priority: priority)
        }
    }

    /// The generation of the snapshot last read, reading it when none was.
    func seenGeneration() async -> Int {
        if let cached = await store.cached { return cached.generation }
        return (try? await store.read())?.generation ?? 0
    }

    /// How many callers wait for a flight of `packageID` (for tests that need a caller to
    /// have joined before they let a download finish).
    package func flightSubscribers(packageID: String) async -> Int {
        var count = 0
        for key in await flights.runningKeys where key.id == packageID {
            count += await flights.subscriberCount(for: key)
        }
        return count
    }

    /// The flight's work: wait for a slot, download, check and unpack into staging, then
    /// install through the store queue. States and progress are published on the way; a
    /// failure is recorded, a cancellation puts back the stored state.
    private nonisolated func fly(
        _ descriptor: PackageDescriptor,
        key: FlightKey,
        priority: DownloadPriority
    ) async throws -> FlightResult {
        let recorder = PhaseRecorder()
        var result = try await PhaseRecorder.$current.withValue(recorder) {
            try await flyRecorded(descriptor, key: key, priority: priority)
        }
        result.phases = recorder.recorded
        return result
    }

    /// ``fly(_:key:priority:)`` with the phases recorded by the task's ``PhaseRecorder``.
    private nonisolated func flyRecorded(
        _ descriptor: PackageDescriptor,
        key: FlightKey,
        priority: DownloadPriority
    ) async throws -> FlightResult {
        let id = descriptor.id
        let progressKey = "\(id)#\(UUID().uuidString)"
        let tracker = Locked(UpdateEvent.PackageProgress(id: id, version: descriptor.version))
        hub.begin(progressKey, tracker.value)
        defer { hub.end(progressKey) }
        var downloaded = false
        do {
            try store.requireCaseSensitiveVolume(for: descriptor)
            try await slots.acquire(priority: priority.rawValue, tag: key.slotTag)
            let staged: StagedPackage
            let delta: SyncReport.DeltaUse?
            do {
                defer { slots.release() }
                hub.publish(id, descriptor.version, .downloading)
                let observer = hub.progressObserver(
                    id: id,
                    version: descriptor.version,
                    key: progressKey,
                    tracker: tracker
                )
                (staged, delta) = try await stageChoosingDelta(descriptor, repairing: key.repairing, observer: observer)
            }
            downloaded = true
            report(.download(descriptor, staged, delta: delta))
            let version =
                if let repairing = key.repairing {
                    try await repairTree(staged, descriptor, repairing: repairing)
                } else {
                    try await installStaged(staged, descriptor, key: key)
                }
            if key.repairing == nil { report(TelemetryEvent(kind: .install, packageID: id, version: version.version)) }
            await landed(key)
            return FlightResult(version: version, bytesDownloaded: staged.downloaded, delta: delta)
        } catch {
            await landed(key)
            let hot = HotUpdateError.wrap(error, as: .internalInconsistency, "failed", packageID: id)
            if hot.code == .cancelled || hot.code == .superseded {
                await publishStoredState(of: id)
            } else {
                logger.warning("update failed: \(hot)", metadata: ["package": "\(id)"])
                let kind: TelemetryEvent.Kind = downloaded ? .install : .download
                report(TelemetryEvent(kind: kind, packageID: id, version: descriptor.version, errorCode: "\(hot.code)"))
                await recordFailure(id, version: descriptor.version, hot)
            }
            throw hot
        }
    }

    /// Replaces a damaged tree with the one staged (see ``Store/replaceTree(_:_:repairing:)``)
    /// and publishes the version whole again.
    private func repairTree(
        _ staged: StagedPackage,
        _ offered: PackageDescriptor,
        repairing: String
    ) async throws
        -> InstalledVersion
    {
        let version = try await store.replaceTree(staged, offered, repairing: repairing)
        hub.publish(offered.id, version.version, .installed)
        logger.info(
            "re-fetched a damaged version",
            metadata: ["package": "\(offered.id)", "version": "\(version.version)"]
        )
        return version
    }

    /// A flight ended: it is no longer the package's newest request.
    private func landed(_ key: FlightKey) {
        if wanted[key.id]?.key == key { wanted[key.id] = nil }
        requested[key] = nil
    }

    /// Publishes the stored state again, after a flight that changed nothing.
    private func publishStoredState(of id: String) async {
        let record = await store.cachedRecord(id)
        hub.publish(id, record?.active?.version, record?.state ?? .new)
    }
}
