import Foundation
import Logging

/// What a sync asks of the store once its downloads are done: one call that decides
/// everything about the disk (see ``Store/reconcile(unchanged:written:quickCheckInterval:partialDownloads:)``).
struct Reconciliation: Sendable {
    /// What became of one package whose active version had lost files.
    enum Heal: Sendable {
        /// Made whole from `objects/`: `restored` files linked back.
        case healed(version: String, restored: Int)
        /// Only a download puts it back: the version to fetch again, and the content found
        /// damaged that other kept trees may share (linked to the good objects after the
        /// download). `listed` is false when the version's file list itself is gone.
        case refetch(InstalledVersion, digests: Set<String>, listed: Bool)
        /// Cannot be healed now; the next sync tries again.
        case failed(version: String, HotUpdateError)
    }

    /// The packages that had lost files, in the order asked.
    var heals: [(id: String, heal: Heal)] = []
    /// The states recorded, to publish, in order.
    var changes: [UpdateEvent.StateChange] = []
}

extension Store {
    /// Everything about the disk after a sync's downloads, in one call:
    ///
    /// - each package of `unchanged` whose active version lost its tree (one `stat`), its
    ///   file list, or files a check recorded or a reader reported (`losses/`), is made whole
    ///   from `objects/` where the objects are intact, or named for a download;
    /// - once per `quickCheckInterval`, every file of every package of `unchanged` is checked
    ///   for presence and size, and objects deleted one by one are put back from the trees
    ///   (but those of `written`, the trees this sync just adopted);
    /// - `objects/` deleted whole is put back from the trees, and what the commit hooks keep
    ///   for the snapshot (the name index) written again when it is gone;
    /// - the partial downloads `partialDownloads` no longer keeps are removed.
    ///
    /// Nothing here throws: a failure is logged or reported per package, and the next sync
    /// tries again.
    ///
    /// - Returns: The heals, and the states recorded on the way.
    func reconcile(
        unchanged: [String],
        written: Set<String>,
        quickCheckInterval: TimeInterval?,
        partialDownloads: UpdaterConfiguration.PartialDownloadPolicy
    ) async -> Reconciliation {
        var result = Reconciliation()
        // Heal what is current but lost its files: one stat per package.
        for id in unchanged {
            if let heal = await healIfLost(id, changes: &result.changes) { result.heals.append((id, heal)) }
        }
        // Partial losses, found without being asked: every file's presence and size, at most
        // once per interval, after the sync's own work.
        if let quickCheckInterval, LossMarker.quickCheckDue(interval: quickCheckInterval, layout: layout) {
            let healed = Set(result.heals.map(\.id))
            for id in unchanged where !healed.contains(id) {
                guard let checked = try? await check(id, depth: .quick, recording: true) else { continue }
                if let change = checked.change { result.changes.append(change) }
                guard !checked.health.isHealthy else { continue }
                if let heal = await healIfLost(id, changes: &result.changes) { result.heals.append((id, heal)) }
            }
            // Objects deleted one by one: a `stat` per file, and only the lost ones hashed. The
            // trees this sync wrote were just adopted: their 3,000 `stat`s cost an install 30 ms.
            do {
                let restored = try await restoreLostObjects(skipping: written)
                if restored > 0 {
                    logger.warning("objects were gone: put back from the trees", metadata: ["objects": "\(restored)"])
                }
            } catch {
                logger.warning("cannot put back lost objects: \(error)")
            }
            LossMarker.quickCheckDone(layout: layout)
        }
        await restoreStoreFiles()
        let layout = self.layout
        _ = try? await FileSystem.offload { PartialDownload.prune(layout, policy: partialDownloads, keeping: nil) }
        return result
    }

    /// What to do for `id` when its active version lost files: nothing lost (one `stat` when
    /// no check recorded damage and no reader reported a loss), healed from the objects, or a
    /// download. A reader's marker is cleared once the files were checked.
    private func healIfLost(_ id: String, changes: inout [UpdateEvent.StateChange]) async -> Reconciliation.Heal? {
        guard let record = cachedRecord(id), let active = record.active, record.state != .disabled else {
            return nil
        }
        let recorded = record.state.isDamage
        // A reader that found one of its files gone left a marker: every file is checked.
        let reported = LossMarker.isRecorded(id, layout: layout)
        // Without its file list, a version cannot be checked or put together from the objects:
        // it is downloaded again, which writes the list anew.
        let listed = fileListExists(active)
        guard recorded || reported || !listed || !treeExists(active) else { return nil }
        defer { if reported { LossMarker.clear(id, layout: layout) } }
        logger.warning(
            listed
                ? "the active version's files are gone or damaged: healing"
                : "the active version's file list is gone: healing",
            metadata: ["package": "\(id)", "version": "\(active.version)"]
        )
        guard listed else { return .refetch(active, digests: [], listed: false) }
        do {
            let repair = try await repairLocally(id, depth: .quick)
            changes += repair.changes
            if let version = repair.refetch {
                return .refetch(version, digests: repair.restore.remainingDigests, listed: true)
            }
            guard let after = repair.after, after.isHealthy else {
                return .failed(
                    version: active.version,
                    HotUpdateError(
                        .notFound,
                        "the files of version \(active.version) could not be put back",
                        packageID: id
                    )
                )
            }
            // Every file was there after all.
            if reported, !recorded, repair.restore.restored.isEmpty { return nil }
            return .healed(version: after.version, restored: repair.restore.restored.count)
        } catch {
            return .failed(
                version: active.version,
                HotUpdateError.wrap(error, as: .fileSystem, "cannot heal", packageID: id)
            )
        }
    }

    /// Puts back what was deleted from under the store besides the trees: the objects, when
    /// `objects/` is gone (one `stat`), from the trees that still hold them, each file hashed;
    /// and what the commit hooks keep for the snapshot (the name index: one `stat` per hook).
    /// Failures are logged: the packages serve without them, and the next sync tries again.
    private func restoreStoreFiles() async {
        if objectsDirectoryIsGone {
            do {
                let restored = try await restoreLostObjects()
                logger.warning("the objects were gone: put back from the trees", metadata: ["objects": "\(restored)"])
            } catch {
                logger.warning("the objects were gone and cannot be put back: \(error)")
            }
        }
        do {
            _ = try await restoreHookOutputs()
        } catch {
            logger.warning("cannot write again what the store keeps for its snapshot: \(error)")
        }
    }
}
