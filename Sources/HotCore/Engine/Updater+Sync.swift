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
        let manifest: Manifest
        let clock = ContinuousClock()
        let start = clock.now
        do {
            manifest = try await source.fetchManifest()
        } catch {
            let hot = HotUpdateError.wrap(error, as: .manifestInvalid, "cannot fetch the manifest")
            report(TelemetryEvent(kind: .check, errorCode: hot.code.description))
            throw hot
        }
        let fetched = clock.now - start
        report(TelemetryEvent(kind: .check, manifestVersion: manifest.version))
        var result = try await apply(manifest)
        result.manifestSeconds = fetched.timeInterval
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
                outcomes[entry.id] = SyncReport.PackageOutcome(
                    id: entry.id,
                    change: entry.change,
                    activeVersion: result.activeVersion
                )
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

        // Heal what is current but lost its files: one stat per package.
        for entry in plan.packages where entry.change == .unchanged {
            if let healed = await healIfLost(entry.id) { outcomes[entry.id] = healed }
        }
        // Partial losses, found without being asked: every file's presence and size, at most
        // once per interval, after the sync's own work.
        if let interval = configuration.quickCheckInterval, LossMarker.quickCheckDue(interval: interval, layout: layout)
        {
            for entry in plan.packages where entry.change == .unchanged && outcomes[entry.id]?.change != .heal {
                guard let checked = try? await health.verify(packageID: entry.id, depth: .quick), !checked.isHealthy
                else { continue }
                if let healed = await healIfLost(entry.id) { outcomes[entry.id] = healed }
            }
            // Objects deleted one by one: a `stat` per file, and only the lost ones hashed. The
            // trees this sync wrote were just adopted: their 3,000 `stat`s cost an install 30 ms.
            do {
                let restored = try await store.restoreLostObjects(skipping: written)
                if restored > 0 {
                    logger.warning("objects were gone: put back from the trees", metadata: ["objects": "\(restored)"])
                }
            } catch {
                logger.warning("cannot put back lost objects: \(error)")
            }
            LossMarker.quickCheckDone(layout: layout)
        }
        await restoreStoreFiles()
        let ordered = plan.packages.compactMap { outcomes[$0.id] }
        await prunePartialDownloads()
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
            var outcome = SyncReport.PackageOutcome(
                id: entry.id,
                change: entry.change,
                activeVersion: waits ? record?.active?.version : result.version.version,
                bytesDownloaded: result.bytesDownloaded,
                delta: result.delta
            )
            outcome.phases = result.phases
            return (outcome, result.version.path)
        } catch {
            let active = await store.cachedRecord(entry.id)?.active?.version
            let outcome = SyncReport.PackageOutcome(
                id: entry.id,
                change: entry.change,
                activeVersion: active,
                error: HotUpdateError.wrap(error, as: .internalInconsistency, "failed", packageID: entry.id)
            )
            return (outcome, nil)
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
                    return SyncReport.PackageOutcome(id: entry.id, change: .restore, activeVersion: restored.version)
                case .damaged(_, _, let digests):
                    // The kept tree failed its check and was let go: fetch the version like any
                    // other, then give the trees that shared its damaged files the good ones.
                    let outcome = await download(entry, offered).outcome
                    if outcome.error == nil { await relinkShared(digests, of: entry.id) }
                    return outcome
                }
            } catch let error as HotUpdateError where error.code == .notFound {
                // The kept tree is gone: fetch the version like any other.
                logger.notice("the kept version is gone; downloading it", metadata: ["package": "\(entry.id)"])
                return await download(entry, offered).outcome
            } catch {
                return SyncReport.PackageOutcome(
                    id: entry.id,
                    change: .restore,
                    activeVersion: entry.installed?.version,
                    error: HotUpdateError.wrap(error, as: .fileSystem, "cannot restore", packageID: entry.id)
                )
            }
        case .remove:
            do {
                if try await store.remove(entry.id) != nil { hub.publish(entry.id, nil, .removed) }
                logger.info("removed", metadata: ["package": "\(entry.id)"])
                return SyncReport.PackageOutcome(id: entry.id, change: .remove, activeVersion: nil)
            } catch {
                return SyncReport.PackageOutcome(
                    id: entry.id,
                    change: .remove,
                    activeVersion: entry.installed?.version,
                    error: HotUpdateError.wrap(error, as: .fileSystem, "cannot remove", packageID: entry.id)
                )
            }
        default:
            break
        }
        return SyncReport.PackageOutcome(id: entry.id, change: entry.change, activeVersion: entry.installed?.version)
    }

    /// Makes the active version of `id` whole again when its tree is gone (one stat) or a
    /// check recorded it missing or damaged: from the store's objects when they are intact,
    /// else by downloading the version again (see ``UpdaterHealth/repair(packageID:depth:)``).
    ///
    /// - Returns: A ``UpdatePlan/Change/heal`` outcome, or nil when nothing was lost.
    func healIfLost(_ id: String) async -> SyncReport.PackageOutcome? {
        guard let record = await store.cachedRecord(id), let active = record.active, record.state != .disabled else {
            return nil
        }
        let recorded = record.state.isDamage
        // A reader that found one of its files gone left a marker: every file is checked.
        let reported = LossMarker.isRecorded(id, layout: layout)
        // Without its file list, a version cannot be checked or put together from the objects:
        // it is downloaded again, which writes the list anew.
        let listed = store.fileListExists(active)
        guard recorded || reported || !listed || !store.treeExists(active) else { return nil }
        defer { if reported { LossMarker.clear(id, layout: layout) } }
        logger.warning(
            listed
                ? "the active version's files are gone or damaged: healing"
                : "the active version's file list is gone: healing",
            metadata: ["package": "\(id)", "version": "\(active.version)"]
        )
        let failure: HotUpdateError
        do {
            if !listed {
                let descriptor = try UpdaterHealth.descriptor(fetchingAgain: active, of: id)
                let result = try await join(descriptor, repairing: active.path)
                report(TelemetryEvent(kind: .heal, packageID: id, version: result.version.version))
                hub.publish(id, result.version.version, .installed)
                logger.notice("healed", metadata: ["package": "\(id)", "downloaded": "true"])
                return SyncReport.PackageOutcome(
                    id: id,
                    change: .heal,
                    activeVersion: result.version.version,
                    bytesDownloaded: result.bytesDownloaded
                )
            }
            let repair = try await health.repair(packageID: id, depth: .quick)
            if reported, !recorded, repair.after.isHealthy, repair.restored.isEmpty, !repair.refetched {
                return nil  // every file was there after all
            }
            if repair.after.isHealthy {
                report(TelemetryEvent(kind: .heal, packageID: id, version: repair.after.version))
                hub.publish(id, repair.after.version, .installed)
                logger.notice(
                    "healed",
                    metadata: [
                        "package": "\(id)", "restored": "\(repair.restored.count)", "downloaded": "\(repair.refetched)",
                    ]
                )
                return SyncReport.PackageOutcome(id: id, change: .heal, activeVersion: repair.after.version)
            }
            failure =
                repair.error
                ?? HotUpdateError(
                    .notFound,
                    "the files of version \(active.version) could not be put back",
                    packageID: id
                )
        } catch {
            failure = HotUpdateError.wrap(error, as: .fileSystem, "cannot heal", packageID: id)
        }
        report(TelemetryEvent(kind: .heal, packageID: id, version: active.version, errorCode: failure.code.description))
        return SyncReport.PackageOutcome(id: id, change: .heal, activeVersion: active.version, error: failure)
    }

    /// Puts back what was deleted from under the store besides the trees: the objects, when
    /// `objects/` is gone (one `stat`), from the trees that still hold them, each file hashed;
    /// and what the commit hooks keep for the snapshot (the name index: one `stat` per hook).
    /// Failures are logged: the packages serve without them, and the next sync tries again.
    private func restoreStoreFiles() async {
        if store.objectsDirectoryIsGone {
            do {
                let restored = try await store.restoreLostObjects()
                logger.warning("the objects were gone: put back from the trees", metadata: ["objects": "\(restored)"])
            } catch {
                logger.warning("the objects were gone and cannot be put back: \(error)")
            }
        }
        do {
            _ = try await store.restoreHookOutputs()
        } catch {
            logger.warning("cannot write again what the store keeps for its snapshot: \(error)")
        }
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
