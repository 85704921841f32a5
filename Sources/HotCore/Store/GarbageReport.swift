/// What the store freed: by a garbage collection, a package's removal or an eviction.
///
/// The store's own result, which ``Updater/collectGarbage()``, ``Updater/remove(packageID:)``
/// and ``EvictionReport`` hand on as it is.
public struct GarbageReport: Sendable, Hashable {
    /// Installed versions deleted (beyond the versions kept for rollback).
    public var versionsRemoved: Int
    /// Objects unlinked because no installed tree linked them.
    public var objectsRemoved: Int
    /// The disk space those objects took.
    public var bytesFreed: Int64
    /// Partial downloads removed: downloads a cut transfer kept under `partial/` to be
    /// resumed (see ``UpdaterConfiguration/PartialDownloadPolicy``). One a live download is
    /// writing is never removed.
    public var partialDownloadsRemoved: Int
    /// The disk space those partial downloads took.
    public var partialBytesFreed: Int64

    /// Creates a report.
    public init(
        versionsRemoved: Int,
        objectsRemoved: Int,
        bytesFreed: Int64,
        partialDownloadsRemoved: Int = 0,
        partialBytesFreed: Int64 = 0
    ) {
        self.versionsRemoved = versionsRemoved
        self.objectsRemoved = objectsRemoved
        self.bytesFreed = bytesFreed
        self.partialDownloadsRemoved = partialDownloadsRemoved
        self.partialBytesFreed = partialBytesFreed
    }
}
