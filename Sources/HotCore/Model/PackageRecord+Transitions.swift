import Foundation

extension PackageState {
    /// Whether a package in this state serves assets from its active version: the one
    /// definition the resolvers, the name index, the health checks and patch activation
    /// share. A disabled package does not (the server turned it off), nor does one known to
    /// be damaged (``fileMissing``, ``digestMismatch``); a failed update of a newer version
    /// leaves the active one serving.
    public var servesAssets: Bool {
        self == .installed || self == .failed || self == .new || self == .updateAvailable
    }
}

/// The transitions of a record: every change the engine makes to one, by name.
extension PackageRecord {
    /// The package is installed and whole again: the last error is cleared.
    mutating func markInstalled() {
        state = .installed
        lastError = nil
        lastErrorCode = nil
    }

    /// The package failed with `error`; the active version, if any, stays.
    mutating func markFailed(_ error: HotUpdateError) {
        markFailed(reason: error.description, code: error.code)
    }

    /// The package failed for `reason`; the active version, if any, stays.
    mutating func markFailed(reason: String, code: HotUpdateError.Code) {
        state = .failed
        lastError = reason
        lastErrorCode = code.description
    }

    /// A check found the active version in `found` (damaged, or whole again).
    mutating func markChecked(_ found: PackageState, reason: HotUpdateError?) {
        state = found
        lastError = reason?.description
        lastErrorCode = reason?.code.description
    }

    /// The server disabled or enabled the package: its files stay where they are.
    mutating func setEnabled(_ enabled: Bool) {
        if enabled { markInstalled() } else { markChecked(.disabled, reason: nil) }
    }

    /// Installs `version` per the launch policy: a version whose timing is not
    /// ``LaunchPolicy/Timing/immediate`` waits as ``pending`` (replacing one waiting before
    /// it); otherwise it becomes active, the active one goes first among the previous ones
    /// (`keep` of them are kept), and a guarded package's new version starts
    /// ``LaunchPhase/pending`` with the last confirmed version as its fallback. Blocked
    /// versions stay recorded.
    mutating func install(_ version: InstalledVersion, policy: LaunchPolicy, keep: Int) {
        markInstalled()
        if policy.timing(for: id) != .immediate {
            pending = version
            return
        }
        startUsing(version, guarded: policy.isGuarded(id), keep: keep)
        pending = nil
    }

    /// Makes the version waiting for the next launch active, when one waits.
    ///
    /// - Returns: The version activated.
    mutating func activatePending(guarded: Bool, keep: Int) -> InstalledVersion? {
        guard let waiting = pending else { return nil }
        pending = nil
        startUsing(waiting, guarded: guarded, keep: keep)
        state = .installed
        return waiting
    }

    private mutating func startUsing(_ version: InstalledVersion, guarded: Bool, keep: Int) {
        launch = guarded ? LaunchTrial(phase: .pending, fallback: confirmedVersion) : nil
        previous = Array(([active].compactMap { $0 } + previous).prefix(keep))
        active = version
    }

    /// Puts the active version on trial for the launch of `token`, when it waits for one.
    ///
    /// - Returns: The version on trial.
    mutating func startTrial(token: String, at date: Date) -> InstalledVersion? {
        guard var trial = launch, trial.phase == .pending, let active else { return nil }
        trial.phase = .trial
        trial.token = token
        trial.startedAt = date
        launch = trial
        return active
    }

    /// Confirms the trial of the launch of `token`, unless its time ran out: the version is
    /// confirmed, its fallback let go, and a blocked entry for it cleared.
    ///
    /// - Parameter elapsed: How long the launch has run by a monotonic clock, when this
    ///   process began it; else the wall clock since the trial started is used.
    /// - Returns: Whether the trial was confirmed.
    mutating func confirmTrial(token: String, timeout: TimeInterval?, elapsed: TimeInterval?, at date: Date) -> Bool {
        guard var trial = launch, trial.phase == .trial, trial.tokens.contains(token) else { return false }
        if let timeout, let spent = elapsed ?? trial.startedAt.map({ date.timeIntervalSince($0) }), spent > timeout {
            return false
        }
        trial.phase = .confirmed
        trial.token = nil
        trial.fallback = nil
        trial.joined = nil
        launch = trial
        if let active {
            blocked = blocked?.filter { $0.version != active.version }
            if blocked?.isEmpty == true { blocked = nil }
        }
        return true
    }

    /// Whether the active version's trial is still running: a launch that runs it is alive
    /// (its token is in `live`) and its confirm window, if any, has not passed.
    func hasLiveTrial(live: Set<String>, timeout: TimeInterval?, at date: Date) -> Bool {
        guard let trial = launch, trial.phase == .trial, trial.tokens.contains(where: live.contains) else {
            return false
        }
        if let timeout, let started = trial.startedAt, date.timeIntervalSince(started) > timeout { return false }
        return true
    }

    /// Adds the launch of `token` to the running trial, which it may then confirm.
    ///
    /// - Returns: The version on trial.
    mutating func joinTrial(token: String) -> InstalledVersion? {
        guard var trial = launch, trial.phase == .trial, let active else { return nil }
        if !trial.tokens.contains(token) { trial.joined = (trial.joined ?? []) + [token] }
        launch = trial
        return active
    }

    /// Rolls a trial no launch confirmed back to its fallback (the bundle when there is
    /// none) and blocks its version with the reason.
    ///
    /// - Returns: What was rolled back, or nil when the record has no unconfirmed trial.
    mutating func rollBackFailedTrial(
        policy: LaunchPolicy,
        at now: Date,
        generation: Int
    ) -> LaunchSession.RolledBackVersion? {
        guard let trial = launch, trial.phase == .trial, let bad = active else { return nil }
        let started = trial.startedAt.map { "\($0)" } ?? "an earlier start"
        let reason =
            if let timeout = policy.trialTimeout {
                "the launch of \(started) did not confirm version \(bad.version) within \(Int(timeout)) s"
            } else {
                "the launch of \(started) never confirmed version \(bad.version)"
            }
        var list = blocked ?? []
        if let index = list.firstIndex(where: { $0.version == bad.version }) {
            list[index].failures += 1
            list[index].reason = reason
            list[index].blockedAt = now
            list[index].sha256 = bad.sha256
            list[index].retryAfter = policy.retry.retryDate(afterFailures: list[index].failures, at: now)
        } else {
            list.append(
                BlockedVersion(
                    version: bad.version,
                    sha256: bad.sha256,
                    reason: reason,
                    blockedAt: now,
                    failures: 1,
                    retryAfter: policy.retry.retryDate(afterFailures: 1, at: now)
                )
            )
        }
        blocked = list
        var restored = trial.fallback
        restored?.chosenAt = now
        restored?.chosenInGeneration = generation
        previous = previous.filter { $0.path != bad.path && $0.path != restored?.path }
        active = restored
        launch = nil
        if restored == nil {
            markFailed(reason: reason, code: .launchFailed)
        } else {
            markInstalled()
        }
        return LaunchSession.RolledBackVersion(
            id: id,
            version: bad.version,
            restoredVersion: restored?.version,
            reason: reason
        )
    }

    /// Makes the newest previous version that `matches` active again, and the active one
    /// previous, chosen at `date` in the commit of `generation`: installs asked for before
    /// that commit do not replace it.
    ///
    /// - Returns: The version restored, or nil when no previous version matches.
    mutating func restorePrevious(
        at date: Date,
        generation: Int,
        where matches: (InstalledVersion) -> Bool
    ) -> InstalledVersion? {
        guard let index = previous.firstIndex(where: matches) else { return nil }
        var restored = previous.remove(at: index)
        restored.chosenAt = date
        restored.chosenInGeneration = generation
        if let active { previous.insert(active, at: 0) }
        active = restored
        markInstalled()
        return restored
    }

    /// Notes that damage was found in a file the versions at `paths` share (see
    /// ``InstalledVersion/damageSeen``), wherever the record keeps them: active, waiting,
    /// previous, or a launch trial's fallback.
    ///
    /// - Returns: Whether a version was not marked before.
    mutating func markDamageSeen(paths: Set<String>) -> Bool {
        var changed = false
        func mark(_ version: inout InstalledVersion) {
            guard paths.contains(version.path), version.damageSeen != true else { return }
            version.damageSeen = true
            changed = true
        }
        if var version = active {
            mark(&version)
            active = version
        }
        if var version = pending {
            mark(&version)
            pending = version
        }
        for index in previous.indices { mark(&previous[index]) }
        if var trial = launch, var version = trial.fallback {
            mark(&version)
            trial.fallback = version
            launch = trial
        }
        return changed
    }

    /// Lets go of the previous version at `path`, whose tree failed the check before a
    /// restore: it is deleted after the commit (unless a launch trial still falls back to it).
    ///
    /// - Returns: Whether the record kept it as a previous version.
    mutating func dropPrevious(path: String) -> Bool {
        let count = previous.count
        previous.removeAll { $0.path == path }
        return previous.count != count
    }

    /// Keeps only the `keep` newest previous versions (a launch trial's fallback stays).
    mutating func keepPrevious(_ keep: Int) {
        if previous.count > keep { previous = Array(previous.prefix(keep)) }
    }

    /// Lets `version` be downloaded again.
    ///
    /// - Returns: Whether it was blocked.
    mutating func unblock(_ version: String) -> Bool {
        guard let list = blocked, list.contains(where: { $0.version == version }) else { return false }
        blocked = list.filter { $0.version != version }
        if blocked?.isEmpty == true { blocked = nil }
        return true
    }
}
