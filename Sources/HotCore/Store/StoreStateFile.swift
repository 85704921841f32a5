import Foundation

/// A state file a part keeps under the store root beside the snapshot, such as the manifest
/// source's trust state: read and replaced only under the store's exclusive lock, written
/// durably (temporary file, flush, rename, flush of the directory), and its interrupted
/// temporaries swept by the store with its own leftovers, and by each write of the file.
package struct StoreStateFile: Sendable {
    /// The file's name under the root.
    package let name: String
    /// The ``FaultPoint`` a write of the file reaches with its new content written to a
    /// temporary file not renamed over it yet; none for most files.
    package let faultPoint: StaticString?

    /// A state file named `name` under the root.
    package init(name: String, faultPoint: StaticString? = nil) {
        self.name = name
        self.faultPoint = faultPoint
    }

    /// The trust state of a signed manifest source (`trust.json`): the highest manifest
    /// version trusted per channel, which no later manifest may go below.
    package static let trust = StoreStateFile(name: StoreLayout.trustFileName)

    /// What the last manifest applied offered (`catalog.json`, see ``OfferedCatalog``).
    package static let catalog = StoreStateFile(name: StoreLayout.catalogFileName)

    /// A ``CheckSchedule``'s record (`check-schedule.json`), for a schedule kept under the root.
    package static let checkSchedule = StoreStateFile(name: StoreLayout.checkScheduleFileName)

    /// The bytes of the last signed manifest a manifest source accepted (`manifest.kept`),
    /// which a `304 Not Modified` answer stands for; their signatures and expiry are checked
    /// again each time they are used.
    package static let keptManifest = StoreStateFile(name: StoreLayout.keptManifestFileName)

    /// Where ``keptManifest`` came from and its validators (`manifest.kept.json`): the URL,
    /// the `ETag` and `Last-Modified` it was served with, and its SHA-256.
    package static let keptManifestValidators = StoreStateFile(name: StoreLayout.keptManifestFileName + ".json")

    /// The bytes of the last timestamp a manifest source accepted (`timestamp.kept`), which a
    /// `304 Not Modified` answer stands for; checked again each time they are used.
    package static let keptTimestamp = StoreStateFile(name: StoreLayout.keptTimestampFileName)

    /// Where ``keptTimestamp`` came from and its validators (`timestamp.kept.json`).
    package static let keptTimestampValidators = StoreStateFile(name: StoreLayout.keptTimestampFileName + ".json")

    /// The shards of the last sharded manifest a manifest source accepted (`shards.kept`),
    /// each checked against the SHA-256 its manifest names before it is used.
    package static let keptShards = StoreStateFile(name: StoreLayout.keptShardsFileName)

    /// The state files the store sweeps the temporaries of.
    static let all: [StoreStateFile] = [
        .trust, .catalog, .checkSchedule, .keptManifest, .keptManifestValidators, .keptTimestamp,
        .keptTimestampValidators, .settled, .keptShards,
    ]

    /// Replaces each file with its bytes, durably and when they differ, under one hold of the
    /// store's exclusive lock, in the order given.
    ///
    /// - Throws: `HotUpdateError.Code.fileSystem` when the lock cannot be taken or a file
    ///   written; the files before it are written.
    package static func replace(_ files: [(StoreStateFile, Data)], root: URL, wait: StoreLockWait = .standard) throws {
        try StoreLock.withExclusiveLock(root: root, wait: wait) {
            for (file, data) in files { try file.replace(root: root, with: data) }
        }
    }

    /// The file under `root`.
    package func url(root: URL) -> URL {
        root.appendingPathComponent(name, isDirectory: false)
    }

    /// The file's bytes, or nil when there is none (read without a lock: the file is only
    /// ever replaced whole).
    ///
    /// - Throws: `HotUpdateError.Code.fileSystem` when it exists and cannot be read.
    package func read(root: URL) throws -> Data? {
        let file = url(root: root)
        guard FileManager.default.fileExists(atPath: file.path) else { return nil }
        do {
            return try Data(contentsOf: file)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot read \(name)", packageID: nil)
        }
    }

    /// Runs `body` over the file's bytes (nil when there is none) under the store's exclusive
    /// lock, and writes them back durably when `body` changed them.
    ///
    /// - Returns: What `body` returned.
    /// - Throws: What `body` throws (nothing is written then), or
    ///   `HotUpdateError.Code.fileSystem` when the lock cannot be taken or the file written.
    package func update<T>(root: URL, wait: StoreLockWait = .standard, _ body: (inout Data?) throws -> T) throws -> T {
        try StoreLock.withExclusiveLock(root: root, wait: wait) {
            let before = try read(root: root)
            var data = before
            let result = try body(&data)
            if let data, data != before { try write(data, root: root) }
            return result
        }
    }

    /// ``update(root:wait:_:)`` that takes the store's lock only when `body` would change the
    /// file: `body` first runs over the bytes read without a lock (`final` false), and when it
    /// left them as they were, its result is returned and nothing is locked or written. Else it
    /// runs again under the lock (`final` true) over the bytes read there, since another process
    /// may have written in between. A check that changes nothing then leaves the root untouched,
    /// its lock file included.
    ///
    /// - Parameter body: A function of the bytes it is given; `final` tells it whether its
    ///   changes will be written (log what it changes only then).
    /// - Returns: What `body` returned last.
    /// - Throws: What `body` throws, or `HotUpdateError.Code.fileSystem` when the lock cannot be
    ///   taken or the file written.
    package func updateWhenChanged<T>(
        root: URL,
        wait: StoreLockWait = .standard,
        _ body: (inout Data?, _ final: Bool) throws -> T
    ) throws -> T {
        let before = try read(root: root)
        var data = before
        let result = try body(&data, false)
        guard data != before else { return result }
        return try update(root: root, wait: wait) { try body(&$0, true) }
    }

    /// Replaces the file with `data` durably, when it differs; the caller holds the store's
    /// exclusive lock (a store transaction).
    ///
    /// - Throws: `HotUpdateError.Code.fileSystem` when the file cannot be written.
    func replace(root: URL, with data: Data) throws {
        guard try read(root: root) != data else { return }
        try write(data, root: root)
    }

    /// Writes the file durably, first removing the temporaries of a write of it that was
    /// interrupted: a store that finds nothing to do for weeks sweeps nothing, and each write
    /// runs under the exclusive lock, so no other write of the file is under way.
    private func write(_ data: Data, root: URL) throws {
        try FileSystem.createDirectory(root)
        removeLeftovers(root: root)
        try FileSystem.replaceDurably(url(root: root), with: data, faultPoint: faultPoint)
    }

    /// Removes the temporaries an interrupted write left; under the exclusive lock.
    func removeLeftovers(root: URL) {
        let prefix = ".\(name).tmp-"
        for entry in FileSystem.contents(of: root) where entry.hasPrefix(prefix) {
            try? FileSystem.remove(root.appendingPathComponent(entry))
        }
    }
}
