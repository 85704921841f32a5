import Foundation
import HotCore
import HotTesting
import Testing

/// An activation hook that records what it was given and refuses the ids it is told to.
actor RecordingActivator: PatchActivator {
    private(set) var activated: [ScriptPatch] = []
    private var refused: Set<String>

    init(refusing refused: Set<String> = []) {
        self.refused = refused
    }

    func refuse(_ ids: Set<String>) {
        refused = ids
    }

    func activate(_ patch: ScriptPatch) async throws {
        activated.append(patch)
        // The hook reads the patch's files, as a script loader would.
        _ = try Data(contentsOf: patch.directory.appendingPathComponent("main.js"))
        if refused.contains(patch.id) {
            throw HotUpdateError(.invalidArgument, "the script does not evaluate", packageID: patch.id)
        }
    }

    var ids: [String] { activated.map(\.id) }
}

@Suite("Script patches")
struct ScriptPatchTests {
    func publishPatch(_ fixture: EngineFixture, _ id: String, _ version: String) async throws -> PackageDescriptor {
        try await fixture.publish(id, version, ["main.js": "console.log('\(id) \(version)')"])
    }

    @Test(
        "at launch every installed patch is activated in the list's order; a failing hook marks only that patch failed"
    )
    func launchActivation() async throws {
        let fixture = try EngineFixture()
        let list = [
            try await publishPatch(fixture, "zeta", "1"), try await publishPatch(fixture, "alpha", "1"),
            try await publishPatch(fixture, "mid", "1"),
        ]
        _ = try await fixture.sync(list)

        let relaunched = fixture.relaunched()
        let activator = RecordingActivator(refusing: ["alpha"])
        let results = await relaunched.patches.activateInstalled(with: activator)
        #expect(await activator.ids == ["zeta", "alpha", "mid"])
        #expect(results.map(\.succeeded) == [true, false, true])
        #expect(results[1].error?.code == .activationFailed)
        #expect(results[1].error?.packageID == "alpha")
        #expect(try await relaunched.state(of: "alpha") == .failed)
        #expect(await fixture.store.snapshot.packages["alpha"]?.lastError?.contains("does not evaluate") == true)
        #expect(try await relaunched.state(of: "zeta") == .installed)
        #expect(try await relaunched.state(of: "mid") == .installed)

        // A sync that leaves the refused version unchanged does not make it look installed.
        _ = try await relaunched.apply(Manifest(packages: list))
        #expect(try await relaunched.state(of: "alpha") == .failed)
        #expect(await fixture.store.snapshot.packages["alpha"]?.lastErrorCode == "activationFailed")
        #expect(try await relaunched.state(of: "zeta") == .installed)

        // Fixed on the app's side: accepted at the next launch, installed again.
        await activator.refuse([])
        let again = await fixture.relaunched().patches.activateInstalled(with: activator)
        #expect(again.allSatisfy { $0.succeeded })
        #expect(await fixture.store.snapshot.packages["alpha"]?.state == .installed)
        #expect(await fixture.store.snapshot.packages["alpha"]?.lastError == nil)
    }

    @Test("after a sync only the patches it added or updated are activated, in the list's order")
    func syncActivation() async throws {
        let fixture = try EngineFixture()
        let a = try await publishPatch(fixture, "a", "1")
        let b1 = try await publishPatch(fixture, "b", "1")
        _ = try await fixture.sync([a, b1])

        let c = try await publishPatch(fixture, "c", "1")
        let b2 = try await publishPatch(fixture, "b", "2")
        let activator = RecordingActivator()
        let source = FakeManifestSource(manifest: try Manifest(packages: [c, a, b2]))
        let (report, activations) = try await fixture.updater.patches.sync(from: source, activator: activator)
        #expect(report.failures.isEmpty)
        #expect(activations.map(\.id) == ["c", "b"])
        #expect(await activator.activated.map(\.version) == ["1", "2"])
        #expect(await activator.activated.allSatisfy { !$0.isLocal })
    }

    @Test("a local debug patch installs from a folder with no server, shares objects, and is activated")
    func localPatch() async throws {
        let fixture = try EngineFixture()
        _ = try await fixture.sync([try await fixture.publish("remote", "1", ["lib.js": "shared library"])])
        let folder = fixture.root.deletingLastPathComponent().appendingPathComponent("debug-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: folder.appendingPathComponent("lib"),
            withIntermediateDirectories: true
        )
        try Data("console.log('debug')".utf8).write(to: folder.appendingPathComponent("main.js"))
        try Data("shared library".utf8).write(to: folder.appendingPathComponent("lib/lib.js"))
        defer { try? FileManager.default.removeItem(at: folder) }

        let installed = try await fixture.updater.patches.installLocal(from: folder, id: "debug", version: "local-1")
        #expect(installed.version == "local-1")
        #expect(
            try String(contentsOf: installed.directory.appendingPathComponent("lib/lib.js"), encoding: .utf8)
                == "shared library"
        )
        #expect(fixture.objectNames().count == 2)  // lib.js is stored once for both packages
        #expect(await fixture.transport.receivedRequests.count == 1)  // only the remote package's

        let activator = RecordingActivator()
        let results = await fixture.updater.patches.activateInstalled(with: activator)
        // "remote" has no main.js: its hook fails; "debug" is activated all the same.
        #expect(results.map(\.id) == ["remote", "debug"])
        #expect(results.map(\.succeeded) == [false, true])
        #expect(await activator.activated.first { $0.id == "debug" }?.isLocal == true)

        // Edited and reinstalled: a new version; the files are checked and repaired like any other.
        try Data("console.log('debug 2')".utf8).write(to: folder.appendingPathComponent("main.js"))
        let second = try await fixture.updater.patches.installLocal(from: folder, id: "debug", version: "local-2")
        #expect(
            try String(contentsOf: second.directory.appendingPathComponent("main.js"), encoding: .utf8)
                == "console.log('debug 2')"
        )
        try FileManager.default.removeItem(at: second.directory.appendingPathComponent("lib/lib.js"))
        #expect(try await fixture.updater.health.repair(packageID: "debug").restored == ["lib/lib.js"])

        // A symbolic link in the folder is refused, and the installed version stays.
        try FileManager.default.createSymbolicLink(
            at: folder.appendingPathComponent("escape"),
            withDestinationURL: URL(fileURLWithPath: "/etc")
        )
        await #expect(throws: HotUpdateError(.unsafeEntry, "")) {
            try await fixture.updater.patches.installLocal(from: folder, id: "debug", version: "local-3")
        }
        #expect(try await fixture.updater.installedPackages().first { $0.id == "debug" }?.version == "local-2")
        #expect(fixture.stagingIsEmpty())
    }
}
