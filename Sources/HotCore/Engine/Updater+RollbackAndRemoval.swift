import Foundation
import Logging

extension Updater {
    /// Makes the newest previous version of a package active again.
    ///
    /// The kept tree is checked before it is served: the size of every file, and its hash
    /// too when damage was ever seen in content it shares (``InstalledVersion/damageSeen``).
    /// A tree that fails and cannot be mended from intact objects is never restored: it is
    /// deleted and the version downloaded again from where it came from.
    ///
    /// - Parameter packageID: The package.
    /// - Throws: ``HotUpdateError/Code/notFound`` when the package has no previous version;
    ///   ``HotUpdateError`` naming the package when a damaged kept version cannot be
    ///   downloaded again (the active version stays).
    public func rollback(packageID: String) async throws {
        guard case .damaged(let kept, let reason, let digests) = try await rollback(packageID, to: { _ in true })
        else { return }
        let descriptor: PackageDescriptor
        do {
            descriptor = try UpdaterHealth.descriptor(fetchingAgain: kept, of: packageID)
        } catch let error as HotUpdateError {
            throw HotUpdateError(
                reason.code,
                "\(reason.message); it cannot be downloaded again: \(error.message)",
                packageID: packageID,
                subject: reason.subject
            )
        }
        _ = try await join(descriptor)
        await store.relinkShared(digests, of: packageID)
    }

    /// Makes the newest previous version that `matches` active again (see
    /// ``Store/rollback(_:to:)``) and publishes it; a kept version whose tree failed its
    /// check is not restored, and the caller downloads it again.
    func rollback(
        _ id: String,
        to matches: @escaping @Sendable (InstalledVersion) -> Bool
    ) async throws
        -> Store.Restore
    {
        let outcome = try await store.rollback(id, to: matches)
        if case .restored(let restored) = outcome { hub.publish(id, restored.version, .installed) }
        return outcome
    }

    /// Deletes a package: every version of it, its record, the objects no other package or
    /// version links, and its partial downloads (`partial/`). Files it shares with other
    /// packages stay for them.
    ///
    /// Work on the package in progress is cancelled first.
    ///
    /// - Parameter packageID: The package.
    /// - Returns: The versions deleted, the objects freed and the partial downloads removed.
    /// - Throws: ``HotUpdateError/Code/notFound`` when the store knows nothing of the
    ///   package; ``HotUpdateError/Code/fileSystem`` when the store cannot be written.
    ///
    /// ```swift
    /// try await updater.remove(packageID: "filters")
    /// ```
    @discardableResult
    public func remove(packageID: String) async throws -> GarbageReport {
        await cancel(packageID: packageID)
        guard let report = try await store.remove(packageID) else {
            throw HotUpdateError(.notFound, "not installed", packageID: packageID)
        }
        hub.publish(packageID, nil, .removed)
        return report
    }

    /// Collects garbage: deletes versions beyond the active one and the
    /// ``UpdaterConfiguration/keepPreviousVersions`` newest previous ones, then every
    /// object no installed tree links (an object whose link count is 1), whatever an
    /// interrupted step left, and every partial download (`partial/`) no live download is
    /// writing: a cut download starts over after it.
    ///
    /// - Returns: What was freed.
    /// - Throws: ``HotUpdateError`` when the store cannot be read or written.
    ///
    /// ```swift
    /// let freed = try await updater.collectGarbage()
    /// print(freed.bytesFreed)
    /// ```
    public func collectGarbage() async throws -> GarbageReport {
        try await store.collectGarbage(keep: configuration.keepPreviousVersions)
    }
}
