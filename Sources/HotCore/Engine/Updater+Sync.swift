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
        do {
            manifest = try await source.fetchManifest()
        } catch {
            throw HotUpdateError.wrap(error, as: .manifestInvalid, "cannot fetch the manifest")
        }
        return try await apply(manifest)
    }

    /// Brings the store up to date with `manifest`.
    ///
    /// - Parameter manifest: What should be installed.
    /// - Returns: One outcome per planned package.
    /// - Throws: ``HotUpdateError`` when the store cannot be opened.
    public func apply(_ manifest: Manifest) async throws -> SyncReport {
        try await performApply(UpdatePlan.make(manifest: manifest, snapshot: try await open()))
    }

    func performApply(_ plan: UpdatePlan) async throws -> SyncReport {
        await recordPlannedStates(plan)
        var outcomes: [String: SyncReport.PackageOutcome] = [:]

        // Disable and enable: the files stay, only the state changes; nothing is downloaded.
        let toggles = plan.packages.filter { $0.change == .disable || $0.change == .enable }
        if !toggles.isEmpty {
            let toggled = try await serialized {
                var next = try await self.open()
                let results = toggles.map { next.setEnabled($0, logger: self.logger) }
                try await self.commit(next)
                return results
            }
            for outcome in toggled {
                outcomes[outcome.id] = outcome
                hub.publish(outcome.id, outcome.activeVersion, outcome.change == .disable ? .disabled : .installed)
            }
        }

        // Downloads: all flights start now and share the updater's slots.
        await withTaskGroup(of: SyncReport.PackageOutcome.self) { group in
            for entry in plan.packages where entry.change.downloads {
                guard let offered = entry.offered else { continue }
                group.addTask { await self.download(entry, offered) }
            }
            for await outcome in group { outcomes[outcome.id] = outcome }
        }

        // The other changes that download nothing.
        for entry in plan.packages where !entry.change.downloads && outcomes[entry.id] == nil {
            outcomes[entry.id] = await applyLocally(entry)
        }
        let ordered = plan.packages.compactMap { outcomes[$0.id] }
        return SyncReport(manifestVersion: plan.manifest.version, packages: ordered)
    }

    /// Joins the flight for one planned download and turns its result into an outcome.
    private func download(_ entry: UpdatePlan.PackagePlan, _ offered: PackageDescriptor) async -> SyncReport.PackageOutcome {
        do {
            let result = try await join(offered)
            return SyncReport.PackageOutcome(
                id: entry.id, change: entry.change, activeVersion: result.version.version,
                bytesDownloaded: result.bytesDownloaded)
        } catch {
            let active = snapshot?.packages[entry.id]?.active?.version
            return SyncReport.PackageOutcome(
                id: entry.id, change: entry.change, activeVersion: active,
                error: HotUpdateError.wrap(error, as: .internalInconsistency, "failed", packageID: entry.id))
        }
    }

    /// Applies a change that downloads nothing: unchanged (already settled by
    /// ``recordPlannedStates(_:)``), restore or remove.
    private func applyLocally(_ entry: UpdatePlan.PackagePlan) async -> SyncReport.PackageOutcome {
        switch entry.change {
        case .restore:
            guard let offered = entry.offered else { break }
            do {
                let restored = try await serialized {
                    try await self.performRollback(packageID: entry.id) { UpdatePlan.isSame(offered, $0) }
                }
                return SyncReport.PackageOutcome(id: entry.id, change: .restore, activeVersion: restored.version)
            } catch let error as HotUpdateError where error.code == .notFound {
                // The kept tree is gone: fetch the version like any other.
                logger.notice("the kept version is gone; downloading it", metadata: ["package": "\(entry.id)"])
                return await download(entry, offered)
            } catch {
                return SyncReport.PackageOutcome(
                    id: entry.id, change: .restore, activeVersion: entry.installed?.version,
                    error: HotUpdateError.wrap(error, as: .fileSystem, "cannot restore", packageID: entry.id))
            }
        case .remove:
            do {
                _ = try await serialized { try await self.performRemove(packageID: entry.id, missingIsError: false) }
                logger.info("removed", metadata: ["package": "\(entry.id)"])
                return SyncReport.PackageOutcome(id: entry.id, change: .remove, activeVersion: nil)
            } catch {
                return SyncReport.PackageOutcome(
                    id: entry.id, change: .remove, activeVersion: entry.installed?.version,
                    error: HotUpdateError.wrap(error, as: .fileSystem, "cannot remove", packageID: entry.id))
            }
        default:
            break
        }
        return SyncReport.PackageOutcome(id: entry.id, change: entry.change, activeVersion: entry.installed?.version)
    }

    /// Records what the plan found, in one commit and only if anything changes: a package to
    /// add is ``PackageState/new``, one to update ``PackageState/updateAvailable``, and an
    /// unchanged one whose last attempt failed (or was interrupted) is installed again; the
    /// manifest's order of packages is kept for activating script patches at launch.
    /// A store that cannot be written here does not stop the sync: the states are facts the
    /// installs will record anyway.
    private func recordPlannedStates(_ plan: UpdatePlan) async {
        do {
            let changes = try await serialized { try await self.commitPlannedStates(plan) }
            for change in changes { hub.publish(change.id, change.version, change.state) }
        } catch {
            logger.warning("cannot record the planned states: \(error)")
        }
    }

    private func commitPlannedStates(_ plan: UpdatePlan) async throws -> [UpdateEvent.StateChange] {
        var next = try await open()
        var changes: [UpdateEvent.StateChange] = []
        for entry in plan.packages {
            var record = next.packages[entry.id] ?? InstallRecord(id: entry.id, state: .new, active: nil)
            let state: PackageState
            switch entry.change {
            case .add: state = .new
            case .update: state = .updateAvailable
            case .unchanged:
                guard [.failed, .new, .updateAvailable].contains(record.state), !record.activationFailed else {
                    continue
                }
                state = .installed
            default: continue
            }
            guard next.packages[entry.id] == nil || record.state != state else { continue }
            record.state = state
            if state == .installed {
                record.lastError = nil
                record.lastErrorCode = nil
            }
            next.packages[entry.id] = record
            changes.append(UpdateEvent.StateChange(id: entry.id, version: entry.offered?.version, state: state))
        }
        let order = plan.manifest.packages.map(\.id)
        let reordered = next.manifestOrder != order
        next.manifestOrder = order
        if !changes.isEmpty || reordered { try await commit(next) }
        return changes
    }
}
