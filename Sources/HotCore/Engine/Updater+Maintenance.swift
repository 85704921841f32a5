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
        _ = try await rollback(packageID) { _ in true }
    }

    /// Makes the newest previous version that `matches` active again (see
    /// ``Store/rollback(_:to:)``) and publishes it.
    func rollback(
        _ id: String,
        to matches: @escaping @Sendable (InstalledVersion) -> Bool
    ) async throws
        -> InstalledVersion
    {
        let restored = try await store.rollback(id, to: matches)
        hub.publish(id, restored.version, .installed)
        logger.info("rolled back", metadata: ["package": "\(id)", "version": "\(restored.version)"])
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
        guard let report = try await store.remove(packageID) else {
            throw HotUpdateError(.notFound, "not installed", packageID: packageID)
        }
        hub.publish(packageID, nil, .removed)
        return report
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
        try await store.collectGarbage(keep: configuration.keepPreviousVersions)
    }
}
