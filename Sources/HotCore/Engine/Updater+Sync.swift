import Foundation
import Logging

extension Updater {
    /// Fetches the manifest from `source` and brings the store up to date with it.
    ///
    /// Each package to download joins its flight (see ``install(_:)``): a package an app is
    /// already installing is not fetched twice. Package failures do not throw: they are in
    /// the report (see ``SyncReport/throwIfFailed()``), recorded as ``PackageState/failed``,
    /// and leave the previous version active.
    ///
    /// When the last sync left nothing to do (no failure, nothing waiting) for a manifest of a
    /// ``RevisionedManifestSource``, and nothing happened to the store since (no commit, no
    /// reported loss, no quick check due), the source is asked only whether the manifest is
    /// still that one: if so the sync ends there, and the report says so
    /// (``SyncReport/isUnchanged``), listing each package as that sync left it.
    ///
    /// - Parameter source: Where the manifest comes from.
    /// - Returns: One outcome per planned package.
    /// - Throws: ``HotUpdateError`` when the manifest cannot be fetched or read, or the
    ///   store cannot be opened.
    ///
    /// ```swift
    /// let report = try await updater.sync(from: StaticManifestSource(url: manifestURL, transport: transport))
    /// try report.throwIfFailed()
    /// ```
    public func sync(from source: any ManifestSource) async throws -> SyncReport {
        let clock = ContinuousClock()
        let start = clock.now
        let settled =
            source is any RevisionedManifestSource
            ? await store.settledSync(quickCheckInterval: configuration.quickCheckInterval) : nil
        let fetched: Manifest?
        do {
            if let revisioned = source as? any RevisionedManifestSource, let settled {
                fetched = try await revisioned.fetchManifest(unlessRevision: settled.header.revision)
            } else {
                fetched = try await source.fetchManifest()
            }
        } catch {
            let hot = HotUpdateError.wrap(error, as: .manifestInvalid, "cannot fetch the manifest")
            report(TelemetryEvent(kind: .check, errorCode: hot.code.description))
            throw hot
        }
        let seconds = (clock.now - start).timeInterval
        guard let manifest = fetched else {
            // The manifest the store settled on, and nothing happened since: nothing to do.
            report(TelemetryEvent(kind: .check, manifestVersion: settled?.header.manifestVersion))
            var result = SyncReport(manifestVersion: settled?.header.manifestVersion, packages: settled?.packages ?? [])
            (result.isUnchanged, result.manifestSeconds) = (true, seconds)
            return result
        }
        report(TelemetryEvent(kind: .check, manifestVersion: manifest.version))
        if let refused = manifest.refusedRollout {
            logger.warning(
                "the rollout step served with the manifest was refused: the release manifest applies alone",
                metadata: ["code": "\(refused.code)", "reason": "\(refused.message)"]
            )
            report(
                TelemetryEvent(
                    kind: .rolloutRefused,
                    manifestVersion: manifest.version,
                    errorCode: refused.code.description
                )
            )
        }
        var result = try await apply(manifest)
        result.manifestSeconds = seconds
        result.refusedRollout = manifest.refusedRollout
        // A refused step is not settled on: each sync reads the manifest again and reports the
        // refusal for as long as the step is served.
        if let revision = manifest.revision, manifest.refusedRollout == nil, result.failures.isEmpty,
            result.waiting.isEmpty
        {
            await store.recordSettled(revision: revision, manifestVersion: manifest.version, outcomes: result.packages)
        }
        return result
    }

    /// Brings the store up to date with `manifest`.
    ///
    /// - Parameter manifest: What should be installed.
    /// - Returns: One outcome per planned package.
    /// - Throws: ``HotUpdateError`` when the store cannot be opened.
    public func apply(_ manifest: Manifest) async throws -> SyncReport {
        let plan = try await recordPlan(manifest)
        var outcomes: [String: SyncReport.PackageOutcome] = [:]

        // Disable and enable: the files stay, only the state changes; nothing is downloaded.
        let toggles = plan.packages.filter { $0.change == .disable || $0.change == .enable }
        if !toggles.isEmpty {
            let results = try await store.setEnabled(toggles.map { ($0.id, $0.change == .enable) })
            for (entry, result) in zip(toggles, results) {
                outcomes[entry.id] = SyncReport.PackageOutcome(entry, active: result.activeVersion)
                hub.publish(entry.id, result.activeVersion, result.enabled ? .installed : .disabled)
            }
        }

        // Downloads: all flights start now and share the updater's slots.
        var written: Set<String> = []
        await withTaskGroup(of: (outcome: SyncReport.PackageOutcome, written: String?).self) { group in
            for entry in plan.packages where entry.change.downloads {
                guard let offered = entry.offered else { continue }
                if let waiting = networkWait(entry, offered) {
                    outcomes[entry.id] = waiting
                    continue
                }
                let priority = DownloadPriority.of(entry.change, offered)
                group.addTask { await self.download(entry, offered, priority: priority) }
            }
            for await result in group {
                outcomes[result.outcome.id] = result.outcome
                if let path = result.written { written.insert(path) }
            }
        }

        // The other changes that download nothing.
        for entry in plan.packages where !entry.change.downloads && outcomes[entry.id] == nil {
            outcomes[entry.id] = await applyLocally(entry)
        }

        // The disk after the downloads is the store's: what the objects heal, what must be
        // downloaded again, the store files put back, the partial downloads pruned.
        let reconciliation = await store.reconcile(
            unchanged: plan.packages.filter { $0.change == .unchanged }.map(\.id),
            written: written,
            quickCheckInterval: configuration.quickCheckInterval,
            partialDownloads: configuration.partialDownloads
        )
        for change in reconciliation.changes { hub.publish(change.id, change.version, change.state, change.error) }
        for (id, heal) in reconciliation.heals { outcomes[id] = await finish(heal, of: id) }
        let ordered = plan.packages.compactMap { outcomes[$0.id] }
        await evictAfterSync()
        return SyncReport(manifestVersion: plan.manifest.version, packages: ordered)
    }

    /// Joins the flight for one planned download and turns its result into an outcome.
    private func download(
        _ entry: UpdatePlan.PackagePlan,
        _ offered: PackageDescriptor,
        priority: DownloadPriority = .update
    ) async -> (outcome: SyncReport.PackageOutcome, written: String?) {
        do {
            let result = try await join(offered, priority: priority)
            // A version waiting for the next launch is not active yet.
            let record = await store.cachedRecord(entry.id)
            let waits = record?.pending.map { $0.path == result.version.path } ?? false
            var outcome = SyncReport.PackageOutcome(entry, active: (waits ? record?.active : result.version)?.version)
            (outcome.bytesDownloaded, outcome.delta) = (result.bytesDownloaded, result.delta)
            outcome.phases = result.phases
            return (outcome, result.version.path)
        } catch {
            let active = await store.cachedRecord(entry.id)?.active?.version
            let hot = HotUpdateError.wrap(error, as: .internalInconsistency, "failed", packageID: entry.id)
            return (SyncReport.PackageOutcome(entry, active: active, error: hot), nil)
        }
    }

    /// Applies a change that downloads nothing: unchanged (already settled by
    /// ``recordPlannedStates(_:)``), restore or remove. A restore downloads after all when the
    /// kept tree is gone or fails its check (see ``Store/rollback(_:to:)``).
    private func applyLocally(_ entry: UpdatePlan.PackagePlan) async -> SyncReport.PackageOutcome {
        switch entry.change {
        case .restore:
            guard let offered = entry.offered else { break }
            do {
                switch try await rollback(entry.id, to: { UpdatePlan.isSame(offered, $0) }) {
                case .restored(let restored):
                    return SyncReport.PackageOutcome(entry, active: restored.version)
                case .damaged(_, _, let digests):
                    // The kept tree failed its check and was let go: fetch the version like any
                    // other, then give the trees that shared its damaged files the good ones.
                    let outcome = await download(entry, offered).outcome
                    if outcome.error == nil { await store.relinkShared(digests, of: entry.id) }
                    return outcome
                }
            } catch let error as HotUpdateError where error.code == .notFound {
                // The kept tree is gone: fetch the version like any other.
                logger.notice("the kept version is gone; downloading it", metadata: ["package": "\(entry.id)"])
                return await download(entry, offered).outcome
            } catch {
                let hot = HotUpdateError.wrap(error, as: .fileSystem, "cannot restore", packageID: entry.id)
                return SyncReport.PackageOutcome(entry, active: entry.installed?.version, error: hot)
            }
        case .remove:
            do {
                if try await store.remove(entry.id) != nil { hub.publish(entry.id, nil, .removed) }
                logger.info("removed", metadata: ["package": "\(entry.id)"])
                return SyncReport.PackageOutcome(entry, active: nil)
            } catch {
                let hot = HotUpdateError.wrap(error, as: .fileSystem, "cannot remove", packageID: entry.id)
                return SyncReport.PackageOutcome(entry, active: entry.installed?.version, error: hot)
            }
        default:
            break
        }
        return SyncReport.PackageOutcome(entry, active: entry.installed?.version)
    }

    /// Fetches what the store's reconciliation could not heal from the objects, and reports
    /// each heal (see ``Store/reconcile(unchanged:written:quickCheckInterval:partialDownloads:)``).
    ///
    /// - Returns: A ``UpdatePlan/Change/heal`` outcome.
    private func finish(_ heal: Reconciliation.Heal, of id: String) async -> SyncReport.PackageOutcome {
        var outcome: SyncReport.PackageOutcome
        switch heal {
        case .healed(let version, let restored):
            logger.notice("healed", metadata: ["package": "\(id)", "restored": "\(restored)"])
            outcome = SyncReport.PackageOutcome(id: id, change: .heal, activeVersion: version)
        case .failed(let version, let error):
            outcome = SyncReport.PackageOutcome(id: id, change: .heal, activeVersion: version, error: error)
        case .refetch(let version, let digests, let listed):
            let fetched = await health.refetch(id, version, digests: digests, check: listed)
            let active = fetched.version ?? version.version
            outcome = SyncReport.PackageOutcome(id: id, change: .heal, activeVersion: active, error: fetched.error)
            outcome.bytesDownloaded = fetched.bytes
            if fetched.error == nil { logger.notice("healed", metadata: ["package": "\(id)", "downloaded": "true"]) }
        }
        let version = outcome.activeVersion
        report(TelemetryEvent(kind: .heal, packageID: id, version: version, errorCode: outcome.error?.code.description))
        if outcome.error == nil { hub.publish(id, version, .installed) }
        return outcome
    }

    /// Plans `manifest` against the snapshot current now and records what the plan found,
    /// in one transaction: a package to add is ``PackageState/new``, one to update
    /// ``PackageState/updateAvailable``, and an unchanged one whose last attempt failed (or
    /// was interrupted) is installed again; the manifest's order of packages is kept for
    /// activating script patches at launch. A store that cannot be written here does not stop
    /// the sync: the states are facts the installs will record anyway.
    private func recordPlan(_ manifest: Manifest) async throws -> UpdatePlan {
        do {
            let (plan, changes) = try await store.recordPlan(manifest)
            for change in changes { hub.publish(change.id, change.version, change.state) }
            return plan
        } catch {
            logger.warning("cannot record the planned states: \(error)")
            return UpdatePlan.make(manifest: manifest, snapshot: try await open())
        }
    }
}
