import Foundation
import HotCore
import HotTesting
import Testing

/// Damage to content that several trees share: one object, hard-linked into every installed
/// tree that has it, so writing into one tree's file damages the object and every other tree.
@Suite("Damage shared through objects")
struct SharedDamageTests {
    /// Writes `text` into the installed file at `path` (relative to the root), in place: through
    /// the hard link, into the object and every tree that links it.
    static func damage(_ fixture: EngineFixture, _ path: String, with text: String) throws {
        let url = fixture.url(path)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: url.path)
        try Data(text.utf8).write(to: url, options: [])
    }

    /// The inode of a file, to tell whether two names are one file.
    static func inode(_ url: URL) throws -> UInt64 {
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        return try #require((attributes[.systemFileNumber] as? NSNumber)?.uint64Value)
    }

    /// The record of `id` as stored.
    static func record(_ fixture: EngineFixture, _ id: String) async throws -> PackageRecord {
        try #require(try await fixture.updater.currentSnapshot().packages[id])
    }

    @Test(
        "a repair that downloads a damaged shared file links every kept tree naming it to the good object, so a later restore serves whole files"
    )
    func repairRelinksKeptTrees() async throws {
        let fixture = try EngineFixture()
        let v1 = try await fixture.publish("p", "1", ["a.png": "one", "shared.png": "same"])
        let v2 = try await fixture.publish("p", "2", ["a.png": "two", "shared.png": "same"])
        let other = try await fixture.publish("q", "1", ["copy.png": "same"])
        _ = try await fixture.sync([v1, other])
        _ = try await fixture.sync([v2, other])
        // Same size: only a hash finds it.
        try Self.damage(fixture, "packages/p/2/shared.png", with: "SAME")
        #expect(try String(contentsOf: fixture.url("packages/p/1/shared.png"), encoding: .utf8) == "SAME")

        let report = try await fixture.updater.health.repair(packageID: "p")
        #expect(report.before.damaged == ["shared.png"])
        #expect(report.refetched)
        #expect(report.succeeded)
        #expect(
            Set(report.relinked)
                == [
                    PackageHealth.RelinkedFile(packageID: "p", version: "1", path: "shared.png"),
                    PackageHealth.RelinkedFile(packageID: "q", version: "1", path: "copy.png"),
                ]
        )
        // Every kept tree links the one good object again.
        let record = try await Self.record(fixture, "p")
        let active = try #require(record.active)
        let kept = try #require(record.previous.first)
        #expect(kept.version == "1")
        #expect(kept.damageSeen == true)
        #expect(active.damageSeen == nil)
        let activeFile = fixture.root.appendingPathComponent(active.path).appendingPathComponent("shared.png")
        for url in [
            fixture.root.appendingPathComponent(kept.path).appendingPathComponent("shared.png"),
            fixture.url("packages/q/1/copy.png"), activeFile,
        ] {
            #expect(try String(contentsOf: url, encoding: .utf8) == "same")
            #expect(try Self.inode(url) == Self.inode(activeFile))
        }
        #expect(try await fixture.contents(of: "q", "copy.png") == "same")

        // The server rolls back to version 1: restored from its kept tree (checked by hash,
        // since damage was seen in it), with no download.
        let restored = try await fixture.sync([v1, other])
        #expect(restored.packages.first?.change == .restore)
        #expect(restored.failures.isEmpty)
        #expect(await fixture.transport.requestCount(for: v1.url) == 1)
        #expect(try await fixture.contents(of: "p", "shared.png") == "same")
        #expect(try await fixture.contents(of: "p", "a.png") == "one")
        #expect(try await fixture.updater.health.verifyAll(depth: .full).allSatisfy(\.isHealthy))
        #expect(try await fixture.updater.state(of: "p") == .installed)
    }

    @Test("a restore of a kept version with a wrong-size file does not serve it: the version is downloaded again")
    func wrongSizeKeptFileIsNotServed() async throws {
        let fixture = try EngineFixture()
        let v1 = try await fixture.publish("p", "1", ["a.png": "one", "b.png": "bee"])
        let v2 = try await fixture.publish("p", "2", ["a.png": "two", "b.png": "bee"])
        _ = try await fixture.sync([v1])
        _ = try await fixture.sync([v2])
        // Version 1's own file, damaged (a different size) through its object.
        try Self.damage(fixture, "packages/p/1/a.png", with: "one, damaged")

        // With no network the damaged tree is not restored: version 2 stays active.
        await fixture.transport.fail(v1.url, with: HotUpdateError(.transportFailed, "offline"))
        let offline = try await fixture.sync([v1])
        #expect(offline.packages.first?.change == .restore)
        #expect(offline.failures.map(\.id) == ["p"])
        #expect(try await Self.record(fixture, "p").active?.version == "2")
        #expect(try await fixture.contents(of: "p", "a.png") == "two")
        // The damaged tree was let go, and its damaged object lost its name.
        #expect(try await Self.record(fixture, "p").previous.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: fixture.url("packages/p/1").path))

        // With the network back, version 1 is downloaded and whole.
        await fixture.transport.serve(try FakeArchive.make(["a.png": "one", "b.png": "bee"]), at: v1.url)
        let online = try await fixture.sync([v1])
        #expect(online.failures.isEmpty)
        #expect(try await Self.record(fixture, "p").active?.version == "1")
        #expect(try await fixture.contents(of: "p", "a.png") == "one")
        #expect(try await fixture.updater.health.verifyAll(depth: .full).allSatisfy(\.isHealthy))
    }

    @Test("Updater.rollback downloads a kept version that fails its check instead of restoring it")
    func rollbackDownloadsDamagedKeptVersion() async throws {
        let fixture = try EngineFixture()
        let v1 = try await fixture.publish("p", "1", ["a.png": "one"])
        let v2 = try await fixture.publish("p", "2", ["a.png": "two"])
        _ = try await fixture.sync([v1])
        _ = try await fixture.sync([v2])
        try Self.damage(fixture, "packages/p/1/a.png", with: "o")

        try await fixture.updater.rollback(packageID: "p")
        #expect(await fixture.transport.requestCount(for: v1.url) == 2)
        #expect(try await Self.record(fixture, "p").active?.version == "1")
        #expect(try await fixture.contents(of: "p", "a.png") == "one")
        #expect(try await fixture.updater.health.verify(packageID: "p").isHealthy)
    }

    @Test(
        "damage found in a shared file marks the kept versions sharing it; their restore hashes every file and refuses a same-size damage"
    )
    func markedKeptVersionIsHashed() async throws {
        let fixture = try EngineFixture()
        let v1 = try await fixture.publish("p", "1", ["a.png": "one", "shared.png": "same"])
        let v2 = try await fixture.publish("p", "2", ["a.png": "two", "shared.png": "same"])
        _ = try await fixture.sync([v1])
        _ = try await fixture.sync([v2])
        try Self.damage(fixture, "packages/p/2/shared.png", with: "SAME")
        // A check finds it (the app never repairs): the versions sharing it are marked.
        #expect(try await fixture.updater.health.verify(packageID: "p").damaged == ["shared.png"])
        var record = try await Self.record(fixture, "p")
        #expect(record.previous.map(\.damageSeen) == [true])
        #expect(record.active?.damageSeen == true)
        // A quick check of a marked version hashes: sizes cannot see this damage.
        let quick = try await fixture.updater.health.verify(packageID: "p", depth: .quick, recording: false)
        #expect(quick.depth == .full)
        #expect(quick.damaged == ["shared.png"])

        // The server rolls back; the kept tree's sizes are right, its hashes are not: it is
        // not restored but downloaded, and the kept version 2 is linked to the good object.
        let report = try await fixture.sync([v1])
        #expect(report.failures.isEmpty)
        #expect(await fixture.transport.requestCount(for: v1.url) == 2)
        record = try await Self.record(fixture, "p")
        #expect(record.active?.version == "1")
        #expect(record.active?.damageSeen == nil)
        #expect(try await fixture.contents(of: "p", "shared.png") == "same")
        let kept = try #require(record.previous.first)
        #expect(kept.version == "2")
        let keptFile = fixture.root.appendingPathComponent(kept.path).appendingPathComponent("shared.png")
        #expect(try String(contentsOf: keptFile, encoding: .utf8) == "same")
        #expect(try await fixture.updater.health.verifyAll(depth: .full).allSatisfy(\.isHealthy))
    }

    @Test(
        "a repair that cannot download removes the damaged object's name: a version installed later with that content gets a good file"
    )
    func offlineRepairDiscardsDamagedObject() async throws {
        let fixture = try EngineFixture()
        let v1 = try await fixture.publish("p", "1", ["shared.png": "same"])
        _ = try await fixture.sync([v1])
        try Self.damage(fixture, "packages/p/1/shared.png", with: "SAME")
        await fixture.transport.fail(v1.url, with: HotUpdateError(.transportFailed, "offline"))
        let report = try await fixture.updater.health.repair(packageID: "p")
        #expect(report.succeeded == false)
        #expect(try await Self.record(fixture, "p").active?.damageSeen == true)

        // The package's next version has the same file. Its archive's recorded digests make
        // an object of the right size, claimed by the same package, usable without a hash:
        // only the removed name keeps the damaged file out of the new tree.
        let v2 = try await fixture.publish("p", "2", ["shared.png": "same", "b.png": "b"])
        _ = try await fixture.sync([v2])
        #expect(try await fixture.contents(of: "p", "shared.png") == "same")
        #expect(try await fixture.updater.health.verify(packageID: "p").isHealthy)
        #expect(try await fixture.updater.state(of: "p") == .installed)
        let kept = try #require(try await Self.record(fixture, "p").previous.first)
        #expect(kept.damageSeen == true)
        let keptFile = fixture.root.appendingPathComponent(kept.path).appendingPathComponent("shared.png")
        #expect(try String(contentsOf: keptFile, encoding: .utf8) == "SAME")
    }
}
