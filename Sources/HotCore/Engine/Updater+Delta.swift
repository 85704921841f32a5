import Foundation
import Logging

extension Updater {
    /// Stages `descriptor` from the delta that applies to the active version when there is
    /// one and it is smaller than the full package; when the delta is refused for any reason
    /// the full package is staged instead, and the refusal is logged, published as
    /// ``UpdateEvent/deltaFallback(_:)`` and returned for the report. A repair never uses a
    /// delta: the objects it would build from may be what is damaged.
    ///
    /// - Returns: The staged package (its ``StagedPackage/downloaded`` counts the refused
    ///   delta's bytes too) and the delta tried, if any.
    nonisolated func stageChoosingDelta(
        _ descriptor: PackageDescriptor,
        repairing: String?,
        observer: FetchObserver
    ) async throws -> (StagedPackage, SyncReport.DeltaUse?) {
        let fetcher = PackageFetcher(configuration: configuration, layout: layout)
        guard repairing == nil, configuration.usesDeltas, let (delta, base) = await store.deltaBase(for: descriptor)
        else {
            return (try await fetcher.stage(descriptor, into: try await store.makeStaging(), observer: observer), nil)
        }
        let (id, from) = (descriptor.id, base.version)
        let received = Locked<Int64>(0)
        var deltaObserver = observer
        deltaObserver.received = { bytes, expected in
            received.set(bytes)
            observer.received(bytes, expected)
        }
        do {
            let staging = try await store.makeStaging()
            let staged = try await fetcher.stageDelta(
                delta,
                of: descriptor,
                base: base,
                into: staging,
                observer: deltaObserver
            )
            let metadata: Logger.Metadata = ["package": "\(id)", "from": "\(from)", "to": "\(descriptor.version)"]
            logger.info("installing from a delta", metadata: metadata.merging(["bytes": "\(staged.downloaded)"]) { $1 })
            return (staged, SyncReport.DeltaUse(baseVersion: from, bytes: staged.downloaded))
        } catch {
            if Task.isCancelled { throw error }
            let hot = HotUpdateError.wrap(error, as: .internalInconsistency, "the delta was refused", packageID: id)
            if hot.code == .cancelled { throw hot }
            let metadata: Logger.Metadata = ["package": "\(id)", "from": "\(from)"]
            logger.warning("the delta was refused; downloading the full package: \(hot)", metadata: metadata)
            let fallback = UpdateEvent.DeltaFallback(id: id, version: descriptor.version, baseVersion: from, error: hot)
            hub.publish(.deltaFallback(fallback))
            // Kept bytes of a delta refused for want of space would take the space the full
            // package needs, on this attempt and every later one: they go first.
            if hot.code == .diskFull { await store.dropPartialDownload(of: delta) }
            FaultPoint.reached("before-fallback")
            var staged = try await fetcher.stage(descriptor, into: try await store.makeStaging(), observer: observer)
            staged.downloaded += received.value
            // The full package stands in for the delta: a cut delta will not be resumed.
            await store.dropPartialDownload(of: delta)
            return (staged, SyncReport.DeltaUse(baseVersion: from, bytes: received.value, fallback: hot))
        }
    }
}
