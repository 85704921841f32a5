import Foundation
import Logging

/// The store's checks of installed files, its repairs from `objects/`, and what a sync leaves
/// to it after the downloads: which packages the objects heal, which must be downloaded again,
/// and the store's own files put back. The store decides; the updater only fetches what it
/// is told to and publishes the changes.
extension Store {
    /// What a check of a package's active version found, and the state change it recorded.
    struct Check: Sendable {
        /// What was found.
        var health: PackageHealth
        /// The state recorded, to publish; nil when the stored state did not change (or the
        /// check recorded nothing).
        var change: UpdateEvent.StateChange?
    }

    /// What a repair from `objects/` did, and what only a download can put back.
    struct LocalRepair: Sendable {
        /// The check before the repair.
        var before: PackageHealth
        /// What the objects put back, and what they could not.
        var restore = ObjectRestore()
        /// The check after the repair; nil when files remain that only a download puts back.
        var after: PackageHealth?
        /// The states recorded on the way, in order.
        var changes: [UpdateEvent.StateChange] = []

        /// The version to download again: files remain whose objects are gone or damaged.
        var refetch: InstalledVersion? { restore.remaining.isEmpty ? nil : restore.version }
    }

    /// Checks the active version of `id` against its file list (presence and sizes, or
    /// hashes; a version marked ``InstalledVersion/damageSeen`` always by hash), and records
    /// the state found when `recording` (see ``recordHealth(_:path:reason:)``).
    ///
    /// - Throws: ``HotUpdateError/Code/notFound`` when the package has no active version;
    ///   ``HotUpdateError/Code/storeCorrupt`` when its file list cannot be read.
    func check(_ id: String, depth: PackageHealth.Depth, recording: Bool) async throws -> Check {
        guard let active = try await read().packages[id]?.active else {
            throw HotUpdateError(.notFound, "no active version to verify", packageID: id)
        }
        let list = try await fileList(forVersionPath: active.path).files
        let root = try directory(of: active)
        let verifier = self.verifier
        // Damage was seen in content this version shares: sizes prove nothing, hashes do.
        let depth = active.damageSeen == true ? PackageHealth.Depth.full : depth
        let rootPath = layout.root.path
        let (missing, damaged, outside) = try await FileSystem.offload {
            // A tree reached through a link is not looked into: every file counts as missing.
            if case .foreign(let component) = ContainedDirectory.check(active.path, under: rootPath) {
                return (list.map(\.path), [String](), Optional(component))
            }
            let (missing, damaged) = PackageHealth.examine(list, under: root, depth: depth, verifier: verifier)
            return (missing, damaged, nil)
        }
        let health = PackageHealth(
            id: id,
            version: active.version,
            depth: depth,
            filesChecked: outside == nil ? list.count : 0,
            missing: missing,
            damaged: damaged,
            outsideStore: outside
        )
        setChecked(active.path, health.isHealthy)
        guard recording else { return Check(health: health) }
        let reason = Self.reason(for: health)
        guard try await recordHealth(health, path: active.path, reason: reason) else { return Check(health: health) }
        return Check(
            health: health,
            change: UpdateEvent.StateChange(id: id, version: health.version, state: health.state, error: reason)
        )
    }

    /// Checks `id` and puts back every missing or damaged file whose object is intact,
    /// recording the states found; what remains needs a download (``LocalRepair/refetch``).
    ///
    /// - Throws: As ``check(_:depth:recording:)``; ``HotUpdateError`` when the store cannot be
    ///   written.
    func repairLocally(_ id: String, depth: PackageHealth.Depth) async throws -> LocalRepair {
        let before = try await check(id, depth: depth, recording: true)
        var repair = LocalRepair(before: before.health, changes: [before.change].compactMap { $0 })
        guard !before.health.isHealthy else {
            repair.after = before.health
            return repair
        }
        repair.restore = try await restoreFromObjects(
            id,
            version: before.health.version,
            paths: before.health.missing + before.health.damaged
        )
        guard repair.refetch == nil else { return repair }
        let after = try await check(id, depth: depth, recording: true)
        repair.after = after.health
        if let change = after.change { repair.changes.append(change) }
        return repair
    }

    /// Why a check that found damage records it.
    private static func reason(for health: PackageHealth) -> HotUpdateError? {
        guard !health.isHealthy else { return nil }
        if let component = health.outsideStore {
            return HotUpdateError(
                .treeOutsideStore,
                "\(component) is not a directory inside the store (a symbolic link or another file): nothing is read through it",
                packageID: health.id
            )
        }
        return health.state == .fileMissing
            ? HotUpdateError(
                .notFound,
                "\(health.missing.count) installed file(s) missing, first \(health.missing[0])",
                packageID: health.id
            )
            : HotUpdateError(
                .digestMismatch,
                "\(health.damaged.count) installed file(s) damaged, first \(health.damaged[0])",
                packageID: health.id
            )
    }
}
