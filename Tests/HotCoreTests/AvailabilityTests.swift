import Foundation
import HotCore
import HotTesting
import Testing

@Suite("Disable and enable with fakes")
struct AvailabilityTests {
    @Test("disabling keeps the files and stops resolving; enabling the same version downloads nothing")
    func disableThenEnable() async throws {
        let fixture = try EngineFixture()
        let images = try await fixture.publish("images", "1", ["a.png": "1"])
        _ = try await fixture.sync([images])
        let tree = try fixture.tree().filter { $0.key.hasPrefix("/packages/") }

        let disabled = try await fixture.updater.apply(Manifest(packages: [], disabledPackageIDs: ["images"]))
        #expect(disabled.packages.map(\.change) == [.disable])
        #expect(disabled.packages.first?.activeVersion == "1")
        #expect(try await fixture.updater.installedPackages().isEmpty)
        #expect(await fixture.store.snapshot.packages["images"]?.state == .disabled)
        #expect(try fixture.tree().filter { $0.key.hasPrefix("/packages/") } == tree)

        // Disabled again: nothing to do, nothing committed.
        let commits = await fixture.store.commitCount
        let again = try await fixture.updater.apply(Manifest(packages: [], disabledPackageIDs: ["images"]))
        #expect(again.packages.map(\.change) == [.unchanged])
        #expect(await fixture.store.commitCount == commits)

        let enabled = try await fixture.sync([images])
        #expect(enabled.packages.map(\.change) == [.enable])
        #expect(try await fixture.contents(of: "images", "a.png") == "1")
        #expect(await fixture.transport.requestCount(for: images.url) == 1)
    }

    @Test("a disabled package offered at another version is updated and active again")
    func disabledThenNewVersion() async throws {
        let fixture = try EngineFixture()
        let v1 = try await fixture.publish("images", "1", ["a.png": "1"])
        let v2 = try await fixture.publish("images", "2", ["a.png": "2"])
        _ = try await fixture.sync([v1])
        _ = try await fixture.updater.apply(Manifest(packages: [], disabledPackageIDs: ["images"]))
        let report = try await fixture.sync([v2])
        #expect(report.packages.map(\.change) == [.update])
        #expect(try await fixture.contents(of: "images", "a.png") == "2")
        #expect(await fixture.store.snapshot.packages["images"]?.state == .installed)
    }

    @Test("a package disabled before it was ever installed is not installed; a disabled id is not removed")
    func disabledNotInstalled() async throws {
        let fixture = try EngineFixture()
        let plan = try await fixture.updater.plan(for: Manifest(packages: [], disabledPackageIDs: ["never"]))
        #expect(plan.packages.isEmpty)
        #expect(throws: HotUpdateError(.manifestInvalid, "")) {
            try Manifest(
                packages: [try PackageDescriptor(id: "a", version: "1", url: URL(fileURLWithPath: "/a"))],
                disabledPackageIDs: ["a"]
            )
        }
    }
}
