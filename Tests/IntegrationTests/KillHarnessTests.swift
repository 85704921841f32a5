import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

/// The real `hot`, killed with SIGKILL during install, update, rollback, remove, gc and
/// repair (against nginx with a rate limit, so downloads take time), and aborted at every
/// fault point each operation passes. After each kill the store must open, `status --check`
/// must pass, the active tree must be the old or the new version byte for byte, the next
/// sync must complete and nothing may be left that no record names.
///
/// `HOT_KILL_RANDOM` sets the number of random kills (12 by default, so CI stays fast;
/// `scripts/kill-harness` runs 200 and more) and `HOT_KILL_SEED` repeats a run.
@Suite("kill harness", .serialized)
struct KillHarnessTests {
    @Test("SIGKILL at random moments of every operation leaves a consistent store")
    func randomKills() async throws {
        let wanted = environmentInteger("HOT_KILL_RANDOM", default: 12)
        let seed = UInt64(environmentInteger("HOT_KILL_SEED", default: Int.random(in: 1...Int(Int32.max))))
        let rig = try await KillRig()

        // One run of each operation to its end: it must work, and it says how long a run takes.
        var durations: [KillRig.Operation: Int64] = [:]
        for operation in KillRig.Operation.allCases {
            let clock = ContinuousClock()
            let start = clock.now
            let trial = try await rig.trial(operation)
            durations[operation] = max(20, (clock.now - start).milliseconds)
            #expect(trial.problems.isEmpty, "\(trial)")
        }
        // The check after a run takes most of that time; the run itself is timed alone, on
        // fresh roots, and the shortest of three runs bounds the moment of the kill.
        for operation in KillRig.Operation.allCases {
            for attempt in 0..<3 {
                let (root, logs) = try rig.makeRoot(operation.start)
                let clock = ContinuousClock()
                let start = clock.now
                let (ending, output) = try await HotRun.run(
                    rig.arguments(for: operation, root: root),
                    log: logs.appendingPathComponent("timed.log")
                )
                #expect(ending == .exited(0), "\(operation): \(output)")
                let length = max(20, (clock.now - start).milliseconds)
                durations[operation] = attempt == 0 ? length : min(durations[operation] ?? length, length)
            }
        }

        var generator = SeededGenerator(seed: seed)
        var kills = 0
        var attempts = 0
        var finishedFirst = 0
        var inconsistent: [KillTrial] = []
        var killsByOperation: [KillRig.Operation: Int] = [:]
        while kills < wanted, attempts < wanted * 3 {
            let operation = KillRig.Operation.allCases[attempts % KillRig.Operation.allCases.count]
            attempts += 1
            let limit = (durations[operation] ?? 100) * 9 / 10
            let delay = Duration.milliseconds(Int64.random(in: 0...limit, using: &generator))
            let trial = try await rig.trial(operation, killAfter: delay)
            if trial.died {
                kills += 1
                killsByOperation[operation, default: 0] += 1
            } else {
                // The run was faster than the window: kill the next ones of its kind sooner.
                finishedFirst += 1
                durations[operation] = max(10, min(limit, delay.milliseconds))
            }
            if !trial.problems.isEmpty { inconsistent.append(trial) }
        }
        await rig.stop()

        let perOperation = KillRig.Operation.allCases.map { "\($0.rawValue) \(killsByOperation[$0] ?? 0)" }
        print(
            "kill harness: random kills \(kills) (\(perOperation.joined(separator: ", "))), "
                + "consistent \(kills - inconsistent.filter(\.died).count) of \(kills) kills; "
                + "runs that finished first \(finishedFirst), \(inconsistent.filter { !$0.died }.count) of them inconsistent; "
                + "seed \(seed), "
                + "kill windows \(KillRig.Operation.allCases.map { "\($0.rawValue) \(durations[$0] ?? 0) ms" }.joined(separator: ", "))"
        )
        for trial in inconsistent { print("kill harness: inconsistent: \(trial)") }
        #expect(kills >= wanted, "only \(kills) of \(attempts) runs were killed before they finished")
        #expect(
            inconsistent.isEmpty,
            "\(inconsistent.count) inconsistent: \(inconsistent.map(\.description).joined(separator: "\n"))"
        )
    }

    @Test(
        "an abort at every fault point of every operation leaves a consistent store",
        .enabled(if: FaultPointBuild.testsRun, FaultPointBuild.skipReason)
    )
    func namedPoints() async throws {
        let rig = try await KillRig()
        var aborts = 0
        var inconsistent: [KillTrial] = []
        var matrix: [String] = []
        var unreached: [String] = []
        for operation in KillRig.Operation.allCases {
            for point in operation.faultPoints {
                // A point can be passed more than once (a sync commits its plan, then its
                // installs): abort at each pass in turn until a run no longer reaches it.
                var passes = 0
                for occurrence in 1...8 {
                    let trial = try await rig.trial(operation, abortAt: "\(point):\(occurrence)")
                    if !trial.problems.isEmpty { inconsistent.append(trial) }
                    guard trial.died else { break }
                    passes += 1
                    aborts += 1
                }
                matrix.append("\(operation.rawValue)×\(point) \(passes)")
                if passes == 0 { unreached.append("\(operation.rawValue) never reaches \(point)") }
            }
        }
        await rig.stop()

        print(
            "kill harness: named-point aborts \(aborts), consistent \(aborts - inconsistent.filter(\.died).count), "
                + "inconsistent \(inconsistent.count); passes: \(matrix.joined(separator: ", "))"
        )
        for trial in inconsistent { print("kill harness: inconsistent: \(trial)") }
        #expect(unreached.isEmpty, "\(unreached)")
        #expect(
            inconsistent.isEmpty,
            "\(inconsistent.count) inconsistent: \(inconsistent.map(\.description).joined(separator: "\n"))"
        )
    }
}
