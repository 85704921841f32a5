import Foundation
import HotCore
import HotTesting
import Testing

@Suite("Package states and events")
struct PackageStateTests {
    @Test("a new package goes new → downloading → verifying → installed, with byte and file progress")
    func addTransitions() async throws {
        let fixture = try EngineFixture()
        var recorder = EventRecorder(fixture.updater)
        let offered = try await fixture.publish("p", "1", ["a.png": "alpha", "b.png": "beta"])
        _ = try await fixture.sync([offered])

        #expect(await recorder.states(of: "p", through: .installed) == [.new, .downloading, .verifying, .installed])
        await recorder.read { event in
            if case .overall(let overall) = event { return overall.packagesFinished == 1 }
            return false
        }
        let progress = recorder.events.compactMap { event -> UpdateEvent.PackageProgress? in
            if case .progress(let progress) = event { return progress }
            return nil
        }
        let size = try #require(offered.size)
        #expect(progress.contains { $0.bytesReceived == size && $0.bytesExpected == size })
        #expect(progress.contains { $0.filesUnpacked == 2 && $0.filesTotal == 2 })
        let overall = recorder.events.compactMap { event -> UpdateEvent.OverallProgress? in
            if case .overall(let overall) = event { return overall }
            return nil
        }
        #expect(overall.last?.packagesFinished == 1)
        #expect(overall.last?.packagesTotal == 1)
        #expect(overall.contains { $0.bytesReceived == size && $0.fractionCompleted == 1 })
        #expect(await fixture.store.snapshot.packages["p"]?.state == .installed)
    }

    @Test("an update goes updateAvailable → downloading → verifying → installed")
    func updateTransitions() async throws {
        let fixture = try EngineFixture()
        _ = try await fixture.sync([try await fixture.publish("p", "1", ["a.png": "1"])])
        var recorder = EventRecorder(fixture.updater)
        _ = try await fixture.sync([try await fixture.publish("p", "2", ["a.png": "2"])])
        #expect(
            await recorder.states(of: "p", through: .installed) == [
                .updateAvailable, .downloading, .verifying, .installed,
            ]
        )
    }

    @Test("a failure is published and stored with its error; verifying is reached only when the download was good")
    func failureTransitions() async throws {
        let fixture = try EngineFixture()
        var recorder = EventRecorder(fixture.updater)
        var bad = try await fixture.publish("p", "1", ["a.png": "1"])
        bad.sha256 = try Digest(algorithm: .sha256, hex: String(repeating: "0", count: 64))
        _ = try await fixture.sync([bad])
        #expect(await recorder.states(of: "p", through: .failed) == [.new, .downloading, .failed])

        let garbage = Data("not an archive".utf8)
        var corrupt = try await fixture.publish("q", "1", [:])
        await fixture.transport.serve(garbage, at: corrupt.url)
        corrupt.size = Int64(garbage.count)
        corrupt.sha256 = try fixture.verifier.digest(of: garbage, using: .sha256)
        _ = try await fixture.sync([bad, corrupt])
        #expect(await recorder.states(of: "q", through: .failed) == [.new, .downloading, .verifying, .failed])
        let record = try #require(await fixture.store.snapshot.packages["q"])
        #expect(record.state == .failed)
        #expect(record.lastError?.contains("q") == true)
    }

    @Test(
        "a missing file is recorded as fileMissing, a damaged one as digestMismatch, and repair brings installed back"
    )
    func damageTransitions() async throws {
        let fixture = try EngineFixture()
        _ = try await fixture.sync([try await fixture.publish("p", "1", ["a.png": "alpha", "b.png": "beta"])])
        var recorder = EventRecorder(fixture.updater)
        let updater = fixture.updater

        try FileManager.default.removeItem(at: fixture.url("packages/p/1/a.png"))
        #expect(try await updater.health.verify(packageID: "p", depth: .quick).missing == ["a.png"])
        #expect(await recorder.states(of: "p", through: .fileMissing) == [.fileMissing])
        #expect(await fixture.store.snapshot.packages["p"]?.state == .fileMissing)
        #expect(try await updater.health.repair(packageID: "p").succeeded)
        #expect(await recorder.states(of: "p", through: .installed) == [.installed])

        // Same size, other bytes, written since the install: the quick check sees its
        // modification time and hashes it; the full check hashes every file.
        let b = fixture.url("packages/p/1/b.png")
        try FileManager.default.removeItem(at: b)
        try Data("BETA".utf8).write(to: b)
        #expect(try await updater.health.verify(packageID: "p", depth: .quick).damaged == ["b.png"])
        #expect(try await updater.health.verify(packageID: "p", depth: .full).damaged == ["b.png"])
        #expect(await recorder.states(of: "p", through: .digestMismatch) == [.digestMismatch])
        #expect(try await updater.health.repair(packageID: "p").restored == ["b.png"])
        #expect(await recorder.states(of: "p", through: .installed) == [.installed])
        #expect(try await fixture.contents(of: "p", "b.png") == "beta")
    }

    @Test("after a crash mid-download the stored state is the planned one, and the state query shows transient states")
    func persistedStateIsTruthful() async throws {
        let fixture = try EngineFixture()
        _ = try await fixture.sync([try await fixture.publish("p", "1", ["a.png": "1"])])
        let v2 = try await fixture.publish("p", "2", ["a.png": "2"])
        await fixture.transport.hold(try FakeArchive.make(["a.png": "2"]), at: v2.url, deliver: 1)
        let sync = Task { try await fixture.sync([v2]) }
        try await SingleFlightTests.waitUntilHeld(fixture, v2.url)

        #expect(try await fixture.updater.state(of: "p") == .downloading)
        // What a crash now would leave on disk:
        #expect(await fixture.store.snapshot.packages["p"]?.state == .updateAvailable)
        #expect(await fixture.store.snapshot.packages["p"]?.active?.version == "1")

        await fixture.transport.release(v2.url)
        #expect(try await sync.value.failures.isEmpty)
        #expect(try await fixture.updater.state(of: "p") == .installed)
    }

    @Test("several subscribers each receive every state change")
    func severalSubscribers() async throws {
        let fixture = try EngineFixture()
        var first = EventRecorder(fixture.updater)
        var second = EventRecorder(fixture.updater)
        _ = try await fixture.sync([try await fixture.publish("p", "1", ["a.png": "1"])])
        let expected: [PackageState] = [.new, .downloading, .verifying, .installed]
        #expect(await first.states(of: "p", through: .installed) == expected)
        #expect(await second.states(of: "p", through: .installed) == expected)
    }
}
