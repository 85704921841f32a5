import Foundation
import HotCore
import HotTesting
import Testing

@Suite("Launch trials of guarded packages")
struct LaunchTrialTests {
    @Test(
        "a guarded package's version waits for the next launch, is tried, confirmed, and a failed trial is rolled back and blocked"
    )
    func trialRollbackBlock() async throws {
        let fixture = try EngineFixture(launch: LaunchPolicy(guarded: ["app"]))
        let v1 = try await fixture.publish("app", "1", ["main.js": "1"])
        let v2 = try await fixture.publish("app", "2", ["main.js": "2", "crash": ""])
        let v3 = try await fixture.publish("app", "3", ["main.js": "3"])

        // Installed while the app runs the bundle: it waits.
        _ = try await fixture.sync([v1])
        #expect(try await fixture.updater.installedPackages().isEmpty)
        #expect(try await fixture.updater.launch.waitsForRestart("app"))
        #expect(try await fixture.updater.launch.waitingVersions().map(\.version) == ["1"])

        // The next launch takes it as a trial and confirms it.
        let first = try await fixture.updater.launch.begin()
        #expect(first.package("app")?.version == "1")
        #expect(first.trials == ["app": "1"])
        var record = try #require(await fixture.store.snapshot.packages["app"])
        #expect(record.launch?.phase == .trial)
        #expect(record.launch?.token == first.token)
        #expect(try await fixture.updater.launch.confirm(first.token) == ["app"])
        record = try #require(await fixture.store.snapshot.packages["app"])
        #expect(record.launch?.phase == .confirmed)
        #expect(record.launch?.fallback == nil)

        // Version 2 is tried by a launch that dies before confirming.
        _ = try await fixture.sync([v2])
        #expect(try await fixture.contents(of: "app", "main.js") == "1")  // the running app keeps its files
        let second = try await fixture.updater.launch.begin()
        #expect(second.package("app")?.version == "2")
        record = try #require(await fixture.store.snapshot.packages["app"])
        #expect(record.launch?.fallback?.version == "1")

        // The next process's launch rolls it back, blocks it and says so.
        let relaunched = fixture.relaunched()
        var events = EventRecorder(relaunched)
        let third = try await relaunched.launch.begin()
        #expect(third.package("app")?.version == "1")
        #expect(third.rolledBack.map(\.version) == ["2"])
        #expect(third.trials.isEmpty)
        await events.read { event in
            if case .state(let change) = event { return change.state == .blocked }
            return false
        }
        guard case .state(let change) = events.events.last else {
            Issue.record("no state change published")
            return
        }
        #expect(change.version == "2")
        #expect(change.error?.code == .launchFailed)
        record = try #require(await fixture.store.snapshot.packages["app"])
        #expect(record.active?.version == "1")
        #expect(record.blocked?.map(\.version) == ["2"])
        #expect(record.blocked?.first?.retryAfter == nil)
        #expect(record.blocked?.first?.reason.contains("never confirmed version 2") == true)
        #expect(!FileManager.default.fileExists(atPath: fixture.url("packages/app/2").path))
        #expect(try await relaunched.launch.confirm(third.token).isEmpty)  // nothing on trial

        // Blocked stays blocked: no download, no restore.
        let requests = await fixture.transport.requestCount(for: v2.url)
        let blockedReport = try await relaunched.apply(try Manifest(packages: [v2]))
        #expect(blockedReport.packages.map(\.change) == [.blocked])
        #expect(blockedReport.packages.first?.activeVersion == "1")
        #expect(await fixture.transport.requestCount(for: v2.url) == requests)
        #expect(try await !relaunched.launch.waitsForRestart("app"))

        // A newer release is taken.
        let report = try await relaunched.apply(try Manifest(packages: [v3]))
        #expect(report.packages.map(\.change) == [.update])
        let fourth = try await relaunched.launch.begin()
        #expect(fourth.package("app")?.version == "3")
        #expect(try await relaunched.launch.confirm(fourth.token) == ["app"])
        #expect(try await fixture.contents(of: "app", "main.js") == "3")
    }

    @Test("a token of another launch confirms nothing")
    func staleToken() async throws {
        let fixture = try EngineFixture(launch: LaunchPolicy(guarded: ["app"]))
        let v1 = try await fixture.publish("app", "1", ["main.js": "1"])
        let v2 = try await fixture.publish("app", "2", ["main.js": "2"])
        _ = try await fixture.sync([v1])
        let first = try await fixture.updater.launch.begin()
        try await fixture.updater.launch.confirm(first.token)
        _ = try await fixture.sync([v2])
        let second = try await fixture.updater.launch.begin()
        #expect(second.trials == ["app": "2"])
        #expect(try await fixture.updater.launch.confirm(first.token).isEmpty)
        #expect(try await fixture.updater.launch.confirm(UUID().uuidString).isEmpty)
        let third = try await fixture.updater.launch.begin()
        #expect(third.package("app")?.version == "1")
        #expect(third.rolledBack.map(\.version) == ["2"])
        // The rolled-back launch's token confirms nothing either.
        #expect(try await fixture.updater.launch.confirm(second.token).isEmpty)
    }

    @Test("a first version that never launches goes back to the bundle")
    func backToBundle() async throws {
        let fixture = try EngineFixture(launch: LaunchPolicy(guarded: ["app"]))
        let v1 = try await fixture.publish("app", "1", ["main.js": "1"])
        _ = try await fixture.sync([v1])
        _ = try await fixture.updater.launch.begin()
        let next = try await fixture.updater.launch.begin()
        #expect(next.package("app") == nil)
        let record = try #require(await fixture.store.snapshot.packages["app"])
        #expect(record.active == nil)
        #expect(record.state == .failed)
        #expect(record.lastErrorCode == "launchFailed")
        #expect(try await fixture.sync([v1]).packages.map(\.change) == [.blocked])
        #expect(await fixture.transport.requestCount(for: v1.url) == 1)
    }

    @Test("the retry policy lets a blocked version be tried again once, after its interval")
    func retryOnce() async throws {
        let fixture = try EngineFixture(
            launch: LaunchPolicy(guarded: ["app"], retry: .after(24 * 3600, attempts: 1))
        )
        let v1 = try await fixture.publish("app", "1", ["main.js": "1"])
        let v2 = try await fixture.publish("app", "2", ["main.js": "2"])
        _ = try await fixture.sync([v1])
        try await fixture.updater.launch.confirm(try await fixture.updater.launch.begin().token)
        _ = try await fixture.sync([v2])
        _ = try await fixture.updater.launch.begin()
        _ = try await fixture.updater.launch.begin()  // rolls 2 back
        var snapshot = try await fixture.updater.currentSnapshot()
        let blocked = try #require(snapshot.packages["app"]?.blocked?.first)
        let retryAfter = try #require(blocked.retryAfter)
        #expect(abs(retryAfter.timeIntervalSince(blocked.blockedAt) - 24 * 3600) < 1)
        let manifest = try Manifest(packages: [v2])
        #expect(
            UpdatePlan.make(manifest: manifest, snapshot: snapshot, now: blocked.blockedAt).packages.map(\.change) == [
                .blocked
            ]
        )
        #expect(
            UpdatePlan.make(manifest: manifest, snapshot: snapshot, now: retryAfter.addingTimeInterval(1))
                .packages.map(\.change) == [.update]
        )

        // A second failure of the same version leaves it blocked for good.
        var record = try #require(snapshot.packages["app"])
        record.blocked?[0].retryAfter = Date(timeIntervalSinceNow: -1)
        snapshot.packages["app"] = record
        try await fixture.store.commit(snapshot)
        let again = fixture.relaunched()
        #expect(try await again.apply(manifest).packages.map(\.change) == [.update])
        _ = try await again.launch.begin()
        _ = try await again.launch.begin()
        let final = try #require(try await again.currentSnapshot().packages["app"]?.blocked?.first)
        #expect(final.failures == 2)
        #expect(final.retryAfter == nil)
    }

    @Test("an operator unblocks a version, and the next sync downloads it")
    func unblock() async throws {
        let fixture = try EngineFixture(launch: LaunchPolicy(guarded: ["app"]))
        let v1 = try await fixture.publish("app", "1", ["main.js": "1"])
        _ = try await fixture.sync([v1])
        _ = try await fixture.updater.launch.begin()
        _ = try await fixture.updater.launch.begin()
        await #expect(throws: HotUpdateError(.notFound, "")) {
            try await fixture.updater.launch.unblock(packageID: "app", version: "9")
        }
        try await fixture.updater.launch.unblock(packageID: "app", version: "1")
        #expect(try await fixture.updater.currentSnapshot().packages["app"]?.blocked == nil)
        #expect(try await fixture.sync([v1]).packages.map(\.change) == [.add])
        #expect(await fixture.transport.requestCount(for: v1.url) == 2)
    }

    @Test("immediate timing: active at once, still tried by the next launch; unguarded packages need no trial")
    func immediateTiming() async throws {
        let fixture = try EngineFixture(
            keepPreviousVersions: 0,
            launch: LaunchPolicy(guarded: ["app"], timings: ["app": .immediate, "web": .nextLaunch])
        )
        let app1 = try await fixture.publish("app", "1", ["main.js": "1"])
        let app2 = try await fixture.publish("app", "2", ["main.js": "2"])
        let web1 = try await fixture.publish("web", "1", ["index.html": "1"])
        let images = try await fixture.publish("images", "1", ["a.png": "1"])
        _ = try await fixture.sync([app1, web1, images])
        #expect(try await fixture.updater.installedPackages().map(\.id).sorted() == ["app", "images"])
        let launch = try await fixture.updater.launch.begin()
        #expect(launch.packages.map(\.id).sorted() == ["app", "images", "web"])
        #expect(launch.trials == ["app": "1"])
        try await fixture.updater.launch.confirm(launch.token)
        #expect(try await fixture.currentRecord("web").launch == nil)
        #expect(try await fixture.currentRecord("images").launch == nil)

        // With no previous versions kept, the fallback still stays until the trial is confirmed.
        _ = try await fixture.sync([app2, web1, images])
        #expect(try await fixture.contents(of: "app", "main.js") == "2")
        #expect(try await fixture.currentRecord("app").launch?.phase == .pending)
        _ = try await fixture.updater.collectGarbage()
        #expect(FileManager.default.fileExists(atPath: fixture.url("packages/app/1/main.js").path))
        _ = try await fixture.updater.launch.begin()
        let rolled = try await fixture.updater.launch.begin()
        #expect(rolled.package("app")?.version == "1")
        #expect(try await fixture.contents(of: "app", "main.js") == "1")
    }
}

extension EngineFixture {
    func currentRecord(_ id: String) async throws -> PackageRecord {
        try #require(try await updater.currentSnapshot().packages[id])
    }
}
