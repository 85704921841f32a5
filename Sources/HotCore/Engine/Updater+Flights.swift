import Foundation
import Logging

/// What identifies one flight: the package, what is fetched (its strongest digest, else its
/// URL), and whether it replaces a damaged tree of the active version.
struct FlightKey: Hashable, Sendable {
    var id: String
    var content: String
    var isRepair: Bool

    init(_ descriptor: PackageDescriptor, isRepair: Bool) {
        id = descriptor.id
        content = descriptor.strongestDigest.map { "\($0.algorithm):\($0.hex)" } ?? descriptor.url.absoluteString
        self.isRepair = isRepair
    }
}

/// What a flight gives every caller.
struct FlightResult: Sendable {
    /// The version now active.
    var version: InstalledVersion
    /// Bytes downloaded by the flight (0 when the version was already installed).
    var bytesDownloaded: Int64
}

/// One download-and-install in progress, and the callers waiting for it.
/// Lives on the updater's actor only.
final class Flight {
    let number: Int
    var task: Task<Void, Never>?
    var waiters: [Int: CheckedContinuation<FlightResult, any Error>] = [:]
    var nextWaiter = 0

    init(number: Int) {
        self.number = number
    }
}

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
        let snapshot = try await open()
        if let record = snapshot.packages[descriptor.id], let active = record.active,
            UpdatePlan.isSame(descriptor, active), record.state != .fileMissing, record.state != .digestMismatch
        {
            return try installedPackage(record, active)
        }
        let result = try await join(descriptor)
        guard let record = self.snapshot?.packages[descriptor.id] else {
            throw HotUpdateError(.internalInconsistency, "installed but not recorded", packageID: descriptor.id)
        }
        return try installedPackage(record, result.version)
    }

    private func installedPackage(_ record: InstallRecord, _ version: InstalledVersion) throws -> InstalledPackage {
        InstalledPackage(
            id: record.id, version: version.version, directory: try layout.url(forRelativePath: version.path),
            state: record.state, installedAt: version.installedAt)
    }

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

    private func cancelFlights(where matches: (FlightKey) -> Bool) async {
        var stopped: [Task<Void, Never>] = []
        for (key, flight) in flights where matches(key) {
            flights[key] = nil
            flight.task?.cancel()
            if let task = flight.task { stopped.append(task) }
            let error = HotUpdateError(.cancelled, "the install was cancelled", packageID: key.id)
            for continuation in flight.waiters.values { continuation.resume(throwing: error) }
            flight.waiters.removeAll()
        }
        for task in stopped { await task.value }
    }

    /// Waits for the flight fetching `descriptor`, starting it if none runs.
    func join(_ descriptor: PackageDescriptor, isRepair: Bool = false) async throws -> FlightResult {
        let key = FlightKey(descriptor, isRepair: isRepair)
        let flight = flights[key] ?? startFlight(key, descriptor)
        flight.nextWaiter += 1
        let waiter = flight.nextWaiter
        let number = flight.number
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                if Task.isCancelled {
                    continuation.resume(throwing: CancellationError())
                    if flight.waiters.isEmpty { abandon(key, flight) }
                } else {
                    flight.waiters[waiter] = continuation
                }
            }
        } onCancel: {
            Task { await self.leave(key, number: number, waiter: waiter) }
        }
    }

    /// A cancelled caller leaves; the last one to leave stops the flight.
    private func leave(_ key: FlightKey, number: Int, waiter: Int) {
        guard let flight = flights[key], flight.number == number,
            let continuation = flight.waiters.removeValue(forKey: waiter)
        else { return }
        continuation.resume(throwing: CancellationError())
        if flight.waiters.isEmpty { abandon(key, flight) }
    }

    private func abandon(_ key: FlightKey, _ flight: Flight) {
        guard flights[key] === flight else { return }
        flights[key] = nil
        flight.task?.cancel()
    }

    private func startFlight(_ key: FlightKey, _ descriptor: PackageDescriptor) -> Flight {
        flightCounter += 1
        let flight = Flight(number: flightCounter)
        flights[key] = flight
        let number = flight.number
        flight.task = Task {
            let result: Result<FlightResult, any Error>
            do {
                result = .success(try await self.fly(descriptor, isRepair: key.isRepair))
            } catch {
                result = .failure(error)
            }
            self.land(key, number: number, result)
        }
        return flight
    }

    /// Hands the result to every caller still waiting.
    private func land(_ key: FlightKey, number: Int, _ result: Result<FlightResult, any Error>) {
        guard let flight = flights[key], flight.number == number else { return }
        flights[key] = nil
        for continuation in flight.waiters.values { continuation.resume(with: result) }
        flight.waiters.removeAll()
    }

    /// The flight's work: wait for a slot, download, check and unpack into staging, then
    /// install through the store queue. States and progress are published on the way; a
    /// failure is recorded, a cancellation puts back the stored state.
    private nonisolated func fly(_ descriptor: PackageDescriptor, isRepair: Bool) async throws -> FlightResult {
        let id = descriptor.id
        let progressKey = "\(id)#\(UUID().uuidString)"
        let tracker = ProgressTracker(UpdateEvent.PackageProgress(id: id, version: descriptor.version))
        hub.begin(progressKey, tracker.current)
        defer { hub.end(progressKey) }
        do {
            try await slots.acquire()
            let staged: StagedPackage
            do {
                defer { slots.release() }
                hub.publish(id, descriptor.version, .downloading)
                let hub = self.hub
                let observer = FetchObserver(
                    received: { bytes, expected in
                        hub.advance(progressKey, tracker.update { $0.bytesReceived = bytes; $0.bytesExpected = expected })
                    },
                    verifying: { hub.publish(id, descriptor.version, .verifying) },
                    unpacked: { step in
                        hub.advance(
                            progressKey,
                            tracker.update {
                                $0.filesUnpacked = step.entriesCompleted
                                $0.filesTotal = step.entriesTotal
                            })
                    })
                staged = try await PackageFetcher(configuration: configuration, layout: layout)
                    .stage(descriptor, observer: observer)
            }
            let version =
                isRepair
                ? try await serialized { try await self.repairStaged(staged, descriptor) }
                : try await installStaged(staged, descriptor)
            return FlightResult(version: version, bytesDownloaded: staged.size)
        } catch {
            let hot = HotUpdateError.wrap(error, as: .internalInconsistency, "failed", packageID: id)
            if hot.code == .cancelled {
                await publishStoredState(of: id)
            } else {
                logger.warning("update failed: \(hot)", metadata: ["package": "\(id)"])
                await recordFailure(id, version: descriptor.version, hot)
            }
            throw hot
        }
    }

    /// Publishes the stored state again, after a flight that changed nothing.
    private func publishStoredState(of id: String) {
        let record = snapshot?.packages[id]
        hub.publish(id, record?.active?.version, record?.state ?? .new)
    }
}

/// The progress of one flight, updated from the transport's and unarchiver's threads.
final class ProgressTracker: @unchecked Sendable {
    private let lock = NSLock()
    private var value: UpdateEvent.PackageProgress

    init(_ initial: UpdateEvent.PackageProgress) {
        value = initial
    }

    var current: UpdateEvent.PackageProgress { lock.withLock { value } }

    /// Applies `change` and returns the new value.
    func update(_ change: (inout UpdateEvent.PackageProgress) -> Void) -> UpdateEvent.PackageProgress {
        lock.withLock {
            change(&value)
            return value
        }
    }
}
