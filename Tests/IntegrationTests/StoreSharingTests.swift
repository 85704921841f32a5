import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

/// The two-process findings of the store review, with the real `hot`: another process's
/// command in the middle of a slow sync must neither break the sync nor be undone by it.
@Suite("one store, two hot processes", .serialized)
struct StoreSharingTests {
    /// Waits until a download of the sync is under way in `root`'s staging. It polls on a
    /// thread of its own: on two loaded cores the test's cooperative threads may be busy with
    /// other suites for longer than the whole slow download.
    static func waitForDownload(in root: URL, sync: HotRun) async throws {
        let seen = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            Thread {
                // A deadline, not a count of polls: on two loaded cores the sync may start late.
                let deadline = Date().addingTimeInterval(180)
                while Date() < deadline {
                    if downloadUnderWay(in: root) { return continuation.resume(returning: true) }
                    Thread.sleep(forTimeInterval: 0.005)
                }
                continuation.resume(returning: false)
            }.start()
        }
        if !seen { Issue.record("the sync never started downloading: \(sync.output)") }
    }

    /// Whether a download of the sync has bytes in `root`'s partial/ or staging.
    static func downloadUnderWay(in root: URL) -> Bool {
        // A download goes to partial/ when the manifest gives the package's SHA-256.
        let partial = root.appendingPathComponent("partial")
        for name in FileSystem.contents(of: partial) where !name.hasSuffix(".json") && !name.hasPrefix(".") {
            let size =
                try? FileManager.default.attributesOfItem(
                    atPath: partial.appendingPathComponent(name).path
                )[.size] as? NSNumber
            if let size, size.int64Value > 0 { return true }
        }
        let staging = root.appendingPathComponent("staging")
        for entry in FileSystem.contents(of: staging) {
            let archive = staging.appendingPathComponent(entry).appendingPathComponent("package.archive")
            if let size = try? FileManager.default.attributesOfItem(atPath: archive.path)[.size] as? NSNumber,
                size.int64Value > 0
            {
                return true
            }
        }
        return false
    }

    @Test("hot status during a slow sync leaves the sync's download alone; a missing root is refused, not created")
    func statusDuringSync() async throws {
        // Slow enough (about 8 s for the update) that a test process starved by a loaded machine
        // still sees the download under way.
        let rig = try await KillRig(bytesPerSecond: 40_000)
        let (root, logs) = try rig.makeRoot(.atVersion1)
        let sync = try HotRun(
            ["sync"] + rig.syncArguments(manifest: 2, slow: true, root: root),
            log: logs.appendingPathComponent("sync.log")
        )
        try await Self.waitForDownload(in: root, sync: sync)
        let (statusEnding, statusOutput) = try await HotRun.run(
            ["status", "--root", root.path],
            log: logs.appendingPathComponent("status.log")
        )
        #expect(statusEnding == .exited(0), "\(statusOutput)")
        #expect(await sync.wait() == .exited(0), "\(sync.failure)")
        let packages = try await StoreInspection.status(
            root: root,
            check: true,
            log: logs.appendingPathComponent("check.log")
        )
        #expect(packages[KillRig.packageID]?.version == "2")
        #expect(packages.values.allSatisfy { $0.state == "installed" })

        let missing = logs.appendingPathComponent("no-such-store")
        let (ending, output) = try await HotRun.run(
            ["status", "--root", missing.path],
            log: logs.appendingPathComponent("missing.log")
        )
        #expect(ending == .exited(1))
        #expect(output.contains("no store at \(missing.path)"), "\(output)")
        #expect(!FileManager.default.fileExists(atPath: missing.path))
        await rig.stop()
    }

    @Test("hot delete during a sync stays deleted: the sync does not write back the record it read before")
    func deleteDuringSync() async throws {
        // Slow enough (about 8 s for the update) that a test process starved by a loaded machine
        // still sees the download under way.
        let rig = try await KillRig(bytesPerSecond: 40_000)
        let (root, logs) = try rig.makeRoot(.atVersion1)
        let sync = try HotRun(
            ["sync"] + rig.syncArguments(manifest: 2, slow: true, root: root),
            log: logs.appendingPathComponent("sync.log")
        )
        try await Self.waitForDownload(in: root, sync: sync)
        let (deleteEnding, deleteOutput) = try await HotRun.run(
            ["delete", KillRig.sharedID, "--root", root.path],
            log: logs.appendingPathComponent("delete.log")
        )
        #expect(deleteEnding == .exited(0), "\(deleteOutput)")
        #expect(await sync.wait() == .exited(0), "\(sync.failure)")

        // The store is whole: what it names exists, and the deleted package stays deleted.
        let packages = try await StoreInspection.status(
            root: root,
            check: true,
            log: logs.appendingPathComponent("check.log")
        )
        #expect(packages[KillRig.sharedID] == nil)
        #expect(packages[KillRig.packageID]?.version == "2")
        #expect(packages.values.allSatisfy { $0.state == "installed" })
        #expect(
            !FileManager.default.fileExists(atPath: root.appendingPathComponent("packages/\(KillRig.sharedID)").path)
        )
        let (repairEnding, repairOutput) = try await HotRun.run(
            ["repair", "--root", root.path],
            log: logs.appendingPathComponent("repair.log")
        )
        #expect(repairEnding == .exited(0), "\(repairOutput)")

        // The next sync brings it back, whole.
        let (again, againOutput) = try await HotRun.run(
            ["sync"] + rig.syncArguments(manifest: 2, slow: false, root: root),
            log: logs.appendingPathComponent("again.log")
        )
        #expect(again == .exited(0), "\(againOutput)")
        let after = try await StoreInspection.status(
            root: root,
            check: true,
            log: logs.appendingPathComponent("after.log")
        )
        #expect(after[KillRig.sharedID]?.state == "installed")
        #expect(try StoreInspection.leftovers(root: root).isEmpty)
        await rig.stop()
    }
}
