import Foundation
import Logging

/// The store's changes besides installs and launches: each one transaction with a typed result.
extension Store {
    /// Plans `manifest` against the snapshot current now and records what the plan found: a
    /// package to add is ``PackageState/new``, one to update ``PackageState/updateAvailable``,
    /// and an unchanged one whose last attempt failed (or was interrupted) is installed
    /// again; the manifest's order of packages is kept for activating script patches.
    ///
    /// A manifest that changes nothing the store records (the same catalog, order and states),
    /// with no retained tree to delete and nothing an interrupted step left to sweep (see
    /// ``nothingToSweep()``), takes no exclusive lock and writes nothing: the check an app runs
    /// at every launch leaves the root as it was, and the generation stays.
    ///
    /// - Returns: The plan, and the states that changed.
    func recordPlan(_ manifest: Manifest) async throws -> (UpdatePlan, [RecordedState]) {
        let catalog = try OfferedCatalog(manifest).encoded()
        let digest = try OfferedCatalog.digest(of: catalog, verifier: verifier)
        let order = manifest.packages.map(\.id)
        let current = try await read()
        let plan = UpdatePlan.make(manifest: manifest, snapshot: current)
        if current.catalogSHA256 == digest, current.manifestOrder == order, current.retained == nil,
            Self.states(plan, current).isEmpty, nothingToSweep()
        {
            let root = layout.root
            let kept = try? await FileSystem.offload { try StoreStateFile.catalog.read(root: root) }
            if kept == catalog { return (plan, []) }
        }
        return try await transaction { transaction in
            // What the manifest offers, for installs on demand (see `OfferedCatalog`), and its
            // digest in the same commit.
            try StoreStateFile.catalog.replace(root: transaction.layout.root, with: catalog)
            transaction.setCatalogDigest(digest)
            let plan = UpdatePlan.make(manifest: manifest, snapshot: transaction.snapshot)
            let changes = Self.states(plan, transaction.snapshot)
            for change in changes {
                transaction.update(change.id, creatingAs: change.state) { record in
                    if change.state == .installed { record.markInstalled() } else { record.state = change.state }
                }
            }
            transaction.setManifestOrder(order)
            return (plan, changes)
        }.value
    }

    /// The states `plan` records over `snapshot`: ``PackageState/new`` for a package to add,
    /// ``PackageState/updateAvailable`` for one to update, ``PackageState/installed`` again
    /// for an unchanged one whose last attempt failed or was interrupted; none where the
    /// state is already that.
    private static func states(_ plan: UpdatePlan, _ snapshot: StoreSnapshot) -> [RecordedState] {
        plan.packages.compactMap { entry in
            let record = snapshot.packages[entry.id]
            let state: PackageState
            switch entry.change {
            case .add: state = .new
            case .update: state = .updateAvailable
            case .unchanged:
                guard let record, [.failed, .new, .updateAvailable].contains(record.state), !record.activationFailed
                else { return nil }
                state = .installed
            default: return nil
            }
            guard record == nil || record?.state != state else { return nil }
            return RecordedState(id: entry.id, version: entry.offered?.version, state: state)
        }
    }

    /// A package state a transaction recorded.
    struct RecordedState: Sendable, Equatable {
        /// The package id.
        var id: String
        /// The version concerned: the one offered, or the active one.
        var version: String?
        /// The state recorded.
        var state: PackageState
    }

    /// What ``setEnabled(_:)`` did to one package.
    struct Enablement: Sendable, Equatable {
        /// The package id.
        var id: String
        /// Whether the package is enabled now.
        var enabled: Bool
        /// The active version, nil when the store knows no installed version of the package.
        var activeVersion: String?
    }

    /// Disables or enables packages: the installed files stay where they are, only each
    /// package's state changes. A package the store knows nothing of is left alone.
    ///
    /// - Parameter changes: Each package id with whether it is to be enabled, in order.
    /// - Returns: One result per change, in the same order.
    func setEnabled(_ changes: [(id: String, enabled: Bool)]) async throws -> [Enablement] {
        let logger = self.logger
        return try await transaction { transaction in
            changes.map { change in
                let active = transaction.updateExisting(change.id) { record in
                    record.setEnabled(change.enabled)
                    return record.active?.version
                }
                if let active {
                    logger.info(
                        change.enabled ? "enabled" : "disabled",
                        metadata: ["package": "\(change.id)", "version": "\(active ?? "-")"]
                    )
                }
                return Enablement(id: change.id, enabled: change.enabled, activeVersion: active ?? nil)
            }
        }.value
    }

    /// Records that `id` failed with `error`; the active version, if any, stays.
    func recordFailure(_ id: String, _ error: HotUpdateError) async throws {
        _ = try await transaction { transaction in
            transaction.update(id, creatingAs: .failed) { $0.markFailed(error) }
        }
    }

    /// Makes the newest previous version of `id` that `matches` active again, and the active
    /// one previous. A kept version whose tree has lost its directory is not restored.
    ///
    /// The kept tree is checked first (see ``checkKept(_:of:)``): sizes of every file against
    /// its file list, hashes too when damage was ever seen in what it shares. A file that
    /// fails is put back from its object when that is intact. A tree that stays damaged is
    /// never served: the record lets it go (it is deleted after the commit), the versions
    /// that share its damaged objects are marked ``InstalledVersion/damageSeen``, and the
    /// result says to download it again.
    ///
    /// - Throws: ``HotUpdateError/Code/notFound`` when no previous version matches or its tree is gone.
    func rollback(
        _ id: String,
        to matches: @escaping @Sendable (InstalledVersion) -> Bool
    ) async throws
        -> Restore
    {
        let outcome = try await transaction { transaction -> Restore in
            guard let candidate = transaction[id]?.previous.first(where: matches) else {
                throw HotUpdateError(.notFound, "no previous version to roll back to", packageID: id)
            }
            guard self.treeExists(candidate) else {
                throw HotUpdateError(
                    .notFound,
                    "the kept version \(candidate.version) is no longer on disk",
                    packageID: id,
                    subject: candidate.path
                )
            }
            if let failed = try await self.checkKept(candidate, of: id) {
                transaction.updateExisting(id) { _ = $0.dropPrevious(path: candidate.path) }
                await self.markDamageSeen(naming: failed.damagedObjects, in: &transaction)
                return .damaged(candidate, reason: failed.reason, digests: failed.digests)
            }
            let now = Date()
            let generation = transaction.committingGeneration
            guard
                let restored = transaction.updateExisting(
                    id,
                    { $0.restorePrevious(at: now, generation: generation, where: matches) }
                ) ?? nil
            else { throw HotUpdateError(.notFound, "no previous version to roll back to", packageID: id) }
            return .restored(restored)
        }.value
        switch outcome {
        case .restored(let restored):
            logger.info("rolled back", metadata: ["package": "\(id)", "version": "\(restored.version)"])
        case .damaged(let kept, let reason, _):
            logger.warning(
                "the kept version is damaged and was deleted; it is downloaded again: \(reason)",
                metadata: ["package": "\(id)", "version": "\(kept.version)"]
            )
        }
        return outcome
    }

    /// Deletes a package: its record, every version of it, the objects no other package or
    /// version links, and its partial downloads no live download holds.
    ///
    /// - Returns: What was freed, or nil when the store knows nothing of the package.
    func remove(_ id: String) async throws -> GarbageReport? {
        let committed = try await transaction { transaction in transaction.removeRecord(id) != nil }
        let partials = await removePartialDownloads { $0.package == id }
        guard committed.value || partials.count > 0 else { return nil }
        var report = committed.garbage
        report.partialDownloadsRemoved = partials.count
        report.partialBytesFreed = partials.allocatedBytes
        return report
    }

    /// Deletes versions beyond the active one and the `keep` newest previous ones, then
    /// every object no installed tree links, whatever an interrupted step left, and every
    /// partial download no live download holds.
    func collectGarbage(keep: Int) async throws -> GarbageReport {
        var report = try await transaction { transaction in
            for id in transaction.records.keys.sorted() { transaction.updateExisting(id) { $0.keepPrevious(keep) } }
            transaction.sweepAfterCommit()
        }.garbage
        let partials = await removePartialDownloads { _ in true }
        report.partialDownloadsRemoved = partials.count
        report.partialBytesFreed = partials.allocatedBytes
        return report
    }

    /// Removes the partial downloads `matches` picks that no live download holds.
    private nonisolated func removePartialDownloads(
        where matches: @escaping @Sendable (PartialDownload.Entry) -> Bool
    ) async -> PartialDownload.Removed {
        let layout = self.layout
        let removed =
            (try? await FileSystem.offload { PartialDownload.remove(layout, where: matches) })
            ?? PartialDownload.Removed()
        if removed.count > 0 {
            logger.info(
                "removed partial downloads",
                metadata: ["count": "\(removed.count)", "bytes": "\(removed.allocatedBytes)"]
            )
        }
        return removed
    }

    /// Records the state a check of the active version at `path` found, when it differs from
    /// the stored one: damaged, or whole again after damage. Damage found in a file whose
    /// object may be damaged with it (see ``ObjectStore/mayBeDamaged(_:linkedAt:)``) marks
    /// every kept version sharing that content ``InstalledVersion/damageSeen``.
    ///
    /// - Returns: Whether the state changed.
    func recordHealth(_ health: PackageHealth, path: String, reason: HotUpdateError?) async throws -> Bool {
        // Nothing to record (the usual case at launch): no store step.
        if let stored = cachedRecord(health.id), stored.active?.path == path {
            let wasDamaged = stored.state.isDamage
            if stored.state == health.state || (health.isHealthy && !wasDamaged) { return false }
        }
        let objects = self.objects
        return try await transaction { transaction in
            let changed =
                transaction.updateExisting(health.id) { record in
                    guard record.active?.path == path else { return false }
                    let wasDamaged = record.state.isDamage
                    guard record.state != health.state, !health.isHealthy || wasDamaged else { return false }
                    record.markChecked(health.state, reason: reason)
                    return true
                } ?? false
            if changed, !health.damaged.isEmpty, let active = transaction[health.id]?.active,
                let files = try? await self.fileList(forVersionPath: path).byPath,
                let root = try? self.directory(of: active)
            {
                let base = root.path.hasSuffix("/") ? root.path : root.path + "/"
                let suspects = try await FileSystem.offload {
                    Set(
                        health.damaged.compactMap { files[$0] }.filter {
                            objects.mayBeDamaged($0, linkedAt: base + $0.path)
                        }
                        .map(\.sha256)
                    )
                }
                await self.markDamageSeen(naming: suspects, in: &transaction)
            }
            return changed
        }.value
    }

    /// Links intact objects back in place of missing or damaged files of the active version
    /// of `id`, when `version` is still the active one. An object found damaged loses its
    /// name (the download that follows makes a fresh one; see
    /// ``ObjectStore/intactObjectDiscardingDamaged(for:verifier:)``), and every version kept
    /// with its content is marked ``InstalledVersion/damageSeen``.
    ///
    /// - Returns: The paths restored, those whose object is gone or damaged with their
    ///   digests, and the version repaired (nil when another version became active since the check).
    func restoreFromObjects(
        _ id: String,
        version: String,
        paths: [String]
    ) async throws
        -> ObjectRestore
    {
        let objects = self.objects
        let verifier = self.verifier
        let storeRoot = layout.root.path
        let logger = self.logger
        return try await transaction { transaction in
            guard let active = transaction[id]?.active, active.version == version else { return ObjectRestore() }
            let files = try await self.fileList(forVersionPath: active.path).byPath
            let root = try self.directory(of: active)
            let (found, damaged) = try await FileSystem.offload {
                var result = ObjectRestore()
                var damaged: Set<String> = []
                var made: Set<String> = []
                for path in paths {
                    // Every directory on the way is made real first: a link in place of one is
                    // removed (never followed), so nothing is written out of the store, and a
                    // download that follows finds the place free.
                    let folder = path.split(separator: "/").dropLast().joined(separator: "/")
                    let directory = folder.isEmpty ? active.path : active.path + "/" + folder
                    if made.insert(directory).inserted {
                        let removed = try ContainedDirectory.make(directory, under: storeRoot)
                        if !removed.isEmpty {
                            logger.warning(
                                "removed links in place of directories of an installed tree",
                                metadata: ["package": "\(id)", "removed": "\(removed)"]
                            )
                        }
                    }
                    guard let file = files[path] else {
                        result.remaining.append(path)
                        continue
                    }
                    let (object, discarded) = try objects.intactObjectDiscardingDamaged(for: file, verifier: verifier)
                    if discarded { damaged.insert(file.sha256) }
                    guard let object else {
                        result.remaining.append(path)
                        result.remainingDigests.insert(file.sha256)
                        continue
                    }
                    let target = root.appendingPathComponent(path, isDirectory: false)
                    if FileSystem.isDirectory(target) { try FileSystem.remove(target) }
                    try objects.linkObject(object, to: target)
                    result.restored.append(path)
                }
                return (result, damaged)
            }
            await self.markDamageSeen(naming: damaged, in: &transaction)
            var result = found
            result.version = transaction[id]?.active
            return result
        }.value
    }

    /// Records a patch activation: a failure as ``PackageState/failed``, a success after a
    /// failure as ``PackageState/installed``.
    ///
    /// - Returns: Whether the state changed.
    func recordActivation(_ result: ScriptPatch.Activation) async throws -> Bool {
        try await transaction { transaction in
            transaction.updateExisting(result.id) { record in
                guard record.active?.version == result.version else { return false }
                let state: PackageState = result.succeeded ? .installed : .failed
                guard record.state != state || (!result.succeeded && record.lastError != result.error?.description),
                    result.succeeded ? record.state == .failed : true
                else { return false }
                if let error = result.error { record.markFailed(error) } else { record.markInstalled() }
                return true
            } ?? false
        }.value
    }

    // MARK: - Launches

    /// What one launch transaction decided.
    struct LaunchChanges: Sendable {
        var trials: [String: String] = [:]
        var rolledBack: [LaunchSession.RolledBackVersion] = []
        var activated: [(id: String, version: String)] = []
        /// Packages this launch runs in another version than the active one, because another
        /// live launch tries that one (``LaunchPolicy/ConcurrentLaunch/confirmedVersion``):
        /// the version to load, nil for the bundle.
        var substitutes: [String: InstalledVersion?] = [:]
        /// The launch's owner, holding the trees it runs from.
        var owner: LaunchOwner?
    }

    /// Begins a launch (or a resume) in one transaction: trials whose launches all died
    /// unconfirmed (or timed out) roll back and block their versions (not on a resume),
    /// waiting versions become active per their timing, and guarded untried versions go on
    /// trial for `token`. A trial another live launch runs is left alone: this launch joins
    /// it or runs the confirmed version, per ``LaunchPolicy/concurrentLaunch``. The launch's
    /// owner file, naming the trees it runs from, is written in the same transaction.
    ///
    /// A begin (not a resume) ends this store's earlier launches first: a process begins
    /// once per launch of the app.
    ///
    /// Another process's hold on the store lock is waited for at most
    /// ``LaunchPolicy/lockDeadline``: past it, ``HotUpdateError/Code/storeBusy`` is thrown and
    /// nothing is changed.
    func beginLaunch(
        resuming: Bool,
        token: String,
        policy: LaunchPolicy,
        keep: Int,
        at now: Date
    ) async throws
        -> LaunchChanges
    {
        if !resuming { endLaunches() }
        let own = Set(launchOwners.withLock { $0.keys })
        let layout = self.layout
        let changes = try await transaction(otherProcesses: policy.lockDeadline) { transaction in
            var changes = LaunchChanges()
            let others = LaunchOwner.live(in: layout).tokens.subtracting(own)
            let generation = transaction.committingGeneration
            var runs: [String] = []
            for id in transaction.records.keys.sorted() {
                transaction.updateExisting(id) { record in
                    if record.hasLiveTrial(live: others, timeout: policy.trialTimeout, at: now) {
                        // Another launch is trying the active version: its trial, and a version
                        // waiting behind it, stay as they are.
                        if policy.concurrentLaunch == .confirmedVersion {
                            changes.substitutes[id] = .some(record.confirmedVersion)
                        } else if let trial = record.joinTrial(token: token) {
                            changes.trials[id] = trial.version
                        }
                        return
                    }
                    if !resuming,
                        let rolled = record.rollBackFailedTrial(policy: policy, at: now, generation: generation)
                    {
                        changes.rolledBack.append(rolled)
                    }
                    if !resuming || policy.timing(for: id) == .nextResume,
                        let waiting = record.activatePending(guarded: policy.isGuarded(id), keep: keep)
                    {
                        changes.activated.append((id, waiting.version))
                    }
                    if policy.isGuarded(id), let trial = record.startTrial(token: token, at: now) {
                        changes.trials[id] = trial.version
                    }
                }
                // What the app loads at launch and keeps running from: not the packages whose
                // new versions take effect at once (their assets resolve from the newest).
                guard policy.timing(for: id) != .immediate, let record = transaction[id], record.state != .disabled
                else { continue }
                if let running = changes.substitutes[id] ?? record.active { runs.append(running.path) }
            }
            changes.owner = try LaunchOwner.create(token: token, runs: runs, layout: layout)
            return changes
        }.value
        if let owner = changes.owner { launchOwners.withLock { $0[token] = owner } }
        return changes
    }

    /// Ends this store's launches: their trials count as ended for the next launch (which
    /// rolls back what they never confirmed), and the trees they ran from are no longer held.
    package nonisolated func endLaunches() {
        let ended = launchOwners.withLock { owners in
            defer { owners = [:] }
            return Array(owners.values)
        }
        for owner in ended { owner.release() }
    }

    /// Confirms the trials of the launch of `token` that have not timed out. The time a trial
    /// ran is measured by a monotonic clock when this process began the launch, so a wall
    /// clock set forward meanwhile does not time it out.
    ///
    /// - Returns: The packages confirmed, with their active versions.
    func confirmLaunch(
        _ token: String,
        timeout: TimeInterval?,
        at now: Date
    ) async throws
        -> [(id: String, version: String?)]
    {
        let elapsed = launchOwners.withLock { $0[token]?.secondsSinceBegan }
        return try await transaction { transaction in
            transaction.records.keys.sorted().compactMap { id in
                transaction.updateExisting(id) { record in
                    record.confirmTrial(token: token, timeout: timeout, elapsed: elapsed, at: now)
                        ? (id, record.active?.version) : nil
                } ?? nil
            }
        }.value
    }

    /// Lets a blocked version of `id` be downloaded again.
    ///
    /// - Throws: ``HotUpdateError/Code/notFound`` when that version is not blocked.
    func unblock(_ id: String, version: String) async throws {
        _ = try await transaction { transaction in
            guard transaction.updateExisting(id, { $0.unblock(version) }) == true else {
                throw HotUpdateError(.notFound, "version \(version) is not blocked", packageID: id)
            }
        }
    }
}
