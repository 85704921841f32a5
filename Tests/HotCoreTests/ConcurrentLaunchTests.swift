import Foundation
import HotCore
import HotTesting
import Testing

/// Launches that overlap: an app and its extension (two updaters over one root, which lock
/// like two processes) begin while the other still tries a version.
@Suite("Concurrent launches")
struct ConcurrentLaunchTests {
    /// A store with version 1 confirmed and version 2 waiting for the next launch.
    static func waitingStore(
        _ policy: LaunchPolicy = LaunchPolicy(guarded: ["app"]),
        keep: Int = 1
    ) async throws -> EngineFixture {
        let fixture = try EngineFixture(keepPreviousVersions: keep, launch: policy)
        let v1 = try await fixture.publish("app", "1", ["main.js": "1"])
        let v2 = try await fixture.publish("app", "2", ["main.js": "2"])
        _ = try await fixture.sync([v1])
        try await fixture.updater.launch.confirm(try await fixture.updater.launch.begin().token)
        _ = try await fixture.sync([v2])
        #expect(try await fixture.updater.launch.waitsForRestart("app"))
        return fixture
    }

    @Test(
        "a launch that begins while another tries a version joins the trial: nothing is blocked and either may confirm"
    )
    func joinsLiveTrial() async throws {
        let fixture = try await Self.waitingStore()
        let first = try await fixture.updater.launch.begin()
        #expect(first.trials == ["app": "2"])

        let second = fixture.sibling()
        let joined = try await second.launch.begin()
        #expect(joined.rolledBack.isEmpty)
        #expect(joined.package("app")?.version == "2")
        #expect(joined.trials == ["app": "2"])
        var record = try await fixture.currentRecord("app")
        #expect(record.blocked == nil)
        #expect(record.launch?.phase == .trial)
        #expect(record.launch?.tokens == [first.token, joined.token])
        #expect(FileManager.default.fileExists(atPath: fixture.url("packages/app/2/main.js").path))

        // The first launch dies; the second, still running, confirms the version.
        fixture.updater.store.endLaunches()
        #expect(try await second.launch.confirm(joined.token) == ["app"])
        record = try await fixture.currentRecord("app")
        #expect(record.launch?.phase == .confirmed)
        #expect(record.active?.version == "2")

        // The next launch runs it.
        let next = try await fixture.sibling().launch.begin()
        #expect(next.package("app")?.version == "2")
        #expect(next.rolledBack.isEmpty)
    }

    @Test("five launches at once: one tries the version, four join, none blocks it")
    func fiveLaunches() async throws {
        let fixture = try await Self.waitingStore()
        let updaters = (0..<5).map { _ in fixture.sibling() }
        let sessions = try await withThrowingTaskGroup(of: LaunchSession.self) { group in
            for updater in updaters { group.addTask { try await updater.launch.begin() } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(sessions.allSatisfy { $0.package("app")?.version == "2" && $0.rolledBack.isEmpty })
        let record = try await fixture.currentRecord("app")
        #expect(Set(record.launch?.tokens ?? []) == Set(sessions.map(\.token)))
        #expect(record.blocked == nil)
        withExtendedLifetime(updaters) {}
    }

    @Test("with confirmedVersion, a second launch runs the confirmed version while the first tries the new one")
    func confirmedVersionPolicy() async throws {
        let policy = LaunchPolicy(guarded: ["app"], concurrentLaunch: .confirmedVersion)
        let fixture = try await Self.waitingStore(policy)
        let first = try await fixture.updater.launch.begin()
        #expect(first.package("app")?.version == "2")
        let second = fixture.sibling()
        let other = try await second.launch.begin()
        #expect(other.package("app")?.version == "1")
        #expect(other.trials.isEmpty)
        #expect(
            try String(
                contentsOf: try #require(other.package("app")).directory.appendingPathComponent("main.js"),
                encoding: .utf8
            ) == "1"
        )
        // It cannot confirm what it does not run; the first one can.
        #expect(try await second.launch.confirm(other.token).isEmpty)
        #expect(try await fixture.updater.launch.confirm(first.token) == ["app"])
    }

    @Test("a trial whose every launch died is rolled back and blocked, as before")
    func deadOwnerIsRolledBack() async throws {
        let fixture = try await Self.waitingStore()
        let first = try await fixture.updater.launch.begin()
        let joined = try await fixture.sibling().launch.begin()  // released at once: that launch ends
        #expect(joined.trials == ["app": "2"])
        fixture.updater.store.endLaunches()
        let next = try await fixture.sibling().launch.begin()
        #expect(next.rolledBack.map(\.version) == ["2"])
        #expect(next.package("app")?.version == "1")
        #expect(try await fixture.updater.launch.confirm(first.token).isEmpty)
    }

    @Test("a live launch whose confirm window passed is judged failed, but its tree stays until it ends")
    func timedOutTrialKeepsTree() async throws {
        let fixture = try await Self.waitingStore(keep: 0)
        let first = try await fixture.updater.launch.begin()
        #expect(first.package("app")?.version == "2")
        // The second launch gives trials no time at all: the first one's has run out once the
        // clock has moved past its start.
        let begun = Date()
        try await waitUntil("the clock to move past \(begun)", interval: .milliseconds(1)) { Date() > begun }
        let second = fixture.sibling(launch: LaunchPolicy(guarded: ["app"], trialTimeout: 0))
        let next = try await second.launch.begin()
        #expect(next.rolledBack.map(\.version) == ["2"])
        #expect(next.package("app")?.version == "1")
        // The first launch still runs version 2: its tree is retained, not deleted.
        let snapshot = try await fixture.updater.currentSnapshot()
        #expect(snapshot.retained?["app"]?.map(\.version) == ["2"])
        #expect(FileManager.default.fileExists(atPath: fixture.url("packages/app/2/main.js").path))
        // Once it ends, the next change deletes it.
        fixture.updater.store.endLaunches()
        try await second.launch.confirm(next.token)
        #expect(try await fixture.updater.currentSnapshot().retained == nil)
        #expect(!FileManager.default.fileExists(atPath: fixture.url("packages/app/2").path))
    }

    @Test("a version replaced while a live launch runs it keeps its tree until that launch ends")
    func replacedTreeIsRetained() async throws {
        let fixture = try await Self.waitingStore(keep: 0)
        let first = try await fixture.updater.launch.begin()
        try await fixture.updater.launch.confirm(first.token)
        let v3 = try await fixture.publish("app", "3", ["main.js": "3"])
        _ = try await fixture.sync([v3])
        // Another launch takes version 3 and confirms it; with nothing kept, version 2 leaves
        // the records, but the first launch still runs it.
        let second = fixture.sibling()
        let next = try await second.launch.begin()
        #expect(next.package("app")?.version == "3")
        try await second.launch.confirm(next.token)
        #expect(try await fixture.currentRecord("app").keptVersions.map(\.version) == ["3"])
        #expect(try await fixture.updater.currentSnapshot().retained?["app"]?.map(\.version) == ["2"])
        #expect(FileManager.default.fileExists(atPath: fixture.url("packages/app/2/main.js").path))
        // The first launch ends; the next change deletes the tree.
        fixture.updater.store.endLaunches()
        #expect(try await second.apply(try Manifest(packages: [v3])).packages.map(\.change) == [.unchanged])
        #expect(!FileManager.default.fileExists(atPath: fixture.url("packages/app/2").path))
        #expect(try await fixture.updater.currentSnapshot().retained == nil)
    }
}

extension EngineFixture {
    /// Another updater over the same root and parts, running at the same time (an app's
    /// extension): its store locks through its own file descriptions, like another process.
    func sibling(launch: LaunchPolicy? = nil) -> Updater {
        var configuration = updater.configuration
        if let launch { configuration.launch = launch }
        return Updater(configuration: configuration)
    }
}
