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

/// Each test is one finding of the store review, written so that it fails on the engine
/// before the ledger and passes after.
@Suite("Store findings")
struct StoreFindingsTests {
    /// Waits until `condition` holds (polling; the condition is the event, not the time).
    static func waitUntil(_ what: String, _ condition: () async throws -> Bool) async throws {
        for _ in 0..<4_000 {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("never happened: \(what)")
    }

    @Test("a repair that re-downloads does not write the old version into a newer one installed meanwhile")
    func repairIntoNewerVersion() async throws {
        let fixture = try EngineFixture()
        let v1 = try await fixture.publish("p", "1", ["a.png": "alpha", "b.png": "beta"])
        _ = try await fixture.sync([v1])
        // Damage a.png through its link, so the object is damaged too and only a download helps.
        let a = fixture.url("packages/p/1/a.png")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: a.path)
        try Data("ALPHA".utf8).write(to: a, options: [])
        await fixture.transport.hold(try FakeArchive.make(["a.png": "alpha", "b.png": "beta"]), at: v1.url, deliver: 3)

        let updater = fixture.updater
        let repair = Task { try await updater.health.repair(packageID: "p") }
        try await SingleFlightTests.waitUntilHeld(fixture, v1.url)
        let v2 = try await fixture.publish("p", "2", ["a.png": "two", "c.png": "sea"])
        #expect(try await updater.install(v2).version == "2")
        await fixture.transport.release(v1.url)
        let report = try await repair.value

        #expect(report.refetched == false)
        #expect(report.error?.code == .superseded)
        #expect(report.after.version == "2")
        #expect(report.after.isHealthy)
        #expect(try await fixture.contents(of: "p", "a.png") == "two")
        #expect(try await fixture.contents(of: "p", "b.png") == nil)
        let package = try #require(try await updater.installedPackages().first)
        #expect(try await updater.fileList(of: package).files.map(\.path).sorted() == ["a.png", "c.png"])
        #expect(try await updater.health.verify(packageID: "p", depth: .full).isHealthy)
        #expect(fixture.stagingIsEmpty())
    }

    @Test("two versions of one package staged for one group commit leave one whole active tree")
    func twoVersionsInOneGroup() async throws {
        let gated = GatedStore()
        let fixture = try EngineFixture(keepPreviousVersions: 1, store: FakeMetadataStore())
        let updater = Updater(
            configuration: {
                var configuration = fixture.updater.configuration
                configuration.store = gated
                return configuration
            }()
        )
        func install(_ descriptor: PackageDescriptor) async throws -> InstalledPackage {
            try await updater.install(descriptor)
        }
        let v4 = try await fixture.publish("p", "4", ["a.png": "four"])
        let v5 = try await fixture.publish("p", "5", ["a.png": "five"])
        _ = try await install(v4)
        _ = try await install(v5)

        // Keep the store busy with another package's commit while v6 and then v4 are staged.
        await gated.closeGate()
        let other = try await fixture.publish("other", "1", ["o.txt": "o"])
        let blocker = Task { try await install(other) }
        try await Self.waitUntil("the other commit waits") { await gated.waiting }
        let v6 = try await fixture.publish("p", "6", ["a.png": "six"])
        let six = Task { try await install(v6) }
        try await Self.waitUntil("v6 is staged") { await updater.pendingInstallCount == 1 }
        let four = Task { try await install(v4) }
        try await Self.waitUntil("v4 is staged too") { await updater.pendingInstallCount == 2 }
        await gated.openGate()
        _ = try await blocker.value

        // The newest request wins; the other is told so; the active tree is whole.
        #expect(try await four.value.version == "4")
        await #expect(throws: HotUpdateError(.superseded, "")) { try await six.value }
        let active = try #require(try await updater.installedPackages().first { $0.id == "p" })
        #expect(active.version == "4")
        #expect(try String(contentsOf: active.directory.appendingPathComponent("a.png"), encoding: .utf8) == "four")
        #expect(try await updater.health.verify(packageID: "p", depth: .full).isHealthy)
        let record = try #require(try await updater.currentSnapshot().packages["p"])
        for version in [record.active].compactMap({ $0 }) + record.previous {
            #expect(FileManager.default.fileExists(atPath: fixture.url(version.path).path), "\(version.path)")
        }
    }

    @Test(
        "an older flight that finishes last does not replace a newer install, and equal bytes do not make v6 report 5"
    )
    func olderFlightFinishingLast() async throws {
        let fixture = try EngineFixture()
        let updater = fixture.updater
        let v5 = try await fixture.publish("p", "5", ["a.png": "same"])
        await fixture.transport.hold(try FakeArchive.make(["a.png": "same"]), at: v5.url, deliver: 3)
        let five = Task { try await updater.install(v5) }
        try await SingleFlightTests.waitUntilHeld(fixture, v5.url)

        // v6 has the very same bytes, served from elsewhere: its own flight, its own version.
        var v6 = v5
        v6.version = "6"
        v6.url = try #require(URL(string: "https://cdn.test/p-6.zip"))
        await fixture.transport.serve(try FakeArchive.make(["a.png": "same"]), at: v6.url)
        #expect(try await updater.install(v6).version == "6")

        await fixture.transport.release(v5.url)
        await #expect(throws: HotUpdateError(.superseded, "")) { try await five.value }
        #expect(try await updater.installedPackages().map(\.version) == ["6"])
        #expect(try await updater.currentSnapshot().packages["p"]?.active?.version == "6")
    }

    @Test("a failure after the files became objects and before the rename leaves no object behind")
    func failureBetweenAdoptAndRename() async throws {
        let fixture = try EngineFixture()
        _ = try await fixture.sync([try await fixture.publish("q", "1", ["q.txt": "q"])])
        let before = fixture.objectNames()
        // packages/p is a file: the tree cannot be moved into place after its files were adopted.
        try Data("in the way".utf8).write(to: fixture.url("packages/p"))
        let p = try await fixture.publish("p", "1", ["x.txt": "ex", "y.txt": "why"])
        await #expect(throws: HotUpdateError.self) { try await fixture.updater.install(p) }
        #expect(fixture.objectNames() == before)
        #expect(fixture.stagingIsEmpty())
        #expect(!FileManager.default.fileExists(atPath: fixture.url("filelists/p/1.files").path))
    }

    @Test("a commit whose new snapshot is in place when it reports an error keeps the trees it recorded")
    func commitLandedDespiteError() async throws {
        let store = LandsThenFailsStore(failWhen: { $0.packages["p"]?.active?.version == "2" })
        let fixture = try EngineFixture()
        let updater = Updater(
            configuration: {
                var configuration = fixture.updater.configuration
                configuration.store = store
                return configuration
            }()
        )
        let v1 = try await fixture.publish("p", "1", ["a.png": "one"])
        _ = try await updater.apply(Manifest(packages: [v1]))
        let v2 = try await fixture.publish("p", "2", ["a.png": "two"])
        _ = try await updater.apply(Manifest(packages: [v2]))

        #expect(await store.failures == 1)
        let recorded = try #require(await store.snapshot.packages["p"]?.active)
        #expect(recorded.version == "2")
        #expect(FileManager.default.fileExists(atPath: fixture.url(recorded.path).path))
        let relaunched = Updater(configuration: updater.configuration)
        #expect(try await relaunched.health.verify(packageID: "p", depth: .full).isHealthy)
        #expect(try await relaunched.installedPackages().map(\.version) == ["2"])
    }

    @Test("syncDirectory reports a failed fsync")
    func syncDirectoryChecksFsync() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sync-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(throws: HotUpdateError(.fileSystem, "")) {
            try FileSystem.syncDirectory(directory) { _ in
                errno = EIO
                return -1
            }
        }
        // A file system that cannot sync a directory is accepted.
        try FileSystem.syncDirectory(directory) { _ in
            errno = EINVAL
            return -1
        }
        try FileSystem.syncDirectory(directory)
    }

    @Test("reading a store that does not exist creates nothing")
    func readingCreatesNothing() async throws {
        let root = ScratchDirectory.parentDirectory.appendingPathComponent("absent-\(UUID().uuidString)")
        let updater = Updater(
            configuration: UpdaterConfiguration(
                root: root,
                transport: FakeTransport(),
                unarchiver: FakeUnarchiver(),
                verifier: FakeVerifier(),
                store: FakeMetadataStore()
            )
        )
        #expect(try await updater.installedPackages().isEmpty)
        #expect(try await updater.health.verifyAll(recording: false).isEmpty)
        #expect(try await updater.state(of: "x") == nil)
        #expect(await updater.health.isAvailable("x") == false)
        #expect(!FileManager.default.fileExists(atPath: root.path))
    }

    @Test("two updaters over one root never write back a stale snapshot")
    func twoUpdatersOneRoot() async throws {
        let fixture = try EngineFixture()
        let other = fixture.relaunched()
        let a = try await fixture.publish("a", "1", ["a.txt": "a"])
        let b = try await fixture.publish("b", "1", ["b.txt": "b"])
        _ = try await fixture.updater.install(a)
        #expect(try await other.installedPackages().map(\.id) == ["a"])  // other has read the store
        _ = try await other.install(b)
        _ = try await fixture.updater.remove(packageID: "a")  // from a snapshot read before b
        let snapshot = try await fixture.relaunched().currentSnapshot()
        #expect(snapshot.packages.keys.sorted() == ["b"])
        #expect(try await other.installedPackages().map(\.id) == ["b"])
        #expect(try await other.health.verify(packageID: "b").isHealthy)
    }
}

/// A metadata store whose commits wait while its gate is closed.
actor GatedStore: MetadataStore {
    private let inner = FakeMetadataStore()
    private var closed = false
    private(set) var waiting = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func closeGate() { closed = true }

    func openGate() {
        closed = false
        for waiter in waiters { waiter.resume() }
        waiters = []
    }

    func load() async throws -> StoreSnapshot { try await inner.load() }

    func commit(_ snapshot: StoreSnapshot) async throws {
        if closed {
            waiting = true
            await withCheckedContinuation { waiters.append($0) }
            waiting = false
        }
        try await inner.commit(snapshot)
    }
}

/// A metadata store whose commit puts the new snapshot in place and then throws, once, for
/// the first snapshot `failWhen` picks: a failed fsync of the directory after the rename.
actor LandsThenFailsStore: MetadataStore {
    private let inner = FakeMetadataStore()
    private let failWhen: @Sendable (StoreSnapshot) -> Bool
    private(set) var failures = 0

    init(failWhen: @escaping @Sendable (StoreSnapshot) -> Bool) {
        self.failWhen = failWhen
    }

    var snapshot: StoreSnapshot { get async { await inner.snapshot } }

    func load() async throws -> StoreSnapshot { try await inner.load() }

    func commit(_ snapshot: StoreSnapshot) async throws {
        try await inner.commit(snapshot)
        if failures == 0, failWhen(snapshot) {
            failures += 1
            throw HotUpdateError(
                .fileSystem,
                "the new content is in place but its directory cannot be fsynced (injected)"
            )
        }
    }
}
