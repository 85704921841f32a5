import Foundation
import Logging

/// What a garbage collection freed.
public struct GarbageReport: Sendable, Hashable {
    /// Installed versions deleted (beyond the versions kept for rollback).
    public var versionsRemoved: Int
    /// Objects unlinked because no installed tree linked them.
    public var objectsRemoved: Int
    /// The disk space those objects took.
    public var bytesFreed: Int64

    /// Creates a report.
    public init(versionsRemoved: Int, objectsRemoved: Int, bytesFreed: Int64) {
        self.versionsRemoved = versionsRemoved
        self.objectsRemoved = objectsRemoved
        self.bytesFreed = bytesFreed
    }
}

extension Updater {
    /// Makes the newest previous version of a package active again.
    ///
    /// - Parameter packageID: The package.
    /// - Throws: ``HotUpdateError/Code/notFound`` when the package has no previous version.
    public func rollback(packageID: String) async throws {
        try await serialized { _ = try await self.performRollback(packageID: packageID) { _ in true } }
    }

    /// Makes the newest previous version that `matches` active again, and the active one
    /// previous; the files are already in place, so nothing is downloaded.
    ///
    /// A kept version whose tree has lost files is not restored: the caller downloads it
    /// again (or ``repair(packageID:)`` puts it back) instead.
    func performRollback(
        packageID: String, to matches: (InstalledVersion) -> Bool
    ) async throws -> InstalledVersion {
        var next = try await open()
        guard var record = next.packages[packageID],
            let index = record.previous.firstIndex(where: matches)
        else {
            throw HotUpdateError(.notFound, "no previous version to roll back to", packageID: packageID)
        }
        let restored = record.previous.remove(at: index)
        let directory = try layout.url(forRelativePath: restored.path)
        guard FileSystem.isDirectory(directory) else {
            throw HotUpdateError(
                .notFound, "the kept version \(restored.version) is no longer on disk", packageID: packageID,
                subject: restored.path)
        }
        if let active = record.active { record.previous.insert(active, at: 0) }
        record.active = restored
        record.state = .installed
        record.lastError = nil
        record.lastErrorCode = nil
        next.packages[packageID] = record
        try await commit(next)
        hub.publish(packageID, restored.version, .installed)
        logger.info("rolled back", metadata: ["package": "\(packageID)", "version": "\(restored.version)"])
        return restored
    }

    /// Deletes a package: every version of it, its record, and the objects no other
    /// package or version links. Files it shares with other packages stay for them.
    ///
    /// Work on the package in progress is cancelled first.
    ///
    /// - Parameter packageID: The package.
    /// - Returns: The versions deleted and the objects freed.
    /// - Throws: ``HotUpdateError/Code/notFound`` when the store does not know the package;
    ///   ``HotUpdateError/Code/fileSystem`` when the store cannot be written.
    ///
    /// ```swift
    /// try await updater.remove(packageID: "filters")
    /// ```
    @discardableResult
    public func remove(packageID: String) async throws -> GarbageReport {
        await cancel(packageID: packageID)
        return try await serialized { try await self.performRemove(packageID: packageID, missingIsError: true) }
    }

    func performRemove(packageID: String, missingIsError: Bool) async throws -> GarbageReport {
        var next = try await open()
        guard let record = next.packages.removeValue(forKey: packageID) else {
            if missingIsError { throw HotUpdateError(.notFound, "not installed", packageID: packageID) }
            return GarbageReport(versionsRemoved: 0, objectsRemoved: 0, bytesFreed: 0)
        }
        try await commit(next)
        hub.publish(packageID, nil, .removed)
        let versions = ([record.active].compactMap { $0 }) + record.previous
        let freed = await deleteVersions(versions, of: packageID)
        return GarbageReport(versionsRemoved: versions.count, objectsRemoved: freed.objects, bytesFreed: freed.bytes)
    }

    /// Collects garbage: deletes versions beyond the active one and the
    /// ``UpdaterConfiguration/keepPreviousVersions`` newest previous ones, then every
    /// object no installed tree links (an object whose link count is 1), and whatever an
    /// interrupted step left.
    ///
    /// - Returns: What was freed.
    /// - Throws: ``HotUpdateError`` when the store cannot be read or written.
    ///
    /// ```swift
    /// let freed = try await updater.collectGarbage()
    /// print(freed.bytesFreed)
    /// ```
    public func collectGarbage() async throws -> GarbageReport {
        try await serialized { try await self.performCollectGarbage() }
    }

    private func performCollectGarbage() async throws -> GarbageReport {
        var next = try await open()
        let keep = configuration.keepPreviousVersions
        var dropped: [(String, [InstalledVersion])] = []
        for (id, record) in next.packages where record.previous.count > keep {
            dropped.append((id, Array(record.previous[keep...])))
            next.packages[id]?.previous = Array(record.previous.prefix(keep))
        }
        if !dropped.isEmpty { try await commit(next) }
        var freed = ObjectStore.Freed()
        for (id, versions) in dropped.sorted(by: { $0.0 < $1.0 }) {
            freed.add(await deleteVersions(versions, of: id))
        }
        let sweeper = StoreSweeper(layout: layout, logger: logger)
        let objects = self.objects
        let snapshot = next
        freed.add(
            try await FileSystem.offload {
                _ = sweeper.sweep(snapshot, includingStaging: false)
                return objects.sweep()
            })
        return GarbageReport(
            versionsRemoved: dropped.reduce(0) { $0 + $1.1.count }, objectsRemoved: freed.objects,
            bytesFreed: freed.bytes)
    }
}
