import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Delivery modes with the real `hot` against nginx: packs made by `hot pack --delivery`,
/// synced, installed on demand, updated, evicted, and a kill during eviction.
@Suite("On-demand packs with the real hot")
struct OnDemandTests {
    /// A repository of one launch, two prefetch and twenty on-demand packs, signed, served by
    /// nginx, and a store root to sync into.
    final class Repository: Sendable {
        let published: PublishedRepository
        var repo: String { published.repo }
        var root: String { published.root }
        var nginx: NginxServer { published.nginx }

        init(_ name: String) async throws {
            published = try await PublishedRepository(name)
            try await pack("core", "1", delivery: "launch")
            try await pack("pre1", "1", delivery: "prefetch")
            try await pack("pre2", "1", delivery: nil)
            for index in 0..<20 { try await pack("od\(index)", "1", delivery: "on-demand") }
            try await sign()
        }

        /// `hot pack` of a small tree for `id` `version`, with `--delivery` when given.
        func pack(_ id: String, _ version: String, delivery: String?) async throws {
            let source = published.work.appendingPathComponent("src/\(id)-\(version)")
            try writeTree(
                ["\(id).txt": Data("\(id) \(version)".utf8), "data.bin": noise(2048, seed: UInt64(id.utf8.count))],
                under: source
            )
            try await PublisherWorkflowTests.hot(
                ["pack", source.path, "--id", id, "--version", version, "--repo", repo, "--deltas", "0"]
                    + (delivery.map { ["--delivery", $0] } ?? [])
            )
        }

        func sign() async throws {
            try await PublisherWorkflowTests.hot(["sign", "--repo", repo, "--key", published.privateKey])
        }

        /// The package ids whose archives nginx served from request `start` on, waiting for
        /// `expected` to be logged first.
        func packagesServed(from start: Int, expecting expected: Set<String>) async -> [String] {
            for _ in 0..<500 {
                let served = Set(packageIDs(nginx.requests().dropFirst(start)))
                if served.isSuperset(of: expected) { break }
                try? await Task.sleep(for: .milliseconds(20))
            }
            return packageIDs(nginx.requests().dropFirst(start)).sorted()
        }

        private func packageIDs(_ requests: ArraySlice<NginxServer.Request>) -> [String] {
            requests.filter { $0.path.hasPrefix("/packages/") && $0.status == 200 }.map {
                let name = String($0.path.dropFirst("/packages/".count))
                return String(name.split(separator: "-").first ?? "")
            }
        }

        /// The packages `hot status --json` lists with an active version, by id → version.
        func installed() async throws -> [String: String] {
            let status = try JSONDecoder().decode(
                CommandLineTests.StatusDocument.self,
                from: Data(try await PublisherWorkflowTests.hot(["status", "--root", root, "--json"]).stdout.utf8)
            )
            return Dictionary(
                uniqueKeysWithValues: status.packages.compactMap { package in
                    package.version.map { (package.id, $0) }
                }
            )
        }

        func stop() async { await published.stop() }
    }

    @Test(
        "sync fetches launch and prefetch packs only; install od7 fetches od7; a sync updates od7, not od9; gc evicts od7"
    )
    func whatItMustShow() async throws {
        let repository = try await Repository("on-demand")
        let published = repository.published

        // hot sync downloads exactly the three, and no on-demand pack.
        var start = repository.nginx.requests().count
        let synced = try await PublisherWorkflowTests.hot(published.sync)
        #expect(
            await repository.packagesServed(from: start, expecting: ["core", "pre1", "pre2"]) == [
                "core", "pre1", "pre2",
            ]
        )
        #expect(try await repository.installed() == ["core": "1", "pre1": "1", "pre2": "1"])
        #expect(synced.stdout.contains("od7\tnotRequested\tok\t-"), "\(synced.stdout)")

        // hot install od7 downloads od7 alone.
        start = repository.nginx.requests().count
        let installed = try await PublisherWorkflowTests.hot([
            "install", "od7", "--manifest", published.manifestURL, "--root", repository.root, "--trust",
            published.publicKey,
        ])
        #expect(installed.stdout.hasPrefix("od7\t1\t"), "\(installed.stdout)")
        #expect(await repository.packagesServed(from: start, expecting: ["od7"]) == ["od7"])
        #expect(try await repository.installed()["od7"] == "1")

        // A package the trusted manifest does not offer is refused, and nothing is fetched.
        start = repository.nginx.requests().count
        let refused = try await CommandLineTests.run(["install", "od99", "--root", repository.root])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("offers no such package"), "\(refused.stderr)")
        #expect(repository.nginx.requests().count == start)

        // New versions of od7 and od9 (their delivery kept from the earlier pack): a sync
        // updates od7 and does not fetch od9.
        try await repository.pack("od7", "2", delivery: nil)
        try await repository.pack("od9", "2", delivery: nil)
        try await repository.sign()
        start = repository.nginx.requests().count
        let updated = try await PublisherWorkflowTests.hot(published.sync)
        #expect(updated.stdout.contains("od7\tupdate\tok\t2"), "\(updated.stdout)")
        #expect(updated.stdout.contains("od9\tnotRequested\tok\t-"), "\(updated.stdout)")
        #expect(await repository.packagesServed(from: start, expecting: ["od7"]) == ["od7"])
        #expect(try await repository.installed() == ["core": "1", "pre1": "1", "pre2": "1", "od7": "2"])

        // hot gc --on-demand-budget 0 evicts od7 and keeps the launch and prefetch packs.
        let collected = try await PublisherWorkflowTests.hot([
            "gc", "--on-demand-budget", "0", "--root", repository.root,
        ])
        #expect(collected.stdout.hasPrefix("evicted od7\n"), "\(collected.stdout)")
        #expect(try await repository.installed() == ["core": "1", "pre1": "1", "pre2": "1"])
        let root = URL(fileURLWithPath: repository.root)
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("packages/od7").path))
        #expect(try StoreInspection.leftovers(root: root) == [])

        // Asked again, the evicted pack is downloaded again, from the catalog the last sync
        // recorded (no manifest given).
        start = repository.nginx.requests().count
        try await PublisherWorkflowTests.hot(["install", "od7", "--root", repository.root])
        #expect(await repository.packagesServed(from: start, expecting: ["od7"]) == ["od7"])
        #expect(try await repository.installed()["od7"] == "2")
        await repository.stop()
    }

    @Test(
        "an entry added to catalog.json with an attacker's URL and its digest is refused: nothing fetched or installed"
    )
    func tamperedCatalogIsRefused() async throws {
        let repository = try await Repository("tampered-catalog")
        let published = repository.published
        try await PublisherWorkflowTests.hot(published.sync)

        // The attacker's pack: packed in a repository of its own, its archive served by the
        // same nginx outside what the manifest names.
        let attacker = published.work.appendingPathComponent("attacker")
        let source = published.work.appendingPathComponent("src/evil")
        try writeTree(["evil.txt": Data("evil".utf8)], under: source)
        try await PublisherWorkflowTests.hot([
            "pack", source.path, "--id", "evil", "--version", "1", "--repo", attacker.path, "--deltas", "0",
        ])
        let packed = try #require(
            try FileManager.default.contentsOfDirectory(atPath: attacker.appendingPathComponent("packages").path)
                .first { $0.hasSuffix(".zip") }
        )
        let served = URL(fileURLWithPath: repository.repo).appendingPathComponent("evil.zip")
        try FileManager.default.copyItem(at: attacker.appendingPathComponent("packages/\(packed)"), to: served)
        let bytes = try Data(contentsOf: served)
        let digest = try #require(
            try await Subprocess.check("sha256sum", [served.path]).stdout.split(separator: " ").first.map(String.init)
        )

        // catalog.json gains an on-demand entry for it, with a matching size and digest.
        let catalogURL = URL(fileURLWithPath: repository.root).appendingPathComponent("catalog.json")
        var catalog = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: catalogURL)) as? [String: Any]
        )
        var packages = try #require(catalog["packages"] as? [[String: Any]])
        packages.append([
            "id": "evil", "version": "1",
            "url": repository.nginx.baseURL.appendingPathComponent("evil.zip").absoluteString,
            "size": bytes.count, "sha256": digest, "delivery": "onDemand",
        ])
        catalog["packages"] = packages
        try JSONSerialization.data(withJSONObject: catalog, options: [.sortedKeys]).write(to: catalogURL)

        let start = repository.nginx.requests().count
        let refused = try await CommandLineTests.run(["install", "evil", "--root", repository.root])
        #expect(refused.status == 1, "\(refused.stdout)")
        #expect(refused.stderr.contains("is not the catalog the last trusted manifest wrote"), "\(refused.stderr)")
        // Nor does a package the trusted manifest offers come from the tampered catalog.
        let offered = try await CommandLineTests.run(["install", "od3", "--root", repository.root])
        #expect(
            offered.status == 1 && offered.stderr.contains("is not the catalog the last trusted manifest wrote"),
            "\(offered.stderr)"
        )
        #expect(repository.nginx.requests().count == start, "\(repository.nginx.requests().dropFirst(start))")
        #expect(try await repository.installed() == ["core": "1", "pre1": "1", "pre2": "1"])

        // A sync writes the trusted catalog again: the pack it offers installs with no manifest
        // given, and the attacker's entry is gone.
        try await PublisherWorkflowTests.hot(published.sync)
        let installed = try await PublisherWorkflowTests.hot(["install", "od3", "--root", repository.root])
        #expect(installed.stdout.hasPrefix("od3\t1\t"), "\(installed.stdout)")
        let again = try await CommandLineTests.run(["install", "evil", "--root", repository.root])
        #expect(again.status == 1 && again.stderr.contains("offers no such package"), "\(again.stderr)")
        #expect(!repository.nginx.requests().dropFirst(start).contains { $0.path == "/evil.zip" })
        await repository.stop()
    }

    @Test("hot sync --metered leaves a prefetch pack above the limit waiting, not failed, and fetches the launch pack")
    func meteredSync() async throws {
        let repository = try await Repository("metered")
        let published = repository.published
        let start = repository.nginx.requests().count
        let synced = try await CommandLineTests.run(published.sync + ["--metered", "--metered-prefetch-limit", "100"])
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(synced.stdout.contains("pre1\tadd\twaiting\t-\tfor an unmetered network"), "\(synced.stdout)")
        #expect(synced.stdout.contains("core\tadd\tok\t1"), "\(synced.stdout)")
        #expect(await repository.packagesServed(from: start, expecting: ["core"]) == ["core"])
        #expect(try await repository.installed() == ["core": "1"])
        // On an unmetered network the next sync fetches them.
        try await PublisherWorkflowTests.hot(published.sync)
        #expect(try await repository.installed() == ["core": "1", "pre1": "1", "pre2": "1"])
        await repository.stop()
    }

    @Test(
        "hot gc --on-demand-budget killed while it evicts: the store stays whole, the next change finishes the eviction",
        .enabled(if: FaultPointBuild.testsRun, FaultPointBuild.skipReason)
    )
    func killedDuringEviction() async throws {
        let repository = try await Repository("evict-kill")
        let published = repository.published
        try await PublisherWorkflowTests.hot(published.sync)
        for id in ["od3", "od7"] {
            try await PublisherWorkflowTests.hot(["install", id, "--root", repository.root])
        }
        let root = URL(fileURLWithPath: repository.root)
        let logs = published.work.appendingPathComponent("logs")
        try FileManager.default.createDirectory(at: logs, withIntermediateDirectories: true)
        let kept = ["core", "pre1", "pre2"]
        var trees: [String: [String: Data]] = [:]
        for id in kept + ["od3", "od7"] {
            trees[id] = try readTree(root.appendingPathComponent("packages/\(id)/1"))
        }

        // Killed before the commit: both packs stay, whole.
        let beforeCommit = try HotRun(
            ["gc", "--on-demand-budget", "0", "--root", root.path],
            environment: ["HOT_ABORT_AT": "mid-commit"],
            log: logs.appendingPathComponent("mid-commit.log")
        )
        #expect(await beforeCommit.wait() == .signalled(SIGABRT), "\(beforeCommit.output)")
        var status = try await StoreInspection.status(root: root, check: true, log: logs.appendingPathComponent("s1"))
        #expect(Set(status.keys) == Set(kept + ["od3", "od7"]))
        #expect(status.values.allSatisfy { $0.state == "installed" }, "\(status)")

        // Killed while the evicted trees' objects are freed: the eviction is committed, the
        // other packages are whole, and the next change frees what the kill left.
        let midRelease = try HotRun(
            ["gc", "--on-demand-budget", "0", "--root", root.path],
            environment: ["HOT_ABORT_AT": "mid-release:2"],
            log: logs.appendingPathComponent("mid-release.log")
        )
        #expect(await midRelease.wait() == .signalled(SIGABRT), "\(midRelease.output)")
        status = try await StoreInspection.status(root: root, check: true, log: logs.appendingPathComponent("s2"))
        #expect(Set(status.keys) == Set(kept), "\(status)")
        for id in kept {
            #expect(status[id]?.state == "installed")
            #expect(try readTree(root.appendingPathComponent("packages/\(id)/1")) == trees[id])
        }
        try await PublisherWorkflowTests.hot(["gc", "--root", root.path])
        #expect(try StoreInspection.leftovers(root: root) == [])
        // Asked again, an evicted pack comes back whole.
        try await PublisherWorkflowTests.hot(["install", "od3", "--root", root.path])
        #expect(try readTree(root.appendingPathComponent("packages/od3/1")) == trees["od3"])
        await repository.stop()
    }
}
