import Foundation
import HotServerKit
import Testing

@Suite("Rollout policy and the Wilson interval")
struct PolicyTests {
    @Test("Wilson's 95% interval: known values, and bounds that hold at 0 and 1")
    func wilson() {
        // 12 failures of 12: the lower bound is 0.7575 (standard tables).
        let all = WilsonInterval(successes: 12, trials: 12)
        #expect(abs(all.lower - 0.7575) < 0.0005)
        #expect(all.upper == 1)
        let none = WilsonInterval(successes: 0, trials: 100)
        #expect(none.lower == 0)
        #expect(abs(none.upper - 0.0370) < 0.0005)
        let half = WilsonInterval(successes: 5, trials: 10)
        #expect(abs(half.lower - 0.2366) < 0.0005)
        #expect(abs(half.upper - 0.7634) < 0.0005)
    }

    func health(_ version: String, confirmed: Int, rolledBack: Int) -> VersionHealth {
        let trials = confirmed + rolledBack
        return VersionHealth(
            package: "app",
            version: version,
            channel: "",
            devices: trials,
            downloaded: trials,
            fullDownloads: trials,
            deltaDownloads: 0,
            bytes: 0,
            installed: trials,
            confirmed: confirmed,
            confirmedLaunches: confirmed,
            rolledBack: rolledBack,
            rollbacks: rolledBack,
            blocked: rolledBack,
            errors: [:],
            failureRate: trials == 0 ? 0 : Double(rolledBack) / Double(trials),
            failureInterval: WilsonInterval(successes: rolledBack, trials: trials),
            trials: trials,
            adoption: []
        )
    }

    @Test("advance when surely healthy, step by step; hold on few trials, a young step or an undecided rate")
    func advanceAndHold() {
        let policy = RolloutPolicy()
        let healthy = health("2", confirmed: 200, rolledBack: 0)
        #expect(policy.decide(rollout: 1, health: healthy, previous: nil, stepAge: 7200) == .advance(to: 5))
        #expect(policy.decide(rollout: 50, health: healthy, previous: nil, stepAge: 7200) == .advance(to: 100))
        guard case .hold = policy.decide(rollout: 1, health: healthy, previous: nil, stepAge: 60) else {
            Issue.record("a step younger than its minimum time advanced")
            return
        }
        guard
            case .hold = policy.decide(
                rollout: 1,
                health: health("2", confirmed: 5, rolledBack: 0),
                previous: nil,
                stepAge: nil
            )
        else {
            Issue.record("5 trials were enough")
            return
        }
        // 1 failure in 40: the upper bound (12.9%) is not under 5%, the lower (0.4%) not over it.
        guard
            case .hold = policy.decide(
                rollout: 5,
                health: health("2", confirmed: 39, rolledBack: 1),
                previous: nil,
                stepAge: nil
            )
        else {
            Issue.record("an undecided rate moved")
            return
        }
        guard case .hold = policy.decide(rollout: 100, health: healthy, previous: nil, stepAge: nil) else {
            Issue.record("a full rollout moved")
            return
        }
    }

    @Test("halt when surely over the threshold, or over the previous version by the margin")
    func halt() {
        let policy = RolloutPolicy()
        guard
            case .halt = policy.decide(
                rollout: 5,
                health: health("2", confirmed: 0, rolledBack: 12),
                previous: nil,
                stepAge: 1
            )
        else {
            Issue.record("12 of 12 failing did not halt")
            return
        }
        var strict = RolloutPolicy()
        strict.threshold = 0.5
        // 30% failing vs 1% before: under the 50% threshold but far over the previous rate.
        let previous = health("1", confirmed: 990, rolledBack: 10)
        guard
            case .halt = strict.decide(
                rollout: 5,
                health: health("2", confirmed: 70, rolledBack: 30),
                previous: previous,
                stepAge: nil
            )
        else {
            Issue.record("a regression against the previous version did not halt")
            return
        }
    }
}
