import Foundation
import HotCore
import HotTesting
import Logging
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A commit hook slower than the lock's time limit: the store lock is held for that long.
private struct SlowHook: StoreCommitHook {
    let pause: Duration

    func willCommit(_ commit: StoreCommitContext) async {
        // The hold itself is what is measured against the limit: real time must pass.
        try? await Task.sleep(for: pause)
    }

    func removeLeftovers(keeping generation: Int, root: URL, logger: Logger) async {}
}

/// The store lock held by this process for longer than the wait limit: its other holders wait
/// for it, in the order they asked, and none gives up with storeBusy; the limit is for other
/// processes (`IntegrationTests.StoreLockWaitTests` stops one with SIGSTOP).
@Suite("Waiting for the store lock, in process")
struct StoreLockWaitUnitTests {
    /// The identity of the lock file under `root`, as the process queue keys it.
    private func lockFile(_ root: URL) throws -> ProcessLockQueue.FileID {
        var info = stat()
        try #require(stat(root.appendingPathComponent(StoreLock.fileName).path, &info) == 0)
        return ProcessLockQueue.FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    @Test("a change waits past the limit for a holder of its own process, and a read goes on without it")
    func heldInProcess() async throws {
        let fixture = try EngineFixture()
        let v1 = try await fixture.publish("pack", "1", ["a.txt": "1"])
        _ = try await fixture.sync([v1])
        let told = Locked<[StoreLockHolder]>([])
        var configuration = fixture.updater.configuration
        configuration.lockWait = StoreLockWait(timeout: 0.3, noticeAfter: 0.1, readPatience: 0.1) { holder in
            told.withLock { $0.append(holder) }
        }
        let waiting = Updater(configuration: configuration)
        let held = try #require(try StoreLock.acquireBlocking(root: fixture.root, mode: .exclusive, create: false))
        let file = try lockFile(fixture.root)

        let finished = Locked(false)
        let change = Task {
            defer { finished.withLock { $0 = true } }
            return try await waiting.collectGarbage()
        }
        // The change queues behind the holder...
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(30))
        while ProcessLockQueue.shared.occupancy(of: file).waiting < 1 {
            try #require(clock.now < deadline, "the change never queued for the lock")
            try await Task.sleep(for: .milliseconds(5))
        }
        // ...and is still waiting, not failed, three times its limit later.
        try await Task.sleep(for: .milliseconds(900))
        #expect(!finished.withLock { $0 }, "the change stopped waiting for a holder of its own process")

        // A read does not wait for the holder: the snapshot last committed.
        #expect(try await waiting.installedPackages().map(\.version) == ["1"])

        held.release()
        #expect(try await change.value.versionsRemoved == 0)
        #expect(told.withLock { $0 }.allSatisfy { $0.processID != getpid() }, "the process was told to wait for itself")
        #expect(ProcessLockQueue.shared.occupancy(of: file) == (0, 0))
    }

    @Test(
        "with a commit hook slower than the limit, another updater's changes and the same sync's installs wait and succeed"
    )
    func slowCommitHook() async throws {
        let fixture = try EngineFixture(maxConcurrentPackages: 4)
        let first = try await fixture.publish("first", "1", ["f.txt": "first"])
        _ = try await fixture.sync([first])
        let limit = StoreLockWait(timeout: 0.2, noticeAfter: 0.05, readPatience: 0.05)

        var slow = fixture.updater.configuration
        slow.lockWait = limit
        slow.commitHooks = [SlowHook(pause: .milliseconds(600))]
        let syncing = Updater(configuration: slow)
        var other = fixture.updater.configuration
        other.lockWait = limit
        let collecting = Updater(configuration: other)

        var offered = [first]
        for index in 0..<6 {
            offered.append(try await fixture.publish("p\(index)", "1", ["file\(index).txt": "\(index)"]))
        }
        let manifest = try Manifest(packages: offered)
        async let report = syncing.apply(manifest)
        async let collected = withThrowingTaskGroup(of: GarbageReport.self) { group in
            for _ in 0..<3 { group.addTask { try await collecting.collectGarbage() } }
            var reports: [GarbageReport] = []
            for try await report in group { reports.append(report) }
            return reports
        }
        let (synced, garbage) = try await (report, collected)
        #expect(synced.failures.isEmpty, "\(synced.failures.map { "\($0.id): \($0.error?.message ?? "")" })")
        #expect(garbage.count == 3)
        #expect(try await fixture.updater.installedPackages().count == 7)
    }
}
