import Foundation
import HotCore
import HotTesting
import Testing

/// The store lock held elsewhere (another open file description: as another process holds
/// it): a change gives up with storeBusy after its timeout and tells who holds the lock; a
/// read goes on from the last committed snapshot.
@Suite("Waiting for the store lock, in process")
struct StoreLockWaitUnitTests {
    @Test("a change gives up with storeBusy, naming the holder; a read does not wait for it")
    func heldLock() async throws {
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
        defer { held.release() }

        await #expect(throws: HotUpdateError(.storeBusy, "")) { try await waiting.collectGarbage() }
        #expect(told.withLock { $0 }.contains { $0.processID == getpid() })

        // A read takes the snapshot last committed.
        #expect(try await waiting.installedPackages().map(\.version) == ["1"])
        held.release()
        #expect(try await waiting.collectGarbage().versionsRemoved == 0)
    }
}
