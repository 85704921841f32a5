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
        _ = try await performRollback(packageID: packageID) { _ in true }
    }

    /// Makes the newest previous version that `matches` active again, and the active one
    /// previous; the files are already in place, so nothing is downloaded.
    ///
    /// A kept version whose tree has lost files is not restored: the caller downloads it
    /// again (or ``repair(packageID:)`` puts it back) instead.
    func performRollback(
        packageID: String,
        to matches: @escaping @Sendable (InstalledVersion) -> Bool
    ) async throws -> InstalledVersion {
        let layout = self.layout
        let restored = try await ledger.transaction { next, _ in
            guard var record = next.packages[packageID],
                let index = record.previous.firstIndex(where: matches)
            else {
                throw HotUpdateError(.notFound, "no previous version to roll back to", packageID: packageID)
            }
            var restored = record.previous.remove(at: index)
            let directory = try layout.url(forRelativePath: restored.path)
            guard FileSystem.isDirectory(directory) else {
                throw HotUpdateError(
                    .notFound,
                    "the kept version \(restored.version) is no longer on disk",
                    packageID: packageID,
                    subject: restored.path
                )
            }
            // An explicit choice: installs asked for before it do not replace it.
            restored.chosenAt = Date()
            if let active = record.active { record.previous.insert(active, at: 0) }
            record.active = restored
            record.state = .installed
            record.lastError = nil
            record.lastErrorCode = nil
            next.packages[packageID] = record
            return restored
        }
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
        return try await performRemove(packageID: packageID, missingIsError: true)
    }

    func performRemove(packageID: String, missingIsError: Bool) async throws -> GarbageReport {
        let report = try await ledger.transaction { next, transaction in
            guard let record = next.packages.removeValue(forKey: packageID) else {
                if missingIsError { throw HotUpdateError(.notFound, "not installed", packageID: packageID) }
                return FreedBox?.none
            }
            let versions = Self.versions(of: record)
            let freed = FreedBox()
            transaction.afterCommit {
                freed.add(await self.deleteVersions(versions, of: packageID), versions: versions.count)
            }
            return FreedBox?.some(freed)
        }
        guard let report else { return GarbageReport(versionsRemoved: 0, objectsRemoved: 0, bytesFreed: 0) }
        hub.publish(packageID, nil, .removed)
        return report.report()
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
        let keep = configuration.keepPreviousVersions
        let layout = self.layout
        let logger = self.logger
        let objects = self.objects
        return try await ledger.transaction { next, transaction in
            var dropped: [(String, [InstalledVersion])] = []
            for (id, record) in next.packages where record.previous.count > keep {
                next.packages[id]?.previous = Array(record.previous.prefix(keep))
                // A launch trial's fallback stays whatever the count kept.
                let kept = Set(next.packages[id].map(\.keptVersions)?.map(\.path) ?? [])
                dropped.append((id, record.previous[keep...].filter { !kept.contains($0.path) }))
            }
            let snapshot = next
            let freed = FreedBox()
            let droppedVersions = dropped
            transaction.afterCommit {
                for (id, versions) in droppedVersions.sorted(by: { $0.0 < $1.0 }) {
                    freed.add(await self.deleteVersions(versions, of: id), versions: versions.count)
                }
                let swept = try? await FileSystem.offload {
                    _ = StoreSweeper(layout: layout, logger: logger).sweep(snapshot)
                    return objects.sweep()
                }
                if let swept { freed.add(swept) }
            }
            return freed
        }.report()
    }
}

/// What deletions inside a transaction freed, read after it.
final class FreedBox: @unchecked Sendable {
    private let lock = NSLock()
    private var freed = ObjectStore.Freed()
    private var versions = 0

    func add(_ more: ObjectStore.Freed, versions: Int = 0) {
        lock.withLock {
            freed.add(more)
            self.versions += versions
        }
    }

    func report() -> GarbageReport {
        lock.withLock {
            GarbageReport(versionsRemoved: versions, objectsRemoved: freed.objects, bytesFreed: freed.bytes)
        }
    }
}
