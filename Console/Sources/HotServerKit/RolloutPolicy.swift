import Foundation

/// How a health-gated rollout moves: through steps of percentages, each held for a minimum
/// number of trial launches and a minimum time; advanced when the version's failure rate is
/// surely under the threshold, halted and rolled back when it is surely over it, or over the
/// previous version's by a margin; held otherwise.
///
/// Only the trials of established devices count (``VersionHealth/established``): client ids
/// the collector enrolled before the version started. Trials of other ids never move a
/// rollout; when they outnumber the established ones (and ``minTrials``), a burst of new
/// client ids is under way and the rollout holds, saying so.
public struct RolloutPolicy: Sendable, Hashable {
    /// The percentages, in order; the last is normally 100.
    public var steps: [Int] = [1, 5, 25, 50, 100]
    /// The trials (confirmed + rolled back devices) a step needs before any decision.
    public var minTrials = 10
    /// The time a step is held at least, since it was taken.
    public var minStepTime: TimeInterval = 3600
    /// The highest acceptable trial failure rate.
    public var threshold = 0.05
    /// How far above the previous version's failure rate the lower bound may be.
    public var margin = 0.02

    /// The defaults: 1% → 5% → 25% → 50% → 100%, 10 trials and an hour a step, 5%, 2 points.
    public init() {}

    /// Why the rollout of a version with `health` holds for a burst of new client ids: more
    /// trial launches from devices not established before it started than from established
    /// ones (and than ``minTrials``); nil when there is no burst.
    public func burst(_ health: VersionHealth?) -> String? {
        guard let health else { return nil }
        let trials = health.established.count
        guard health.newDeviceTrials > max(minTrials, trials) else { return nil }
        return
            "a burst of new client ids: \(health.newDeviceTrials) trial launches from devices not established before this release, against \(trials) from established ones"
    }

    /// What to do with a version.
    public enum Decision: Sendable, Hashable, CustomStringConvertible {
        /// Raise the rollout to this percentage.
        case advance(to: Int)
        /// Roll the version back: it fails.
        case halt(reason: String)
        /// Wait: too few trials, too little time, or an undecided rate.
        case hold(reason: String)

        public var description: String {
            switch self {
            case .advance(let percent): "advance to \(percent)%"
            case .halt(let reason): "halt and roll back: \(reason)"
            case .hold(let reason): "hold: \(reason)"
            }
        }
    }

    /// Decides for a version at `rollout` percent with `health`, the previous version's
    /// `previous`, `stepAge` seconds after its step was taken (nil: unknown, taken as long ago).
    public func decide(
        rollout: Int,
        health: VersionHealth?,
        previous: VersionHealth?,
        stepAge: TimeInterval?
    )
        -> Decision
    {
        let counted = health?.established
        let trials = counted?.count ?? 0
        let burstText = burst(health)
        let burst = burstText != nil
        guard let counted, trials >= minTrials else {
            if let burstText { return .hold(reason: burstText) }
            return .hold(reason: "\(trials) of \(minTrials) trial launches of established devices")
        }
        let interval = counted.failureInterval
        let figures = String(
            format: "failure rate %.1f%% (95%% interval %.1f–%.1f%%) over %d trials of established devices",
            counted.failureRate * 100,
            interval.lower * 100,
            interval.upper * 100,
            trials
        )
        if interval.lower > threshold {
            return .halt(reason: figures + String(format: ", above the threshold of %.1f%%", threshold * 100))
        }
        if let previous, previous.established.count >= minTrials,
            interval.lower > previous.established.failureRate + margin
        {
            return .halt(
                reason: figures
                    + String(
                        format: ", above version %@'s %.1f%% by more than %.1f points",
                        previous.version,
                        previous.established.failureRate * 100,
                        margin * 100
                    )
            )
        }
        if burst, let burstText { return .hold(reason: figures + "; " + burstText) }
        guard let next = steps.first(where: { $0 > rollout }) else {
            return .hold(reason: figures + ", fully rolled out")
        }
        if let stepAge, stepAge < minStepTime {
            return .hold(reason: figures + ", step held \(Int(stepAge)) of \(Int(minStepTime)) s")
        }
        guard interval.upper < threshold else {
            return .hold(reason: figures + String(format: ", not yet surely under %.1f%%", threshold * 100))
        }
        return .advance(to: next)
    }
}

/// One run of `hot-server rollout advance`: decides for the current release of every package
/// in every channel and applies the decisions, each signed and published and recorded.
public struct RolloutAdvance: Sendable {
    /// The repository changed.
    public let repository: PublisherRepository
    /// The telemetry and the actions.
    public let database: any TelemetryDatabase
    /// The policy.
    public let policy: RolloutPolicy

    /// Creates a run.
    public init(repository: PublisherRepository, database: any TelemetryDatabase, policy: RolloutPolicy) {
        self.repository = repository
        self.database = database
        self.policy = policy
    }

    /// One line per package: what was decided and done.
    public struct Outcome: Sendable, Hashable {
        /// The channel; empty for the root manifest.
        public var channel: String
        /// The package.
        public var package: String
        /// Its current release.
        public var version: String
        /// The decision.
        public var decision: RolloutPolicy.Decision
        /// The error when applying it failed.
        public var error: String?
    }

    /// Decides and applies.
    public func run(now: Date = Date()) async throws -> [Outcome] {
        let report = try await HealthReport.load(from: database)
        let actions = try await database.actions(limit: 1000)
        var outcomes: [Outcome] = []
        for package in try await repository.packages() where !package.disabled {
            guard let current = package.current else { continue }
            let health = report.health(package: package.id, version: current, channel: package.channel)
            let previous = package.previous.flatMap {
                report.health(package: package.id, version: $0, channel: package.channel)
            }
            let lastStep = actions.first {
                $0.package == package.id && $0.channel == package.channel && $0.version == current
                    && ["release", "rollout", "advance"].contains($0.action) && $0.outcome == "ok"
            }
            let decision = policy.decide(
                rollout: package.rollout,
                health: health,
                previous: previous,
                stepAge: lastStep.map { now.timeIntervalSince($0.at) }
            )
            var outcome = Outcome(channel: package.channel, package: package.id, version: current, decision: decision)
            switch decision {
            case .hold: break
            case .advance(let percent):
                outcome.error = await apply(
                    .release(version: current, rollout: percent == 100 ? nil : percent),
                    package,
                    action: "advance",
                    detail: "\(package.rollout)% → \(percent)%"
                )
            case .halt(let reason):
                // A halt rolls back; it never disables. Telemetry can be forged, and a
                // disabled package stops every client: that takes a person.
                guard package.previous != nil else {
                    outcome.decision = .hold(
                        reason: reason
                            + "; no earlier release to roll back to: not disabled (an automatic halt never disables)"
                    )
                    break
                }
                outcome.error = await apply(.rollback(to: nil), package, action: "halt", detail: reason)
            }
            outcomes.append(outcome)
        }
        return outcomes
    }

    private func apply(
        _ change: PublisherRepository.Change,
        _ package: PublisherRepository.PackageState,
        action: String,
        detail: String
    )
        async -> String?
    {
        var failure: String?
        do {
            try await repository.apply(change, package: package.id, channel: package.channel)
        } catch {
            failure = "\(error)"
        }
        try? await database.recordAction(
            actor: "rollout",
            action: action,
            channel: package.channel,
            package: package.id,
            version: package.current ?? "",
            detail: detail,
            outcome: failure ?? "ok"
        )
        return failure
    }
}
