import Foundation
import Logging

/// What one launch loads: its token and the packages to load.
public struct LaunchSession: Sendable, Hashable {
    /// Ties a confirmation to this launch alone (see ``Updater/confirmLaunch(_:)``).
    public var token: String
    /// The packages to load, as ``Updater/installedPackages()`` lists them once the launch's
    /// changes are recorded.
    public var packages: [InstalledPackage]
    /// The guarded packages this launch tries: confirm them once the app runs.
    public var trials: [String: String]
    /// The versions rolled back by this launch: a package id and the version blocked.
    public var rolledBack: [LaunchSession.RolledBackVersion]

    /// Creates a value.
    public init(
        token: String,
        packages: [InstalledPackage],
        trials: [String: String],
        rolledBack: [LaunchSession.RolledBackVersion]
    ) {
        self.token = token
        self.packages = packages
        self.trials = trials
        self.rolledBack = rolledBack
    }

    /// The package of that id this launch loads, if any.
    public func package(_ id: String) -> InstalledPackage? {
        packages.first { $0.id == id }
    }
}

/// What one launch transaction decided, read after it.
private struct LaunchChanges: Sendable {
    var trials: [String: String] = [:]
    var rolledBack: [LaunchSession.RolledBackVersion] = []
    var activated: [(id: String, version: String)] = []
    var dropped: [(id: String, versions: [InstalledVersion])] = []
}

extension Updater {
    /// Begins a launch: call it once at app start, before loading any package, and load the
    /// returned packages.
    ///
    /// In one transaction (one commit, so a kill at any point leaves the store as before or
    /// as after):
    /// 1. A guarded package whose active version is still on trial from an earlier launch
    ///    that never confirmed it (the process died, or its time ran out) goes back to its
    ///    last confirmed version, or to the bundle when there is none; the bad version is
    ///    blocked with the reason (see ``InstallRecord/BlockedVersion``), its tree deleted, and a
    ///    ``PackageState/blocked`` event published with a ``HotUpdateError/Code/launchFailed``
    ///    error.
    /// 2. A version waiting for the next launch (``InstallRecord/pending``) becomes active.
    /// 3. Each guarded package's untried active version is marked ``InstallRecord/LaunchPhase/trial`` with
    ///    this launch's token, before the app loads it.
    ///
    /// - Returns: The launch's token and what to load.
    /// - Throws: ``HotUpdateError`` when the store cannot be read or written.
    ///
    /// ```swift
    /// let launch = try await updater.beginLaunch()
    /// try loadApp(from: launch.package("app")?.directory ?? bundledApp)
    /// try await updater.confirmLaunch(launch.token)  // the app runs
    /// ```
    public func beginLaunch() async throws -> LaunchSession {
        try await launchTransaction(resuming: false)
    }

    /// Activates the versions waiting for the next resume (``LaunchPolicy/Timing/nextResume``),
    /// as ``beginLaunch()`` does for them, when the app returns to the foreground and can
    /// reload those packages. Trials of this process's launch are not rolled back.
    ///
    /// - Returns: A new token for the versions activated (confirm it once they run) and
    ///   every package to load.
    /// - Throws: ``HotUpdateError`` when the store cannot be read or written.
    public func beginResume() async throws -> LaunchSession {
        try await launchTransaction(resuming: true)
    }

    /// Confirms the launch of `token`: every guarded version it tries becomes
    /// ``InstallRecord/LaunchPhase/confirmed``, and a blocked entry for that version (one tried again by
    /// the retry policy) is cleared. A token of another launch confirms nothing, and so does
    /// one whose ``LaunchPolicy/trialTimeout`` passed.
    ///
    /// - Parameter token: The token ``beginLaunch()`` returned.
    /// - Returns: The ids of the packages confirmed.
    /// - Throws: ``HotUpdateError`` when the store cannot be written.
    @discardableResult
    public func confirmLaunch(_ token: String) async throws -> [String] {
        let timeout = configuration.launch.trialTimeout
        let now = Date()
        let confirmed = try await ledger.transaction { next, transaction in
            var confirmed: [(id: String, version: String?)] = []
            var dropped: [(String, [InstalledVersion])] = []
            for (id, record) in next.packages.sorted(by: { $0.key < $1.key }) {
                guard var launch = record.launch, launch.phase == .trial, launch.token == token else { continue }
                if let timeout, let started = launch.startedAt, now.timeIntervalSince(started) > timeout { continue }
                var updated = record
                let before = Set(record.keptVersions.map(\.path))
                launch.phase = .confirmed
                launch.token = nil
                launch.fallback = nil
                updated.launch = launch
                if let active = record.active {
                    updated.blocked = record.blocked?.filter { $0.version != active.version }
                    if updated.blocked?.isEmpty == true { updated.blocked = nil }
                }
                let after = Set(updated.keptVersions.map(\.path))
                let gone = record.keptVersions.filter { before.contains($0.path) && !after.contains($0.path) }
                if !gone.isEmpty { dropped.append((id, gone)) }
                next.packages[id] = updated
                confirmed.append((id, record.active?.version))
            }
            if !dropped.isEmpty {
                let dropped = dropped
                transaction.afterCommit {
                    for (id, versions) in dropped { await self.deleteVersions(versions, of: id) }
                }
            }
            return confirmed
        }
        for (id, version) in confirmed {
            logger.info("launch confirmed", metadata: ["package": "\(id)"])
            report(TelemetryEvent(kind: .confirm, date: now, packageID: id, version: version))
        }
        return confirmed.map(\.id)
    }

    /// The versions installed and waiting to take effect: a package listed here changes at
    /// the next launch (or resume), not while the app runs.
    ///
    /// - Throws: ``HotUpdateError`` from the metadata store.
    public func waitingVersions() async throws -> [LaunchSession.WaitingVersion] {
        let policy = configuration.launch
        return try await open().packages.values.sorted { $0.id < $1.id }.compactMap { record in
            record.pending.map {
                LaunchSession.WaitingVersion(id: record.id, version: $0.version, timing: policy.timing(for: record.id))
            }
        }
    }

    /// Whether a new version of `packageID` is installed and waits for a restart (or resume).
    ///
    /// - Throws: ``HotUpdateError`` from the metadata store.
    public func waitsForRestart(_ packageID: String) async throws -> Bool {
        try await open().packages[packageID]?.pending != nil
    }

    /// Removes a version from a package's blocked list, so the next sync that offers it
    /// downloads it again.
    ///
    /// - Parameters:
    ///   - packageID: The package.
    ///   - version: The blocked version.
    /// - Throws: ``HotUpdateError/Code/notFound`` when that version is not blocked.
    public func unblock(packageID: String, version: String) async throws {
        try await ledger.transaction { next, _ in
            guard var record = next.packages[packageID], let blocked = record.blocked,
                blocked.contains(where: { $0.version == version })
            else {
                throw HotUpdateError(.notFound, "version \(version) is not blocked", packageID: packageID)
            }
            record.blocked = blocked.filter { $0.version != version }
            if record.blocked?.isEmpty == true { record.blocked = nil }
            next.packages[packageID] = record
        }
        logger.notice("unblocked", metadata: ["package": "\(packageID)", "version": "\(version)"])
    }

    private func launchTransaction(resuming: Bool) async throws -> LaunchSession {
        let policy = configuration.launch
        let keep = configuration.keepPreviousVersions
        let token = UUID().uuidString
        let now = Date()
        let changes = try await ledger.transaction { next, transaction in
            var changes = LaunchChanges()
            for id in next.packages.keys.sorted() {
                guard var record = next.packages[id] else { continue }
                let before = record.keptVersions
                if !resuming { Self.rollBackFailedTrial(&record, policy: policy, at: now, into: &changes) }
                let timing = policy.timing(for: id)
                if let waiting = record.pending, !resuming || timing == .nextResume {
                    record.pending = nil
                    if policy.isGuarded(id) {
                        record.launch = InstallRecord.LaunchTrial(phase: .pending, fallback: record.confirmedVersion)
                    } else {
                        record.launch = nil
                    }
                    record.previous = Array(([record.active].compactMap { $0 } + record.previous).prefix(keep))
                    record.active = waiting
                    record.state = .installed
                    changes.activated.append((id, waiting.version))
                }
                if var launch = record.launch, launch.phase == .pending, policy.isGuarded(id),
                    let active = record.active
                {
                    launch.phase = .trial
                    launch.token = token
                    launch.startedAt = now
                    record.launch = launch
                    changes.trials[id] = active.version
                }
                let kept = Set(record.keptVersions.map(\.path))
                let gone = before.filter { !kept.contains($0.path) }
                if !gone.isEmpty { changes.dropped.append((id, gone)) }
                next.packages[id] = record
            }
            let dropped = changes.dropped
            if !dropped.isEmpty {
                transaction.afterCommit {
                    for (id, versions) in dropped { await self.deleteVersions(versions, of: id) }
                }
            }
            return changes
        }
        for rolled in changes.rolledBack {
            report(
                TelemetryEvent(
                    kind: .rollback,
                    date: now,
                    packageID: rolled.id,
                    version: rolled.version,
                    restoredVersion: rolled.restoredVersion
                )
            )
            report(
                TelemetryEvent(
                    kind: .block,
                    date: now,
                    packageID: rolled.id,
                    version: rolled.version,
                    errorCode: HotUpdateError.Code.launchFailed.description
                )
            )
            hub.publish(
                rolled.id,
                rolled.version,
                .blocked,
                HotUpdateError(.launchFailed, rolled.reason, packageID: rolled.id)
            )
            logger.error(
                "rolled back a version whose launch never confirmed",
                metadata: [
                    "package": "\(rolled.id)", "version": "\(rolled.version)",
                    "restored": "\(rolled.restoredVersion ?? "bundle")",
                ]
            )
        }
        for (id, version) in changes.activated { hub.publish(id, version, .installed) }
        return LaunchSession(
            token: token,
            packages: try await installedPackages(),
            trials: changes.trials,
            rolledBack: changes.rolledBack
        )
    }

    /// Rolls a trial no launch confirmed back to its fallback and blocks its version.
    private static func rollBackFailedTrial(
        _ record: inout InstallRecord,
        policy: LaunchPolicy,
        at now: Date,
        into changes: inout LaunchChanges
    ) {
        guard let launch = record.launch, launch.phase == .trial, let bad = record.active else { return }
        let reason: String
        if let timeout = policy.trialTimeout {
            reason =
                "the launch of \(launch.startedAt.map { "\($0)" } ?? "an earlier start") did not confirm version \(bad.version) within \(Int(timeout)) s"
        } else {
            reason =
                "the launch of \(launch.startedAt.map { "\($0)" } ?? "an earlier start") never confirmed version \(bad.version)"
        }
        var blocked = record.blocked ?? []
        if let index = blocked.firstIndex(where: { $0.version == bad.version }) {
            blocked[index].failures += 1
            blocked[index].reason = reason
            blocked[index].blockedAt = now
            blocked[index].sha256 = bad.sha256
            blocked[index].retryAfter = policy.retry.retryDate(afterFailures: blocked[index].failures, at: now)
        } else {
            blocked.append(
                InstallRecord.BlockedVersion(
                    version: bad.version,
                    sha256: bad.sha256,
                    reason: reason,
                    blockedAt: now,
                    failures: 1,
                    retryAfter: policy.retry.retryDate(afterFailures: 1, at: now)
                )
            )
        }
        record.blocked = blocked
        var restored = launch.fallback
        restored?.chosenAt = now
        record.previous = record.previous.filter { $0.path != bad.path && $0.path != restored?.path }
        record.active = restored
        record.launch = nil
        if restored == nil {
            record.state = .failed
            record.lastError = reason
            record.lastErrorCode = HotUpdateError.Code.launchFailed.description
        } else {
            record.state = .installed
            record.lastError = nil
            record.lastErrorCode = nil
        }
        changes.rolledBack.append(
            LaunchSession.RolledBackVersion(
                id: record.id,
                version: bad.version,
                restoredVersion: restored?.version,
                reason: reason
            )
        )
    }
}

extension LaunchSession {
    /// A version that a launch rolled back and blocked.
    public struct RolledBackVersion: Sendable, Hashable {
        /// The package id.
        public var id: String
        /// The version blocked.
        public var version: String
        /// The version active again; nil: the copy bundled with the app.
        public var restoredVersion: String?
        /// Why.
        public var reason: String

        /// Creates a value.
        public init(id: String, version: String, restoredVersion: String?, reason: String) {
            self.id = id
            self.version = version
            self.restoredVersion = restoredVersion
            self.reason = reason
        }
    }
}

extension LaunchSession {
    /// A version installed and waiting to take effect.
    public struct WaitingVersion: Sendable, Hashable {
        /// The package id.
        public var id: String
        /// The version waiting.
        public var version: String
        /// When it takes effect.
        public var timing: LaunchPolicy.Timing
    }
}
