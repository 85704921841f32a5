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
        await relinkShared(digests, of: packageID)
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
        switch outcome {
        case .restored(let restored):
            hub.publish(id, restored.version, .installed)
            logger.info("rolled back", metadata: ["package": "\(id)", "version": "\(restored.version)"])
        case .damaged(let kept, let reason, _):
            logger.warning(
                "the kept version is damaged and was deleted; it is downloaded again: \(reason)",
                metadata: ["package": "\(id)", "version": "\(kept.version)"]
            )
        }
        return outcome
    }

    /// Links the kept trees sharing `digests` to their good objects again, after a download
    /// put those back (see ``Store/relinkShared(_:)``); a failure is logged, not thrown: those
    /// versions stay marked ``InstalledVersion/damageSeen`` and are checked before a restore.
    func relinkShared(_ digests: Set<String>, of id: String) async {
        do {
            _ = try await store.relinkShared(digests)
        } catch {
            logger.warning(
                "cannot link the kept versions sharing damaged files to good objects: \(error)",
                metadata: ["package": "\(id)"]
            )
        }
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

/// A download kept under `partial/` to be resumed, as ``Updater/partialDownloads()`` lists it.
package struct PartialDownloadStatus: Sendable, Hashable, Codable {
    /// The SHA-256 the manifest gives the download: its name under `partial/`.
    package var sha256: String
    /// The package it is for (a delta's is the package it updates); nil when its sidecar does
    /// not say (one written by an older HotUpdate).
    package var package: String?
    /// The version it is for.
    package var version: String?
    /// The bytes downloaded so far.
    package var bytes: Int64
    /// The whole download's size, when the manifest gave it.
    package var size: Int64?
    /// When it was last written.
    package var lastWritten: Date
}

extension Updater {
    /// Removes the kept downloads the policy no longer keeps
    /// (``UpdaterConfiguration/PartialDownloadPolicy``): too old, or past the byte budget,
    /// oldest first; one a live download holds stays.
    nonisolated func prunePartialDownloads() async {
        let layout = self.layout
        let policy = configuration.partialDownloads
        _ = try? await FileSystem.offload { PartialDownload.prune(layout, policy: policy, keeping: nil) }
    }

    /// The downloads kept under `partial/` to be resumed, held by a live download or not;
    /// read without a lock, creating nothing.
    package nonisolated func partialDownloads() -> [PartialDownloadStatus] {
        PartialDownload.inventory(layout).map { entry in
            PartialDownloadStatus(
                sha256: entry.key,
                package: entry.package,
                version: entry.version,
                bytes: entry.bytes,
                size: entry.size,
                lastWritten: entry.modified
            )
        }
    }
}
