import Foundation
import HotCore
import HotTestServers
import HotTesting
import HotVerify
import Testing

/// The check an app runs at every launch, when nothing changed, as users run it.
@Suite("A check that finds nothing new")
struct NoChangeCheckTests {
    /// Every file under `root`: its size, modification time (nanoseconds) and SHA-256.
    static func fingerprint(_ root: URL) throws -> [String: String] {
        var result: [String: String] = [:]
        let enumerator = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil)
        while let url = enumerator?.nextObject() as? URL {
            var info = stat()
            guard lstat(url.path, &info) == 0 else { continue }
            let relative = String(url.standardizedFileURL.path.dropFirst(root.standardizedFileURL.path.count))
            let modified = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
            if (info.st_mode & S_IFMT) == S_IFREG {
                let digest = try CryptoVerifier().digest(ofFile: url, using: .sha256).hex
                result[relative] = "\(info.st_size) \(modified) \(digest)"
            } else {
                result[relative] = "dir \(modified)"
            }
        }
        return result
    }

    /// A key pair made by `hot keygen` and `repo` signed with it by `hot sign`.
    static func sign(_ repo: URL, expires: String = "30d") async throws -> (privateKey: String, publicKey: String) {
        let keys = try makeTemporaryDirectory("keys")
        let privateKey = keys.appendingPathComponent("k.pem").path
        let publicKey = keys.appendingPathComponent("k.pub").path
        #expect(try await CommandLineTests.run(["keygen", "--private", privateKey, "--public", publicKey]).status == 0)
        let signed = try await CommandLineTests.run([
            "sign", "--repo", repo.path, "--key", privateKey, "--expires", expires,
        ])
        #expect(signed.status == 0, "\(signed.stderr)")
        #expect(signed.stdout.contains("signed timestamp.json"), "\(signed.stdout)")
        return (privateKey, publicKey)
    }

    /// A repository as a publisher makes one, served by nginx on loopback, and the `hot sync`
    /// of a new store reading it.
    struct Served {
        let repo: URL
        let server: NginxServer
        let root: URL
        let sync: [String]
        let privateKey: String
        let publicKey: String

        /// The store's packages as `hot status` lists them: `id version state`.
        func installed() async throws -> [String] {
            try await status().map { "\($0.id) \($0.version ?? "-") \($0.state)" }
        }

        /// The store's packages, from `hot status --json`.
        func status() async throws -> [CommandLineTests.StatusDocument.Package] {
            let status = try await CommandLineTests.run(["status", "--root", root.path, "--json"])
            return try JSONDecoder().decode(CommandLineTests.StatusDocument.self, from: Data(status.stdout.utf8))
                .packages
        }
    }

    /// `hot pack` of each package (its id and files, version 1), `hot shard` when `sharded`,
    /// `hot sign` expiring at `expires`, served by nginx (the caller stops it); `hot sync` over
    /// `transport`, or the default one.
    static func serve(
        _ packages: [(id: String, files: [String: Data])],
        expires: String = "30d",
        transport: TransportKind? = nil,
        sharded: Bool = false
    ) async throws -> Served {
        let repo = try makeTemporaryDirectory("repo")
        for (id, files) in packages {
            let source = try makeTemporaryDirectory("src-\(id)")
            try writeTree(files, under: source)
            let packed = try await CommandLineTests.run([
                "pack", source.path, "--id", id, "--version", "1", "--repo", repo.path,
            ])
            #expect(packed.status == 0, "\(packed.stderr)")
        }
        if sharded {
            let shard = try await CommandLineTests.run(["shard", "--repo", repo.path])
            #expect(shard.status == 0 && shard.stdout.contains("sharded manifest.json"), "\(shard.stderr)")
        }
        let (privateKey, publicKey) = try await sign(repo, expires: expires)
        let server = try await NginxServer.start(root: repo)
        let root = try makeTemporaryDirectory("store")
        let sync =
            [
                "sync", "--manifest", server.baseURL.appendingPathComponent("manifest.json").absoluteString,
                "--root", root.path, "--trust", publicKey,
            ] + (transport.map { ["--transport", $0.rawValue] } ?? [])
        return Served(
            repo: repo,
            server: server,
            root: root,
            sync: sync,
            privateKey: privateKey,
            publicKey: publicKey
        )
    }

    @Test("hot sync against an unchanged signed manifest leaves every file under the root as it was")
    func nothingWritten() async throws {
        let served = try await Self.serve(
            ["a", "b", "c"].map { id in (id, ["\(id).txt": Data(id.utf8), "img/\(id).png": noise(2_000, seed: 7)]) }
        )
        defer { served.server.stopNow() }
        let (repo, root, sync) = (served.repo, served.root, served.sync)
        let first = try await CommandLineTests.run(sync)
        #expect(first.status == 0, "\(first.stderr)")
        let installed = try Self.fingerprint(root)
        #expect(installed.keys.contains("/trust.json") && installed.keys.contains("/catalog.json"))

        // Two more checks, as two launches would run them: the same manifest, nothing to do.
        for _ in 0..<2 {
            let again = try await CommandLineTests.run(sync)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(again.stdout.contains("unchanged"), "\(again.stdout)")
            let after = try Self.fingerprint(root)
            let changed = Set(after.keys).union(installed.keys).filter { after[$0] != installed[$0] }.sorted()
            #expect(changed.isEmpty, "written by a check that found nothing new: \(changed)")
        }

        // A new release is still installed by the next check.
        let source = try makeTemporaryDirectory("src-b2")
        try writeTree(["b.txt": Data("b2".utf8)], under: source)
        #expect(
            try await CommandLineTests.run(["pack", source.path, "--id", "b", "--version", "2", "--repo", repo.path])
                .status == 0
        )
        #expect(
            try await CommandLineTests.run(["sign", "--repo", repo.path, "--key", served.privateKey]).status == 0
        )
        let updated = try await CommandLineTests.run(sync)
        #expect(updated.status == 0, "\(updated.stderr)")
        #expect(try await served.installed() == ["a 1 installed", "b 2 installed", "c 1 installed"])
    }

    @Test(
        "a manifest unchanged is answered 304 with no body, over both transports; the kept bytes are checked again, and past their expiry a 304 is refused",
        arguments: TransportKind.allCases
    )
    func conditionalRequests(_ transport: TransportKind) async throws {
        let served = try await Self.serve([("a", ["a.txt": Data("a".utf8)])], expires: "1d", transport: transport)
        defer { served.server.stopNow() }
        let (repo, server, sync) = (served.repo, served.server, served.sync)
        // A server without timestamps (one written before them): the manifest alone, asked for
        // conditionally. The timestamp's own conditional requests are `timestampConditional`.
        let timestamp = repo.appendingPathComponent("timestamp.json")
        try FileManager.default.removeItem(at: timestamp)
        let manifestSize = Int64(try Data(contentsOf: repo.appendingPathComponent("manifest.json")).count)
        let manifestRequests = { server.requests().filter { $0.path == "/manifest.json" } }

        #expect(try await CommandLineTests.run(sync).status == 0)
        let again = try await CommandLineTests.run(sync)
        #expect(again.status == 0, "\(again.stderr)")
        var answers = await server.waitForRequests(path: "/manifest.json", count: 2)
        #expect(answers.map(\.status) == [200, 304])
        #expect(answers.map(\.bodyBytesSent) == [manifestSize, 0])

        // Two days on, the server still answers 304: the kept manifest has expired, and the
        // check is refused with the installed version intact.
        let late = try await ClockTests.hot(at: "+2d", sync)
        #expect(late.status != 0)
        #expect(late.stderr.contains("expired"), "\(late.stderr)")
        answers = await server.waitForRequests(path: "/manifest.json", count: 3)
        #expect(answers.last?.status == 304)
        #expect(try await served.installed() == ["a 1 installed"])

        // Re-signed, the manifest has new bytes: answered 200 and accepted.
        #expect(
            try await CommandLineTests.run(["sign", "--repo", repo.path, "--key", served.privateKey]).status == 0
        )
        try FileManager.default.removeItem(at: timestamp)
        // nginx's ETag is the modification time in seconds and the size: a file re-signed within
        // the same second to the same size would look unchanged. An upload sets a new time.
        let manifestFile = repo.appendingPathComponent("manifest.json")
        try FileManager.default.setAttributes(
            [.modificationDate: Date().addingTimeInterval(60)],
            ofItemAtPath: manifestFile.path
        )
        let resigned = try await CommandLineTests.run(sync)
        #expect(resigned.status == 0, "\(resigned.stderr)")
        #expect(manifestRequests().last?.status == 200)
    }

    @Test(
        "a timestamp unchanged is answered 304 and names the kept manifest: no manifest is requested, over both transports; past its expiry a 304 is refused",
        arguments: TransportKind.allCases
    )
    func timestampConditional(_ transport: TransportKind) async throws {
        let served = try await Self.serve([("a", ["a.txt": Data("a".utf8)])], expires: "1d", transport: transport)
        defer { served.server.stopNow() }
        let (server, sync) = (served.server, served.sync)
        let timestampSize = Int64(try Data(contentsOf: served.repo.appendingPathComponent("timestamp.json")).count)
        #expect(timestampSize < 1_024)
        #expect(try await CommandLineTests.run(sync).status == 0)
        for _ in 0..<2 {
            let again = try await CommandLineTests.run(sync)
            #expect(again.status == 0, "\(again.stderr)")
        }
        let answers = await server.waitForRequests(path: "/timestamp.json", count: 3)
        #expect(answers.map(\.status) == [200, 304, 304])
        #expect(answers.map(\.bodyBytesSent) == [timestampSize, 0, 0])
        // The manifest came once, from its content-addressed copy the timestamp names.
        let manifests = server.requests().filter { $0.path.hasSuffix(".json") && $0.path != "/timestamp.json" }
        #expect(manifests.count == 1 && manifests[0].path.hasPrefix("/manifests/"), "\(manifests.map(\.path))")

        // Two days on, the server still answers 304: the kept timestamp and manifest have
        // expired, and the check is refused with the installed version intact.
        let late = try await ClockTests.hot(at: "+2d", sync)
        #expect(late.status != 0)
        #expect(late.stderr.contains("expired"), "\(late.stderr)")
        #expect(await server.waitForRequests(path: "/timestamp.json", count: 4).last?.status == 304)
        #expect(try await served.installed() == ["a 1 installed"])
    }

    @Test(
        "a check whose manifest the store settled on requests the timestamp alone and opens neither the manifest nor the store's files"
    )
    func settledCheckReadsNothing() async throws {
        let strace = try StoreWriteAuditTests.strace()
        let served = try await Self.serve(["a", "b"].map { id in (id, ["\(id).txt": Data(id.utf8)]) })
        defer { served.server.stopNow() }
        let (server, root, sync) = (served.server, served.root, served.sync)
        let installed = try await CommandLineTests.run(sync)
        #expect(installed.status == 0, "\(installed.stderr)")
        let logged = await server.waitForRequests(path: "/timestamp.json", count: 1).count
        let before = server.requests().count

        // The check, under strace: every file it opens.
        let log = try makeTemporaryDirectory("strace").appendingPathComponent("trace.txt")
        let traced = try await Subprocess.run(
            strace,
            ["-f", "-qq", "-e", "trace=open,openat", "-o", log.path, try CommandLineTests.hotExecutable().path] + sync
        )
        #expect(traced.status == 0, "\(traced.stderr)")
        #expect(
            traced.stdout.contains("a\tunchanged\tok\t1") && traced.stdout.contains("b\tunchanged\tok\t1"),
            "\(traced.stdout)"
        )
        let opened = try String(contentsOf: log, encoding: .utf8).split(separator: "\n").compactMap { line -> String? in
            guard let start = line.range(of: "\"\(root.path)/"), !line.contains("ENOENT") else { return nil }
            let rest = line[start.upperBound...]
            return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
        }
        for file in ["store.json", "manifest.kept", "catalog.json"] {
            #expect(!opened.contains(file), "the settled check opened \(file): \(Set(opened).sorted())")
        }
        #expect(opened.contains("settled.json"), "\(Set(opened).sorted())")
        // Over the network: the timestamp alone, answered 304.
        let answers = await server.waitForRequests(path: "/timestamp.json", count: logged + 1)
        #expect(answers.last?.status == 304)
        #expect(server.requests().dropFirst(before).map(\.path) == ["/timestamp.json"])

        // A tree lost since: the check looks at no package's directory (a fixed number of
        // stats whatever the catalogue), so the reader that misses a file marks the package
        // (`hot resolve`, as an app's resolver), and the next check heals it from the objects.
        let tree = try #require(try await served.status().first { $0.id == "a" }?.path)
        try FileManager.default.removeItem(atPath: tree)
        let resolved = try await CommandLineTests.run(["resolve", "a.txt", "--root", root.path])
        #expect(resolved.status != 0 || !resolved.stdout.contains(tree), "\(resolved.stdout)")
        #expect(!FileSystem.contents(of: root.appendingPathComponent("losses")).filter { !$0.hasPrefix(".") }.isEmpty)
        let healed = try await CommandLineTests.run(sync)
        #expect(healed.stdout.contains("a\theal\tok\t1"), "\(healed.stdout)")
        #expect(FileManager.default.fileExists(atPath: tree + "/a.txt"))
    }

    @Test(
        "a sync killed while it records the manifest it settled on: the version stays installed, and the next check reads the manifest, records it and removes what the kill left",
        .enabled(if: FaultPointBuild.testsRun, FaultPointBuild.skipReason)
    )
    func killedWhileRecordingSettled() async throws {
        let served = try await Self.serve([("a", ["a.txt": Data("a".utf8)])])
        defer { served.server.stopNow() }
        let (server, root, sync) = (served.server, served.root, served.sync)
        func leftovers() -> [String] { FileSystem.contents(of: root).filter { $0.hasPrefix(".settled.json.tmp-") } }
        let settled = root.appendingPathComponent("settled.json")

        // The install, killed once its settled record is written to a temporary file.
        let logs = try makeTemporaryDirectory("logs")
        let killed = try HotRun(
            sync,
            environment: ["HOT_ABORT_AT": "mid-settled"],
            log: logs.appendingPathComponent("killed.log")
        )
        #expect(await killed.wait() == .signalled(SIGABRT), "\(killed.output)")
        #expect(leftovers().count == 1, "\(FileSystem.contents(of: root))")
        #expect(!FileManager.default.fileExists(atPath: settled.path))
        let package = try #require(try await served.status().first { $0.id == "a" })
        #expect(package.version == "1" && package.state == "installed", "\(package)")
        let tree = try #require(package.path)
        #expect(try Data(contentsOf: URL(fileURLWithPath: tree).appendingPathComponent("a.txt")) == Data("a".utf8))

        // The next check finds nothing new, records the settled manifest and removes the
        // temporary file the kill left.
        let next = try await CommandLineTests.run(sync)
        #expect(next.status == 0, "\(next.stderr)")
        #expect(next.stdout.contains("a\tunchanged\tok\t1"), "\(next.stdout)")
        #expect(leftovers().isEmpty, "\(FileSystem.contents(of: root))")
        // Its first line is the record, then one line per package.
        let lines = try Data(contentsOf: settled).split(separator: 0x0A)
        let record = try JSONSerialization.jsonObject(with: Data(try #require(lines.first))) as? [String: Any]
        #expect(record?["revision"] is String, "\(String(describing: record))")
        #expect(lines.dropFirst().map { String(decoding: $0, as: UTF8.self) } == ["a\tunchanged\t1"])

        // And the check after it takes the settled record: the timestamp alone is requested,
        // and nothing under the root changes.
        let before = try Self.fingerprint(root)
        let logged = await server.waitForRequests(path: "/timestamp.json", count: 2).count
        let requests = server.requests().count
        let last = try await CommandLineTests.run(sync)
        #expect(last.status == 0 && last.stdout.contains("a\tunchanged\tok\t1"), "\(last.stdout)\(last.stderr)")
        #expect(await server.waitForRequests(path: "/timestamp.json", count: logged + 1).count == logged + 1)
        #expect(server.requests().dropFirst(requests).map(\.path) == ["/timestamp.json"])
        #expect(try Self.fingerprint(root) == before)
    }
}
