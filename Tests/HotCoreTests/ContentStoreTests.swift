import Foundation
import HotCore
import HotTesting
import Testing

@Suite("Content-addressed store")
struct ContentStoreTests {
    static func attributes(_ url: URL) throws -> [FileAttributeKey: Any] {
        try FileManager.default.attributesOfItem(atPath: url.path)
    }

    static func inode(_ url: URL) throws -> Int? {
        (try attributes(url)[.systemFileNumber] as? NSNumber)?.intValue
    }

    @Test("identical files across packages and versions are one read-only object, hard-linked into ordinary trees")
    func deduplicated() async throws {
        let fixture = try EngineFixture()
        let a = try await fixture.publish("a", "1", ["shared.png": "same bytes", "own/a.txt": "only a"])
        let b = try await fixture.publish("b", "1", ["img/shared.png": "same bytes", "b.txt": "only b"])
        #expect(try await fixture.sync([a, b]).failures.isEmpty)

        #expect(fixture.objectNames().count == 3)
        let inA = fixture.url("packages/a/1/shared.png")
        let inB = fixture.url("packages/b/1/img/shared.png")
        #expect(try Self.inode(inA) == Self.inode(inB))
        #expect((try Self.attributes(inA)[.referenceCount] as? NSNumber)?.intValue == 3)
        #expect((try Self.attributes(inA)[.posixPermissions] as? NSNumber)?.intValue == 0o444)
        #expect(FileSystem.isDirectory(fixture.url("packages/b/1/img")))
        #expect(try String(contentsOf: inB, encoding: .utf8) == "same bytes")
        #expect(fixture.stagingIsEmpty())
    }

    @Test("deleting a package frees exactly the objects nothing else links and leaves the other package intact")
    func deleteFreesOwnObjects() async throws {
        let fixture = try EngineFixture()
        let a = try await fixture.publish("a", "1", ["shared.png": "same bytes", "a.txt": "only a"])
        let b = try await fixture.publish("b", "1", ["shared.png": "same bytes", "b.txt": "only b"])
        _ = try await fixture.sync([a, b])
        let bBefore = try fixture.tree().filter { $0.key.hasPrefix("/packages/b/") }

        try await fixture.updater.remove(packageID: "a")
        #expect(fixture.objectNames().count == 2)
        #expect(!FileManager.default.fileExists(atPath: fixture.url("packages/a").path))
        #expect(!FileManager.default.fileExists(atPath: fixture.url("filelists/a").path))
        #expect(try fixture.tree().filter { $0.key.hasPrefix("/packages/b/") } == bBefore)
        #expect(
            (try Self.attributes(fixture.url("packages/b/1/shared.png"))[.referenceCount] as? NSNumber)?.intValue == 2
        )
        #expect(try await fixture.updater.health.verify(packageID: "b", depth: .full).isHealthy)

        try await fixture.updater.remove(packageID: "b")
        #expect(fixture.objectNames().isEmpty)
        await #expect(throws: HotUpdateError(.notFound, "")) { try await fixture.updater.remove(packageID: "b") }
    }

    @Test("an update shares unchanged files with the kept version; dropping a version frees only its own files")
    func versionsShare() async throws {
        let fixture = try EngineFixture(keepPreviousVersions: 1)
        let v1 = try await fixture.publish("p", "1", ["keep.png": "stays", "x.txt": "one"])
        let v2 = try await fixture.publish("p", "2", ["keep.png": "stays", "x.txt": "two"])
        let v3 = try await fixture.publish("p", "3", ["keep.png": "stays", "x.txt": "three"])
        _ = try await fixture.sync([v1])
        _ = try await fixture.sync([v2])
        #expect(fixture.objectNames().count == 3)
        #expect(
            try Self.inode(fixture.url("packages/p/1/keep.png")) == Self.inode(fixture.url("packages/p/2/keep.png"))
        )
        _ = try await fixture.sync([v3])
        #expect(fixture.objectNames().count == 3)  // "one" went with version 1
        #expect(!FileManager.default.fileExists(atPath: fixture.url("packages/p/1").path))
        #expect(try await fixture.contents(of: "p", "x.txt") == "three")
    }

    @Test("garbage collection keeps the active and the configured previous versions and frees the rest")
    func garbageCollection() async throws {
        let fixture = try EngineFixture(keepPreviousVersions: 2)
        for version in 1...3 {
            _ = try await fixture.sync([try await fixture.publish("p", "\(version)", ["x.txt": "v\(version)"])])
        }
        #expect(fixture.objectNames().count == 3)

        let stricter = fixture.relaunched(keepPreviousVersions: 1)
        let report = try await stricter.collectGarbage()
        #expect(report.versionsRemoved == 1)
        #expect(report.objectsRemoved == 1)
        #expect(fixture.objectNames().count == 2)
        #expect(!FileManager.default.fileExists(atPath: fixture.url("packages/p/1").path))
        #expect(try await stricter.currentSnapshot().packages["p"]?.previous.map(\.version) == ["2"])
        #expect(
            try await stricter.collectGarbage() == GarbageReport(versionsRemoved: 0, objectsRemoved: 0, bytesFreed: 0)
        )
    }

    @Test("what a crash left between linking objects and the commit is swept at the next open")
    func crashLeftovers() async throws {
        let fixture = try EngineFixture()
        let v1 = try await fixture.publish("p", "1", ["x.txt": "kept"])
        _ = try await fixture.sync([v1])
        let kept = fixture.objectNames()
        // An install interrupted after its files became objects and its tree moved into place:
        // its staging entry (removed only after the commit) is left too, owned by no one.
        try FileManager.default.createDirectory(
            at: fixture.url("staging/\(UUID().uuidString)"),
            withIntermediateDirectories: true
        )
        let orphanTree = fixture.url("packages/p/2")
        try FileManager.default.createDirectory(at: orphanTree, withIntermediateDirectories: true)
        let orphanObject = fixture.url("objects/ab/ab" + String(repeating: "0", count: 62))
        try FileManager.default.createDirectory(
            at: orphanObject.deletingLastPathComponent(),
            withIntermediateDirectories: true
        )
        try Data("orphan".utf8).write(to: orphanObject)
        try FileManager.default.linkItem(at: orphanObject, to: orphanTree.appendingPathComponent("y.txt"))
        try FileManager.default.createDirectory(
            at: fixture.url("filelists/p"),
            withIntermediateDirectories: true
        )
        try Data("{}".utf8).write(to: fixture.url("filelists/p/2.files"))

        let reopened = fixture.relaunched()
        #expect(try await reopened.installedPackages().map(\.version) == ["1"])
        #expect(fixture.objectNames().count == kept.count + 1)  // reading sweeps nothing
        // The first change sweeps (a sync that changes nothing but the planned states; no gc).
        #expect(try await reopened.apply(Manifest(packages: [v1])).packages.map(\.change) == [.unchanged])
        #expect(fixture.objectNames() == kept)
        #expect(!FileManager.default.fileExists(atPath: orphanTree.path))
        #expect(!FileManager.default.fileExists(atPath: fixture.url("filelists/p/2.files").path))
        #expect(try await reopened.health.verify(packageID: "p").isHealthy)
    }

    @Test("file lists round-trip any path and refuse what they cannot read")
    func fileListFormat() throws {
        let digest = String(repeating: "ab", count: 32)
        let list = FileList(files: [
            FileList.Entry(path: "plain/a.png", size: 3, sha256: digest),
            FileList.Entry(path: "with space/100% sure.txt", size: 0, sha256: digest),
            FileList.Entry(path: "line\nfeed\r.js", size: 12, sha256: digest),
            FileList.Entry(path: "字体/émoji-🙂.ttf", size: 1 << 40, sha256: digest),
        ])
        #expect(try FileList.decode(list.encoded(), name: "test") == list)
        #expect(try FileList.decode(Data("hotfiles 1\n".utf8), name: "empty").files.isEmpty)
        for bad in ["", "{}", "hotfiles 2\n", "hotfiles 1\nabc 3 a.png\n", "hotfiles 1\n\(digest) x a.png\n"] {
            #expect(throws: HotUpdateError(.storeCorrupt, "")) { try FileList.decode(Data(bad.utf8), name: "bad") }
        }
    }

    @Test(
        "where objects cannot be hard-linked (another file system) files stay copies and installs, checks and deletes work",
        .enabled(if: FileManager.default.fileExists(atPath: "/dev/shm"))
    )
    func noHardLinks() async throws {
        let fixture = try EngineFixture()
        let elsewhere = URL(fileURLWithPath: "/dev/shm/hot-objects-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let device = { (url: URL) in (try Self.attributes(url)[.systemNumber] as? NSNumber)?.intValue }
        try #require(try device(elsewhere) != device(fixture.root))
        try FileManager.default.createSymbolicLink(at: fixture.url("objects"), withDestinationURL: elsewhere)

        let a = try await fixture.publish("a", "1", ["shared.png": "same bytes", "a.txt": "only a"])
        let b = try await fixture.publish("b", "1", ["shared.png": "same bytes"])
        #expect(try await fixture.sync([a, b]).failures.isEmpty)
        #expect(try await fixture.contents(of: "b", "shared.png") == "same bytes")
        #expect(FileManager.default.subpaths(atPath: elsewhere.path)?.contains { $0.count > 3 } == false)
        #expect(try await fixture.updater.health.verify(packageID: "a", depth: .full).isHealthy)
        try await fixture.updater.remove(packageID: "a")
        #expect(try await fixture.contents(of: "b", "shared.png") == "same bytes")
        #expect(fixture.stagingIsEmpty())
    }
}
