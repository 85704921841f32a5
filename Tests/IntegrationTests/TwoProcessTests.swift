import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

/// Two real `hot` processes on one store root: syncs alternate between two manifests while
/// `delete`, `gc`, `repair` and `status` run on the same root. After every round the store
/// must hold the same invariants as after a kill (see ``KillRig/check(after:root:logs:finished:)``),
/// and neither process may fail because of the other.
///
/// `HOT_TWO_PROCESS_ROUNDS` sets the number of rounds (16 by default) and `HOT_KILL_SEED`
/// repeats a run.
@Suite("two processes on one store", .serialized)
struct TwoProcessTests {
    @Test("syncs alternating between two manifests while delete, gc, repair and status run: 0 inconsistencies")
    func concurrentCommands() async throws {
        let rounds = environmentInteger("HOT_TWO_PROCESS_ROUNDS", default: 16)
        let seed = UInt64(environmentInteger("HOT_KILL_SEED", default: Int.random(in: 1...Int(Int32.max))))
        var generator = SeededGenerator(seed: seed)
        let rig = try await KillRig()
        let (root, logs) = try rig.makeRoot(.atVersion2)

        // How long a slow sync that downloads takes, measured on a copy.
        let (probe, probeLogs) = try rig.makeRoot(.atVersion1)
        let clock = ContinuousClock()
        let started = clock.now
        let (probeEnding, probeOutput) = try await HotRun.run(
            ["sync"] + rig.syncArguments(manifest: 2, slow: true, root: probe),
            log: probeLogs.appendingPathComponent("probe.log")
        )
        try #require(probeEnding == .exited(0), "\(probeOutput)")
        let syncLength = max(50, (clock.now - started).milliseconds)

        let others: [(String, [String])] = [
            ("status", ["status", "--root", root.path]),
            ("delete", ["delete", KillRig.packageID, "--root", root.path]),
            ("gc", ["gc", "--keep", "0", "--root", root.path]),
            ("repair", ["repair", "--root", root.path]),
        ]
        var inconsistencies: [String] = []
        for round in 0..<rounds {
            let manifest = round % 2 == 0 ? 1 : 2
            let (name, arguments) = others[round % others.count]
            let delay = Duration.milliseconds(Int64.random(in: 0...(syncLength / 2), using: &generator))
            // Nothing kept: the sync downloads, so the other command meets it mid-flight.
            let (dropped, dropOutput) = try await HotRun.run(
                ["gc", "--keep", "0", "--root", root.path],
                log: logs.appendingPathComponent("round-\(round)-setup.log")
            )
            try #require(dropped == .exited(0), "\(dropOutput)")
            let sync = try HotRun(
                ["sync"] + rig.syncArguments(manifest: manifest, slow: true, root: root),
                log: logs.appendingPathComponent("round-\(round)-sync.log")
            )
            // The other command starts once the sync works on the root (a staging entry or a
            // partial download, or it already ended), then at a random point of its download.
            try await waitUntil("the sync of round \(round) to start working on the root") {
                !sync.isRunning || !FileSystem.contents(of: root.appendingPathComponent("staging")).isEmpty
                    || !FileSystem.contents(of: root.appendingPathComponent("partial")).isEmpty
            }
            try await Task.sleep(for: delay)
            let other = try HotRun(arguments, log: logs.appendingPathComponent("round-\(round)-\(name).log"))
            let (syncEnding, otherEnding) = (await sync.wait(), await other.wait())

            var problems: [String] = []
            if syncEnding != .exited(0) {
                problems.append("the sync to m\(manifest) failed (\(syncEnding)): \(sync.failure)")
            }
            let deletedNothing = name == "delete" && other.output.contains("not installed")
            if otherEnding != .exited(0), !deletedNothing {
                problems.append("\(name) failed (\(otherEnding)): \(other.failure)")
            }
            problems += await rig.check(
                concurrentRoundOn: root,
                manifest: manifest,
                logs: logs,
                round: round
            )
            if !problems.isEmpty {
                inconsistencies.append(
                    "round \(round) (sync to m\(manifest), \(name) after \(delay.milliseconds) ms): "
                        + problems.joined(separator: "; ")
                )
            }
        }
        await rig.stop()
        print(
            "two processes: \(rounds) rounds, \(rounds - inconsistencies.count) consistent, "
                + "\(inconsistencies.count) inconsistent, seed \(seed), sync length \(syncLength) ms"
        )
        for line in inconsistencies { print("two processes: inconsistent: \(line)") }
        #expect(inconsistencies.isEmpty, "\(inconsistencies.joined(separator: "\n"))")
    }
}

extension KillRig {
    /// The invariants after a round of two processes: the store opens, `p` is version 1,
    /// version 2 or absent (after a delete) and never a mix, `q` is whole, every named
    /// version is whole, `status --check` passes; then a sync to `manifest` alone completes,
    /// installs its version and leaves nothing behind.
    func check(concurrentRoundOn root: URL, manifest: Int, logs: URL, round: Int) async -> [String] {
        var problems: [String] = []
        let log = { (name: String) in logs.appendingPathComponent("round-\(round)-\(name).log") }
        do {
            let packages = try await StoreInspection.status(root: root, check: true, log: log("check"))
            for package in packages.values where package.state != "installed" {
                problems.append("status --check finds \(package.id) \(package.version ?? "-") \(package.state)")
            }
            if let path = packages[Self.packageID]?.path {
                let tree = try StoreInspection.tree(URL(fileURLWithPath: path))
                if tree == nil { problems.append("the store names p at \(path) but the tree is missing") }
                if let tree, content(of: tree) == nil || content(of: tree) == .damaged {
                    problems.append("p's active tree is a mix of versions")
                }
            }
            if let path = packages[Self.sharedID]?.path {
                if try StoreInspection.tree(URL(fileURLWithPath: path)) != shared { problems.append("q is damaged") }
            } else {
                problems.append("q is not installed any more")
            }
        } catch {
            problems.append("the store does not open or check: \(error)")
        }
        do {
            let (ending, output) = try await HotRun.run(
                ["sync"] + syncArguments(manifest: manifest, slow: false, root: root),
                log: log("next-sync")
            )
            if ending != .exited(0) {
                problems.append("the next sync fails (\(ending)): \(HotRun.failure(in: output))")
            }
            let after = try await StoreInspection.status(root: root, check: true, log: log("after"))
            let expected: Content = manifest == 1 ? .version1 : .version2
            let tree = try after[Self.packageID]?.path.flatMap { try StoreInspection.tree(URL(fileURLWithPath: $0)) }
            if content(of: tree) != expected || after[Self.packageID]?.state != "installed" {
                problems.append("after the next sync p is not version \(manifest) installed")
            }
            problems += try StoreInspection.leftovers(root: root).map { "after the next sync: \($0)" }
        } catch {
            problems.append("after the next sync: \(error)")
        }
        return problems
    }
}
