import Foundation
import HotCore
import HotTesting
import Testing

@Suite("Updater with fakes")
struct UpdaterTests {
    @Test("a new package is downloaded, unpacked and recorded with a relative path")
    func freshInstall() async throws {
        let fixture = try EngineFixture()
        let images = try await fixture.publish("images", "1", ["sub/sample@3x.png": "v1-3x", "a.json": "{}"])
        let report = try await fixture.sync([images])

        #expect(report.failures.isEmpty)
        #expect(report.packages.map(\.change) == [.add])
        #expect(try await fixture.contents(of: "images", "sub/sample@3x.png") == "v1-3x")
        let record = try #require(await fixture.store.snapshot.packages["images"])
        #expect(record.state == .installed)
        #expect(record.active?.path == "packages/images/1")
        #expect(record.active?.sha256 == images.sha256?.hex)
        #expect(fixture.stagingIsEmpty())
    }

    @Test("a second sync with nothing new downloads nothing and commits nothing")
    func secondSyncIsQuiet() async throws {
        let fixture = try EngineFixture()
        let images = try await fixture.publish("images", "1", ["a.png": "1"])
        _ = try await fixture.sync([images])
        let commits = await fixture.store.commitCount

        let report = try await fixture.sync([images])
        #expect(report.packages.map(\.change) == [.unchanged])
        #expect(report.bytesDownloaded == 0)
        #expect(await fixture.transport.requestCount(for: images.url) == 1)
        #expect(await fixture.store.commitCount == commits)
    }

    @Test("an update keeps one previous version for rollback and drops older ones")
    func updateKeepsPrevious() async throws {
        let fixture = try EngineFixture(keepPreviousVersions: 1)
        let v1 = try await fixture.publish("images", "1", ["a.png": "1"])
        let v2 = try await fixture.publish("images", "2", ["a.png": "2"])
        let v3 = try await fixture.publish("images", "3", ["a.png": "3"])
        _ = try await fixture.sync([v1])
        _ = try await fixture.sync([v2])
        #expect(try await fixture.contents(of: "images", "a.png") == "2")
        var record = try #require(await fixture.store.snapshot.packages["images"])
        #expect(record.previous.map(\.version) == ["1"])
        #expect(
            FileManager.default.fileExists(atPath: fixture.root.appendingPathComponent("packages/images/1/a.png").path)
        )

        _ = try await fixture.sync([v3])
        record = try #require(await fixture.store.snapshot.packages["images"])
        #expect(record.previous.map(\.version) == ["2"])
        #expect(!FileManager.default.fileExists(atPath: fixture.root.appendingPathComponent("packages/images/1").path))

        try await fixture.updater.rollback(packageID: "images")
        #expect(try await fixture.contents(of: "images", "a.png") == "2")
        record = try #require(await fixture.store.snapshot.packages["images"])
        #expect(record.active?.version == "2")
        #expect(record.previous.map(\.version) == ["3"])
    }

    @Test("a manifest offering the kept previous version restores it without a download")
    func serverRollbackRestoresKeptVersion() async throws {
        let fixture = try EngineFixture(keepPreviousVersions: 1)
        let v1 = try await fixture.publish("images", "1", ["a.png": "1"])
        let v2 = try await fixture.publish("images", "2", ["a.png": "2"])
        _ = try await fixture.sync([v1])
        _ = try await fixture.sync([v2])
        #expect(await fixture.transport.requestCount(for: v1.url) == 1)

        let plan = try await fixture.updater.plan(for: Manifest(packages: [v1]))
        #expect(plan.packages.map(\.change) == [.restore])
        let report = try await fixture.sync([v1])
        #expect(report.packages.map(\.change) == [.restore])
        #expect(report.failures.isEmpty)
        #expect(await fixture.transport.requestCount(for: v1.url) == 1)
        #expect(try await fixture.contents(of: "images", "a.png") == "1")
        let record = try #require(await fixture.store.snapshot.packages["images"])
        #expect(record.active?.version == "1")
        #expect(record.previous.map(\.version) == ["2"])
        #expect(record.state == .installed)

        // Forward again: version 2 is the kept one now, so it too comes back from disk.
        _ = try await fixture.sync([v2])
        #expect(await fixture.transport.requestCount(for: v2.url) == 1)
        #expect(try await fixture.contents(of: "images", "a.png") == "2")
    }

    @Test("a kept version whose tree is gone is downloaded again instead of restored")
    func serverRollbackToMissingTreeDownloads() async throws {
        let fixture = try EngineFixture(keepPreviousVersions: 1)
        let v1 = try await fixture.publish("images", "1", ["a.png": "1"])
        let v2 = try await fixture.publish("images", "2", ["a.png": "2"])
        _ = try await fixture.sync([v1])
        _ = try await fixture.sync([v2])
        let kept = try #require(await fixture.store.snapshot.packages["images"]?.previous.first)
        try FileManager.default.removeItem(at: fixture.root.appendingPathComponent(kept.path))

        let report = try await fixture.sync([v1])
        #expect(report.failures.isEmpty)
        #expect(await fixture.transport.requestCount(for: v1.url) == 2)
        #expect(try await fixture.contents(of: "images", "a.png") == "1")
        #expect(try #require(await fixture.store.snapshot.packages["images"]).active?.version == "1")
    }

    @Test("a failed update leaves the previous version active and every byte intact", arguments: FailureKind.allCases)
    func failureKeepsPrevious(kind: FailureKind) async throws {
        let fixture = try EngineFixture()
        let v1 = try await fixture.publish("images", "1", ["a.png": "one", "sub/b.png": "bee"])
        _ = try await fixture.sync([v1])
        // The store file and the name index (one per generation) change with the failure's record,
        // and the catalog with the manifest that offered v2.
        let unchanged: (String) -> Bool = {
            !$0.hasPrefix("/store") && !$0.hasPrefix("/index") && $0 != "/catalog.json"
        }
        let before = try fixture.tree().filter { unchanged($0.key) }

        let v2 = try await fixture.publish("images", "2", ["a.png": "two"])
        let offered = try await kind.sabotage(v2, fixture)
        let report = try await fixture.sync([offered])

        let failure = try #require(report.failures.first)
        #expect(failure.error?.code == kind.expectedCode)
        #expect(failure.error?.packageID == "images")
        #expect(failure.activeVersion == "1")
        #expect(try await fixture.contents(of: "images", "a.png") == "one")
        #expect(try fixture.tree().filter { unchanged($0.key) } == before)
        let record = try #require(await fixture.store.snapshot.packages["images"])
        #expect(record.state == kind.expectedState)
        #expect(record.active?.version == "1")
        #expect(fixture.stagingIsEmpty())
    }

    enum FailureKind: String, CaseIterable, Sendable {
        case digestMismatch, notFound, truncated, corruptArchive, oversize, connectionFailure, fullDiskOnCommit

        var expectedCode: HotUpdateError.Code {
            switch self {
            case .digestMismatch: .digestMismatch
            case .notFound: .httpStatus
            case .truncated: .truncated
            case .corruptArchive: .notAnArchive
            case .oversize: .sizeMismatch
            case .connectionFailure: .transportFailed
            case .fullDiskOnCommit: .fileSystem
            }
        }

        /// A full disk also fails the commit that would record the failure.
        var expectedState: PackageState { self == .fullDiskOnCommit ? .installed : .failed }

        func sabotage(_ offered: PackageDescriptor, _ fixture: EngineFixture) async throws -> PackageDescriptor {
            var offered = offered
            switch self {
            case .digestMismatch:
                await fixture.transport.serve(try FakeArchive.make(["a.png": "evil"]), at: offered.url)
                offered.size = Int64(try FakeArchive.make(["a.png": "evil"]).count)
            case .notFound:
                await fixture.transport.remove(offered.url)
            case .truncated:
                let body = try FakeArchive.make(["a.png": "two"])
                await fixture.transport.reply(
                    .truncated(body: body, deliver: 5, error: HotUpdateError(.truncated, "connection closed early")),
                    at: offered.url
                )
            case .corruptArchive:
                let garbage = Data("this is not an archive".utf8)
                await fixture.transport.serve(garbage, at: offered.url)
                offered.size = Int64(garbage.count)
                offered.sha256 = try fixture.verifier.digest(of: garbage, using: .sha256)
            case .oversize:
                offered.size = (offered.size ?? 0) - 3
            case .connectionFailure:
                await fixture.transport.fail(offered.url, with: HotUpdateError(.transportFailed, "connection refused"))
            case .fullDiskOnCommit:
                // The planned state, the install and the failure: a full disk refuses all three.
                await fixture.store.failNextCommits(3)
            }
            return offered
        }
    }

    @Test("a package the manifest no longer lists is removed with its files")
    func removal() async throws {
        let fixture = try EngineFixture()
        let images = try await fixture.publish("images", "1", ["a.png": "1"])
        let fonts = try await fixture.publish("fonts", "1", ["f.ttf": "font"])
        _ = try await fixture.sync([images, fonts])
        let report = try await fixture.sync([fonts])

        #expect(report.packages.map(\.change) == [.unchanged, .remove])
        #expect(try await fixture.updater.installedPackages().map(\.id) == ["fonts"])
        #expect(!FileManager.default.fileExists(atPath: fixture.root.appendingPathComponent("packages/images").path))
    }

    @Test("an empty package replaces what the old one provided")
    func emptyPackage() async throws {
        let fixture = try EngineFixture()
        _ = try await fixture.sync([try await fixture.publish("patch", "1", ["a.png": "1"])])
        _ = try await fixture.sync([try await fixture.publish("patch", "2", [:])])
        #expect(try await fixture.contents(of: "patch", "a.png") == nil)
        #expect(try await fixture.updater.installedPackages().map(\.version) == ["2"])
    }

    @Test("MD5-only packages (old servers) install and compare by MD5")
    func md5Only() async throws {
        let fixture = try EngineFixture()
        let patch = try await fixture.publish("patch", "abc", ["a.png": "1"], md5Only: true)
        #expect(try await fixture.sync([patch]).failures.isEmpty)
        #expect(try await fixture.sync([patch]).packages.map(\.change) == [.unchanged])
        var bad = patch
        bad.version = "def"
        bad.md5 = try Digest(algorithm: .md5, hex: String(repeating: "0", count: 32))
        #expect(try await fixture.sync([bad]).failures.first?.error?.code == .digestMismatch)
    }

    @Test("what a crash left behind is swept by the next change, not by reading")
    func sweepAfterCrash() async throws {
        let fixture = try EngineFixture()
        let v1 = try await fixture.publish("images", "1", ["a.png": "1"])
        _ = try await fixture.sync([v1])
        let root = fixture.root
        // A crash mid-download and a crash between the move into place and the commit:
        let staging = root.appendingPathComponent("staging/\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        try Data("partial".utf8).write(to: staging.appendingPathComponent("package.archive"))
        let orphan = root.appendingPathComponent("packages/images/2")
        try FileManager.default.createDirectory(at: orphan, withIntermediateDirectories: true)

        let reopened = Updater(configuration: fixture.updater.configuration)
        #expect(try await reopened.installedPackages().map(\.version) == ["1"])
        // Reading is read-only: it leaves everything where it is.
        #expect(FileManager.default.fileExists(atPath: staging.path))
        #expect(FileManager.default.fileExists(atPath: orphan.path))
        _ = try await reopened.apply(Manifest(packages: [v1]))
        #expect(!FileManager.default.fileExists(atPath: staging.path))
        #expect(!FileManager.default.fileExists(atPath: orphan.path))
        #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent("packages/images/1/a.png").path))
    }

    @Test("a version re-published with other content installs beside the kept one")
    func republishedVersion() async throws {
        let fixture = try EngineFixture()
        _ = try await fixture.sync([try await fixture.publish("images", "1", ["a.png": "first"])])
        let again = try await fixture.publish("images", "1", ["a.png": "second"])
        let report = try await fixture.sync([again])
        #expect(report.packages.map(\.change) == [.update])
        #expect(try await fixture.contents(of: "images", "a.png") == "second")
        let record = try #require(await fixture.store.snapshot.packages["images"])
        #expect(record.active?.path.hasPrefix("packages/images/1-") == true)
        #expect(record.previous.first?.path == "packages/images/1")
    }

    @Test("packages are installed concurrently and all succeed")
    func manyPackages() async throws {
        let fixture = try EngineFixture()
        var offered: [PackageDescriptor] = []
        for index in 0..<12 {
            offered.append(try await fixture.publish("p\(index)", "1", ["file\(index).txt": "\(index)"]))
        }
        let report = try await fixture.sync(offered)
        #expect(report.failures.isEmpty)
        #expect(try await fixture.updater.installedPackages().count == 12)
        #expect(await fixture.store.snapshot.packages.count == 12)
    }

    @Test("a manifest that cannot be fetched throws and changes nothing")
    func manifestFailure() async throws {
        let fixture = try EngineFixture()
        let source = FakeManifestSource(manifest: try Manifest(packages: []))
        await source.set(.failure(HotUpdateError(.httpStatus, "the server answered HTTP 503")))
        await #expect(throws: HotUpdateError(.httpStatus, "")) {
            try await fixture.updater.sync(from: source)
        }
        #expect(await fixture.store.commitCount == 0)
    }

    @Test("a failure recorded for a version clears when the manifest goes back to the installed one")
    func failureClears() async throws {
        let fixture = try EngineFixture()
        let v1 = try await fixture.publish("images", "1", ["a.png": "1"])
        _ = try await fixture.sync([v1])
        var broken = try await fixture.publish("images", "2", ["a.png": "2"])
        broken.size = 1
        _ = try await fixture.sync([broken])
        #expect(await fixture.store.snapshot.packages["images"]?.state == .failed)
        _ = try await fixture.sync([v1])
        #expect(await fixture.store.snapshot.packages["images"]?.state == .installed)
        #expect(await fixture.store.snapshot.packages["images"]?.lastError == nil)
    }
}
