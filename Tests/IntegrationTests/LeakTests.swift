import Foundation
import HotArchive
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import HotVerify
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Nothing a store holds is leaked for good: objects a killed deletion left with no tree are
/// freed by the next change, of this process or another, and the downloads kept under
/// `partial/` are listed by `hot status` and removed by `hot gc` and `hot delete`.
@Suite("nothing is leaked for good", .serialized)
struct LeakTests {
    @Test(
        "hot delete or hot gc killed as it frees an object: the next sync frees what it left, every tree whole",
        .enabled(if: FaultPointBuild.testsRun, FaultPointBuild.skipReason),
        arguments: [KillRig.Operation.remove, .gc]
    )
    func killedWhileFreeing(_ operation: KillRig.Operation) async throws {
        let rig = try await KillRig()
        var aborts = 0
        var leftUnlinked = 0
        var problems: [String] = []
        // Abort before the first object the run frees, then before the second, and so on,
        // until a run frees every object and ends by itself.
        for occurrence in 1...16 {
            let (root, logs) = try rig.makeRoot(operation.start)
            let run = try HotRun(
                rig.arguments(for: operation, root: root),
                environment: ["HOT_ABORT_AT": "mid-release:\(occurrence)"],
                log: logs.appendingPathComponent("run.log")
            )
            let ending = await run.wait()
            guard ending == .signalled(SIGABRT) else {
                #expect(ending == .exited(0), "\(run.output)")
                break
            }
            aborts += 1
            if try !unlinkedObjects(root).isEmpty { leftUnlinked += 1 }
            // The next sync; then no object has one link, and every tree the store names is whole.
            problems += await rig.check(after: operation, root: root, logs: logs, finished: false)
                .map { "aborted at mid-release:\(occurrence): \($0)" }
            let unlinked = try unlinkedObjects(root)
            #expect(unlinked.isEmpty, "aborted at mid-release:\(occurrence), after the next sync: \(unlinked)")
        }
        await rig.stop()
        // The run frees several objects (`p` 1 alone has four distinct files): each was a place to die.
        #expect(aborts >= 3, "the run reached mid-release only \(aborts) time(s)")
        #expect(leftUnlinked > 0, "no abort left an object with one link: the case was not reached")
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    @Test(
        "an updater that already swept finishes, at its next change, a deletion another process died in",
        .enabled(if: FaultPointBuild.testsRun, FaultPointBuild.skipReason)
    )
    func longLivedUpdaterFinishesAKilledDeletion() async throws {
        let rig = try await KillRig()
        let (root, logs) = try rig.makeRoot(.atVersion2)
        let updater = makeUpdater(root: root, transport: .http)
        let manifest = StaticManifestSource(
            url: try #require(URL(string: rig.manifestURL(2, slow: false))),
            transport: httpTransport()
        )
        // Its first change: the store swept what it found then (nothing).
        let first = try await updater.sync(from: manifest)
        #expect(first.packages.allSatisfy { $0.error == nil })

        // Another process deletes `p` and dies before it frees the first object.
        let run = try HotRun(
            ["delete", KillRig.packageID, "--root", root.path],
            environment: ["HOT_ABORT_AT": "mid-release:1"],
            log: logs.appendingPathComponent("delete.log")
        )
        #expect(await run.wait() == .signalled(SIGABRT), "\(run.output)")
        let unlinked = try unlinkedObjects(root)
        #expect(!unlinked.isEmpty, "the killed deletion left no object with one link")
        let staging = FileSystem.contents(of: root.appendingPathComponent("staging"))
        #expect(staging.contains { $0.hasPrefix("deleted-") && $0.hasSuffix(".files") }, "\(staging)")

        // The updater's next change, `p` 2 installed again: what the deletion left is freed.
        let second = try await updater.sync(from: manifest)
        #expect(second.packages.allSatisfy { $0.error == nil })
        #expect(try unlinkedObjects(root).isEmpty)
        #expect(try StoreInspection.leftovers(root: root) == [])
        let installed = try await updater.installedPackages()
        let trees = try Dictionary(uniqueKeysWithValues: installed.map { ($0.id, try readTree($0.directory)) })
        #expect(trees[KillRig.packageID] == rig.version2)
        #expect(trees[KillRig.sharedID] == rig.shared)
        await rig.stop()
    }

    @Test("hot status lists partial downloads per package; hot delete ID removes that package's, hot gc the rest")
    func partialDownloadsAreShownAndCleared() async throws {
        let work = try makeTemporaryDirectory("leak-partials")
        defer { try? FileManager.default.removeItem(at: work) }
        let root = work.appendingPathComponent("store")
        // Two packages, each served by a server that cuts its first answer halfway.
        var packages: [(id: String, archive: Data, sha256: String, server: RawHTTPServer)] = []
        defer { for package in packages { package.server.stop() } }
        for (index, id) in ["p", "q"].enumerated() {
            let source = work.appendingPathComponent("source-\(id)")
            try writeTree(["\(id).bin": noise(300_000 + 100_000 * index, seed: UInt64(70 + index))], under: source)
            let zip = work.appendingPathComponent("\(id).zip")
            _ = try ZipWriter.write(directory: source, to: zip, options: ZipWriter.Options())
            let archive = try Data(contentsOf: zip)
            let server = try RawHTTPServer.start(.file(quirk: .none))
            server.setBody(archive)
            server.cutNextResponse(after: archive.count / 2)
            let sha256 = try CryptoVerifier().digest(of: archive, using: .sha256).hex
            packages.append((id, archive, sha256, server))
        }
        // A cut is not resumed within this sync: its bytes stay under partial/ for later.
        var configuration = makeUpdater(root: root, transport: .http).configuration
        configuration.partialDownloads.resumesPerSync = 0
        let updater = Updater(configuration: configuration)
        let manifest = try Manifest(
            packages: packages.map { package in
                try PackageDescriptor(
                    id: package.id,
                    version: "1",
                    url: package.server.url,
                    size: Int64(package.archive.count),
                    sha256: try Digest(algorithm: .sha256, hex: package.sha256)
                )
            }
        )
        let cut = try await updater.apply(manifest)
        #expect(cut.packages.count == 2 && cut.packages.allSatisfy { $0.error != nil })
        let partial = root.appendingPathComponent("partial")
        let kept = { FileSystem.contents(of: partial).filter { !$0.hasSuffix(".json") && !$0.hasPrefix(".") }.sorted() }
        #expect(kept() == packages.map(\.sha256).sorted())

        // hot status shows them, with their packages and sizes.
        var status = try await partialStatus(root: root, log: work.appendingPathComponent("status-1.log"))
        #expect(status.count == 2)
        #expect(status.bytes == packages.reduce(Int64(0)) { $0 + Int64($1.archive.count / 2) })
        #expect(status.downloads.compactMap(\.package).sorted() == ["p", "q"])
        #expect(status.downloads.allSatisfy { $0.version == "1" })
        for package in packages {
            let download = status.downloads.first { $0.package == package.id }
            #expect(download?.sha256 == package.sha256)
            #expect(download?.bytes == Int64(package.archive.count / 2))
            #expect(download?.size == Int64(package.archive.count))
        }
        let text = try await HotRun.run(
            ["status", "--root", root.path],
            log: work.appendingPathComponent("status-text.log")
        )
        #expect(text.0 == .exited(0))
        #expect(text.1.contains("partial downloads: 2"), "\(text.1)")

        // hot delete p: p's kept download goes, q's stays.
        let deleted = try await HotRun.run(
            ["delete", "p", "--root", root.path],
            log: work.appendingPathComponent("delete.log")
        )
        #expect(deleted.0 == .exited(0), "\(deleted.1)")
        #expect(deleted.1.contains("1 partial download(s)"), "\(deleted.1)")
        #expect(kept() == [packages[1].sha256])
        status = try await partialStatus(root: root, log: work.appendingPathComponent("status-2.log"))
        #expect(status.count == 1 && status.downloads.first?.package == "q")

        // hot gc: the rest goes.
        let collected = try await HotRun.run(
            ["gc", "--keep", "0", "--root", root.path],
            log: work.appendingPathComponent("gc.log")
        )
        #expect(collected.0 == .exited(0), "\(collected.1)")
        #expect(collected.1.contains("1 partial download(s)"), "\(collected.1)")
        #expect(FileSystem.contents(of: partial).isEmpty, "\(FileSystem.contents(of: partial))")
        status = try await partialStatus(root: root, log: work.appendingPathComponent("status-3.log"))
        #expect(status.count == 0 && status.bytes == 0 && status.downloads.isEmpty)
    }

    @Test("a sync that downloads nothing still drops the partial downloads past their age")
    func syncPrunesOldPartials() async throws {
        let work = try makeTemporaryDirectory("leak-prune")
        defer { try? FileManager.default.removeItem(at: work) }
        let repository = try Repository()
        defer { try? FileManager.default.removeItem(at: repository.directory) }
        let source = work.appendingPathComponent("source")
        try writeTree(["a.txt": Data("a".utf8)], under: source)
        try repository.publish(source, id: "p", version: "1")
        let root = work.appendingPathComponent("store")
        let sync = [
            "sync", "--manifest", repository.manifestFile.path, "--root", root.path, "--allow-unsigned", "--quiet",
        ]
        let (installed, installOutput) = try await HotRun.run(sync, log: work.appendingPathComponent("install.log"))
        try #require(installed == .exited(0), "\(installOutput)")

        // Two kept downloads of a package no longer offered: one last written 8 days ago (the
        // default policy keeps a week), one just now.
        let partial = root.appendingPathComponent("partial")
        try FileManager.default.createDirectory(at: partial, withIntermediateDirectories: true)
        let old = String(repeating: "a", count: 64)
        let recent = String(repeating: "b", count: 64)
        for key in [old, recent] {
            try Data(count: 10_000).write(to: partial.appendingPathComponent(key))
            try Data(#"{"url":"http://127.0.0.1:1/gone.zip","offset":10000,"package":"gone","version":"1"}"#.utf8)
                .write(to: partial.appendingPathComponent(key + ".json"))
        }
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: -8 * 24 * 3600)],
            ofItemAtPath: partial.appendingPathComponent(old).path
        )
        let before = try await partialStatus(root: root, log: work.appendingPathComponent("status-1.log"))
        #expect(before.count == 2 && before.downloads.allSatisfy { $0.package == "gone" })

        let (synced, syncOutput) = try await HotRun.run(sync, log: work.appendingPathComponent("sync.log"))
        #expect(synced == .exited(0), "\(syncOutput)")
        #expect(syncOutput.contains("unchanged"), "\(syncOutput)")
        #expect(FileSystem.contents(of: partial).sorted() == [recent, recent + ".json"])
        let after = try await partialStatus(root: root, log: work.appendingPathComponent("status-2.log"))
        #expect(after.count == 1 && after.downloads.first?.sha256 == recent && after.bytes == 10_000)
    }
}

/// The objects under `root` that no tree links (link count 1), as `objects/ab/ab12…`.
private func unlinkedObjects(_ root: URL) throws -> [String] {
    try StoreInspection.leftovers(root: root).filter { $0.hasPrefix("objects/") }
}

/// `partialDownloads` of `hot status --json`.
private struct PartialStatus: Decodable {
    struct Download: Decodable {
        var sha256: String
        var package: String?
        var version: String?
        var bytes: Int64
        var size: Int64?
    }
    var count: Int
    var bytes: Int64
    var downloads: [Download]
}

/// Runs `hot status --json` and decodes its `partialDownloads`.
private func partialStatus(root: URL, log: URL) async throws -> PartialStatus {
    struct Document: Decodable { var partialDownloads: PartialStatus }
    let run = try HotRun(["status", "--root", root.path, "--json"], log: log)
    let ending = await run.wait()
    try #require(ending == .exited(0), "\(run.output)")
    return try JSONDecoder().decode(Document.self, from: Data(run.standardOutput.utf8)).partialDownloads
}
