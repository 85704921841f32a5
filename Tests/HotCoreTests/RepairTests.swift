import Foundation
import HotCore
import HotTesting
import Testing

@Suite("Availability and repair")
struct RepairTests {
    @Test("isAvailable answers for packages and for resources in them")
    func availability() async throws {
        let fixture = try EngineFixture()
        _ = try await fixture.sync([try await fixture.publish("fonts", "1", ["Brand.ttf": "font", "x/y.otf": "o"])])
        let updater = fixture.updater
        #expect(await updater.health.isAvailable("fonts"))
        #expect(await updater.health.isAvailable(resource: "x/y.otf", in: "fonts"))
        #expect(await updater.health.isAvailable(resource: "nope.ttf", in: "fonts") == false)
        #expect(await updater.health.isAvailable("unknown") == false)
        #expect(await updater.health.isAvailable(resource: "Brand.ttf", in: "unknown") == false)
    }

    @Test(
        "at the next launch a missing file is found when used or checked, and the package is unavailable until it is restored from objects, offline"
    )
    func launchCheckAndOfflineRepair() async throws {
        let fixture = try EngineFixture()
        let offered = try await fixture.publish("fonts", "1", ["Brand.ttf": "font", "x/y.otf": "o"])
        _ = try await fixture.sync([offered])
        try FileManager.default.removeItem(at: fixture.url("packages/fonts/1/x"))
        await fixture.transport.remove(offered.url)  // no network from here on

        let relaunched = fixture.relaunched()
        // The launch check looks at the stored state and the tree, not at every file; the
        // file is checked when it is used, and the full check finds it.
        #expect(await relaunched.health.isAvailable("fonts"))
        #expect(await relaunched.health.isAvailable(resource: "x/y.otf", in: "fonts") == false)
        #expect(try await relaunched.health.verify(packageID: "fonts", depth: .quick).missing == ["x/y.otf"])
        #expect(await relaunched.health.isAvailable("fonts") == false)
        #expect(try await relaunched.state(of: "fonts") == .fileMissing)
        let report = try await relaunched.health.repair(packageID: "fonts", depth: .quick)
        #expect(report.restored == ["x/y.otf"])
        #expect(report.refetched == false)
        #expect(report.succeeded)
        #expect(await relaunched.health.isAvailable(resource: "x/y.otf", in: "fonts"))
        #expect(try String(contentsOf: fixture.url("packages/fonts/1/x/y.otf"), encoding: .utf8) == "o")
        #expect(await fixture.transport.requestCount(for: offered.url) == 1)
    }

    @Test("a file damaged through its object is re-fetched; with no network the repair says why and the state stays")
    func refetch() async throws {
        let fixture = try EngineFixture()
        let offered = try await fixture.publish("p", "1", ["a.png": "alpha", "b.png": "beta"])
        _ = try await fixture.sync([offered])
        // Write through the link: the object, being the same file, is damaged too.
        let a = fixture.url("packages/p/1/a.png")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: a.path)
        try Data("ALPHA".utf8).write(to: a, options: [])
        #expect(try await fixture.updater.health.verify(packageID: "p").damaged == ["a.png"])

        let body = try FakeArchive.make(["a.png": "alpha", "b.png": "beta"])
        await fixture.transport.fail(offered.url, with: HotUpdateError(.transportFailed, "offline"))
        let offline = try await fixture.updater.health.repair(packageID: "p")
        #expect(offline.succeeded == false)
        #expect(offline.error?.code == .transportFailed)
        #expect(try await fixture.updater.state(of: "p") == .digestMismatch)
        #expect(await fixture.updater.health.isAvailable("p") == false)

        await fixture.transport.serve(body, at: offered.url)
        let online = try await fixture.updater.health.repair(packageID: "p")
        #expect(online.refetched)
        #expect(online.succeeded)
        #expect(try await fixture.contents(of: "p", "a.png") == "alpha")
        #expect(try await fixture.updater.state(of: "p") == .installed)
        #expect(try await fixture.updater.health.verifyAll(depth: .full).allSatisfy(\.isHealthy))
        #expect(fixture.stagingIsEmpty())
    }
}
