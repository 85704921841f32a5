import Foundation
import HotCore
import HotTesting
import Testing

/// Files lost between launches (a cleaner app, a restore from backup, a disk error): a plain
/// sync notices, with one stat per package, and heals; a launch does not hand out a tree that
/// is gone.
@Suite("Healing lost trees")
struct SelfHealTests {
    @Test("a deleted tree is put back from the objects by the next plain sync, with no download")
    func healsFromObjects() async throws {
        let fixture = try EngineFixture()
        let v1 = try await fixture.publish("pack", "1", ["a.txt": "one", "sub/b.txt": "two"])
        #expect(try await fixture.sync([v1]).packages.map(\.change) == [.add])
        let tree = try #require(try await fixture.directory(of: "pack"))
        try FileManager.default.removeItem(at: tree)

        let report = try await fixture.sync([v1])
        #expect(report.packages.map(\.change) == [.heal])
        #expect(report.packages.first?.error == nil)
        #expect(await fixture.transport.requestCount(for: v1.url) == 1)
        #expect(try await fixture.contents(of: "pack", "a.txt") == "one")
        #expect(try await fixture.contents(of: "pack", "sub/b.txt") == "two")
        #expect(try await fixture.currentRecord("pack").state == .installed)
        // Whole again: the next sync has nothing to do.
        #expect(try await fixture.sync([v1]).packages.map(\.change) == [.unchanged])
    }

    @Test("a deleted tree whose objects are gone too is downloaded again by the next plain sync")
    func healsByDownloading() async throws {
        let fixture = try EngineFixture()
        let v1 = try await fixture.publish("pack", "1", ["a.txt": "one"])
        _ = try await fixture.sync([v1])
        let tree = try #require(try await fixture.directory(of: "pack"))
        try FileManager.default.removeItem(at: tree)
        try FileManager.default.removeItem(at: fixture.url("objects"))

        let report = try await fixture.sync([v1])
        #expect(report.packages.map(\.change) == [.heal])
        #expect(report.packages.first?.error == nil)
        #expect(await fixture.transport.requestCount(for: v1.url) == 2)
        #expect(try await fixture.contents(of: "pack", "a.txt") == "one")
        #expect(try await fixture.sync([v1]).packages.map(\.change) == [.unchanged])
    }

    @Test("two deleted files are put back by the next sync once a check recorded them missing")
    func healsRecordedDamage() async throws {
        let fixture = try EngineFixture()
        let v1 = try await fixture.publish("pack", "1", ["a.txt": "one", "b.txt": "two", "c.txt": "three"])
        _ = try await fixture.sync([v1])
        let tree = try #require(try await fixture.directory(of: "pack"))
        try FileManager.default.removeItem(at: tree.appendingPathComponent("a.txt"))
        try FileManager.default.removeItem(at: tree.appendingPathComponent("b.txt"))
        #expect(try await fixture.updater.health.verifyAll().map(\.state) == [.fileMissing])
        let report = try await fixture.sync([v1])
        #expect(report.packages.map(\.change) == [.heal])
        #expect(try await fixture.contents(of: "pack", "a.txt") == "one")
        #expect(try await fixture.contents(of: "pack", "b.txt") == "two")
        #expect(try await fixture.currentRecord("pack").state == .installed)
    }

    @Test("a launch does not hand out a tree that is gone; the sync after it heals the package")
    func launchSkipsLostTree() async throws {
        let fixture = try EngineFixture(launch: LaunchPolicy(guarded: ["app"]))
        let v1 = try await fixture.publish("app", "1", ["main.js": "1"])
        _ = try await fixture.sync([v1])
        try await fixture.updater.launch.confirm(try await fixture.updater.launch.begin().token)
        let tree = try #require(try await fixture.directory(of: "app"))
        try FileManager.default.removeItem(at: tree)
        let launch = try await fixture.updater.launch.begin()
        #expect(launch.package("app") == nil)
        #expect(try await fixture.sync([v1]).packages.map(\.change) == [.heal])
        let next = try await fixture.relaunched().launch.begin()
        #expect(next.package("app")?.version == "1")
    }

    @Test(
        "the quick check puts back another package's lost object and leaves out the trees its own sync wrote"
    )
    func quickCheckSkipsWhatItWrote() async throws {
        let fixture = try EngineFixture()
        let a1 = try await fixture.publish("a", "1", ["a.txt": "alpha"])
        _ = try await fixture.sync([a1])
        // An object of a, deleted; the check is due again.
        let lost = try #require(fixture.objectNames().first)
        try FileManager.default.removeItem(at: fixture.url("objects/\(lost)"))
        try FileManager.default.removeItem(at: fixture.url("losses/.quick-check"))

        // The sync that installs b checks a (unchanged) and puts its object back from its tree.
        let b1 = try await fixture.publish("b", "1", ["b.txt": "beta"])
        let report = try await fixture.sync([a1, b1])
        #expect(report.packages.map(\.change) == [.unchanged, .add])
        #expect(fixture.objectNames().contains(lost))
        #expect(FileManager.default.fileExists(atPath: fixture.url("losses/.quick-check").path))

        // The trees a caller names as just written are not looked at; the others are.
        let b = try #require(try await fixture.updater.store.read().packages["b"]?.active?.path)
        let bObject = try #require(fixture.objectNames().first { $0 != lost })
        try FileManager.default.removeItem(at: fixture.url("objects/\(bObject)"))
        #expect(try await fixture.updater.store.restoreLostObjects(skipping: [b]) == 0)
        #expect(!fixture.objectNames().contains(bObject))
        #expect(try await fixture.updater.store.restoreLostObjects() == 1)
        #expect(fixture.objectNames().contains(bObject))
    }
}
