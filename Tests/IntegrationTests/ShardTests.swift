import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import HotVerify
import Testing

/// Sharded catalogues as users run them: `hot pack`, `hot shard`, `hot sign`, served by nginx,
/// read by `hot sync`.
@Suite("Sharded catalogues")
struct ShardTests {
    /// `count` one-file packages, packed, sharded and signed, served by nginx.
    static func serveSharded(_ count: Int) async throws -> NoChangeCheckTests.Served {
        try await NoChangeCheckTests.serve(
            (1...count).map { index in ("p\(index)", ["p\(index).txt": Data("package \(index)\n".utf8)]) },
            sharded: true
        )
    }

    /// The paths requested from request `start` on, once nginx logged `count` of them or ten
    /// seconds passed.
    static func requested(_ server: NginxServer, from start: Int) -> [NginxServer.Request] {
        Array(server.requests().dropFirst(start))
    }

    /// `hot pack` of version `version` of `id` (one file) and `hot sign` with the repository's key.
    static func publish(_ served: NoChangeCheckTests.Served, id: String, version: String) async throws {
        let source = try makeTemporaryDirectory("src-\(id)-\(version)")
        try Data("\(id) version \(version)\n".utf8).write(to: source.appendingPathComponent("\(id).txt"))
        let packed = try await CommandLineTests.run([
            "pack", source.path, "--id", id, "--version", version, "--repo", served.repo.path, "--deltas", "0",
        ])
        #expect(packed.status == 0, "\(packed.stderr)")
        #expect(packed.stderr.contains("top.json changed"), "\(packed.stderr)")
        let signed = try await CommandLineTests.run([
            "sign", "--repo", served.repo.path, "--key", served.privateKey, "--expires", "30d",
        ])
        #expect(signed.status == 0, "\(signed.stderr)")
    }

    /// The shard files of the repository, by name.
    static func shardFiles(_ repo: URL) -> Set<String> {
        Set(FileSystem.contents(of: repo.appendingPathComponent("manifests/shards")))
    }

    @Test(
        "one package changed of a sharded catalogue: the check downloads the timestamp, the top document and one shard; older clients read every package from manifest.json"
    )
    func oneChangeCostsOneShard() async throws {
        let served = try await Self.serveSharded(40)
        defer { served.server.stopNow() }
        let (server, repo, sync) = (served.server, served.repo, served.sync)

        // Every package installs from the shards.
        let first = try await CommandLineTests.run(sync)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try await served.installed().count == 40)
        let shards = Self.shardFiles(repo)
        #expect(shards.count > 20, "\(shards.count) shards")
        let fetched = server.requests().filter { $0.path.hasPrefix("/manifests/shards/") }
        #expect(Set(fetched.map { String($0.path.dropFirst("/manifests/shards/".count)) }) == shards)
        #expect(!server.requests().contains { $0.path == "/manifest.json" })

        // One package changes: one new shard file, and the check fetches it alone.
        try await Self.publish(served, id: "p7", version: "2")
        let added = Self.shardFiles(repo).subtracting(shards)
        #expect(added.count == 1, "\(added)")
        let before = server.requests().count
        let changed = try await CommandLineTests.run(sync)
        #expect(changed.status == 0, "\(changed.stderr)")
        #expect(changed.stdout.contains("p7\tupdate\tok\t2"), "\(changed.stdout)")
        let served2 = Self.requested(server, from: before).filter { !$0.path.hasPrefix("/packages/") }.map(\.path)
        #expect(served2.count == 3, "\(served2)")
        #expect(served2.first == "/timestamp.json")
        #expect(served2.contains { $0.hasPrefix("/manifests/") && !$0.hasPrefix("/manifests/shards/") })
        #expect(served2.contains("/manifests/shards/\(added.first ?? "")"), "\(served2)")

        // Nothing new: the timestamp alone.
        let quiet = server.requests().count
        let unchanged = try await CommandLineTests.run(sync)
        #expect(unchanged.status == 0, "\(unchanged.stderr)")
        #expect(Self.requested(server, from: quiet).map(\.path) == ["/timestamp.json"])

        // hot verify: the top document, its shards and manifest.json say the same.
        let verified = try await CommandLineTests.run(["verify", "--repo", repo.path, "--trust", served.publicKey])
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")

        // A client that reads manifest.json alone (no timestamp served) gets every package.
        let full = try SignedEnvelope.parse(Data(contentsOf: repo.appendingPathComponent("manifest.json")))
        let body = try SignedManifestBody.decode(full.signed)
        #expect(body.packages.count == 40 && body.shards == nil && body.schema == 2)
        #expect(body.package("p7")?.current == "2")
        try FileManager.default.removeItem(at: repo.appendingPathComponent("timestamp.json"))
        let older = try makeTemporaryDirectory("older-store")
        let alone = try await CommandLineTests.run(
            ["sync", "--manifest", server.baseURL.appendingPathComponent("manifest.json").absoluteString]
                + ["--root", older.path, "--trust", served.publicKey]
        )
        #expect(alone.status == 0, "\(alone.stderr)")
        #expect(alone.stdout.split(separator: "\n").filter { $0.contains("\tadd\tok\t") }.count == 40)
    }

    /// How a served shard or top document is forged.
    enum Forgery: String, CaseIterable, CustomTestStringConvertible {
        case otherBytesSameLength, longer, topSignedByNobody
        var testDescription: String { rawValue }
    }

    @Test(
        "a shard whose bytes differ from its named hash, or a top document whose signatures do not hold, is refused and the installed versions stay",
        arguments: Forgery.allCases
    )
    func refused(_ forgery: Forgery) async throws {
        let served = try await Self.serveSharded(6)
        defer { served.server.stopNow() }
        let (server, repo, sync) = (served.server, served.repo, served.sync)
        #expect(try await CommandLineTests.run(sync).status == 0)
        let installed = try await served.installed()
        #expect(installed.count == 6)

        let shards = Self.shardFiles(repo)
        try await Self.publish(served, id: "p2", version: "2")
        let added = try #require(Self.shardFiles(repo).subtracting(shards).first)
        let shard = repo.appendingPathComponent("manifests/shards/\(added)")
        var expected = HotUpdateError.Code.shardMismatch
        switch forgery {
        case .otherBytesSameLength:
            var bytes = try Data(contentsOf: shard)
            let index = try #require(bytes.lastIndex(of: UInt8(ascii: "2")))
            bytes[index] = UInt8(ascii: "9")
            try bytes.write(to: shard)
        case .longer:
            try (Data(contentsOf: shard) + Data("\n".utf8)).write(to: shard)
        case .topSignedByNobody:
            // The top document's signed part changed (one shard named otherwise) with its old
            // signature kept, and a timestamp the release key signs naming it.
            let top = repo.appendingPathComponent("top.json")
            var envelope = try SignedEnvelope.parse(Data(contentsOf: top))
            var body = try SignedManifestBody.decode(envelope.signed)
            body.shards?[0].count += 1
            envelope.signed = try body.canonicalBytes()
            try envelope.encoded().write(to: top)
            let stamped = try await CommandLineTests.run([
                "timestamp", "--repo", repo.path, "--key", served.privateKey,
            ])
            #expect(stamped.status == 0, "\(stamped.stderr)")
            expected = .signatureInvalid
        }
        let before = server.requests().count
        let refused = try await CommandLineTests.run(sync)
        #expect(refused.status != 0, "\(refused.stdout)")
        let message = expected == .shardMismatch ? "the shard of bin" : "valid signatures by trusted keys"
        #expect(refused.stderr.contains(message), "\(refused.stderr)")
        #expect(try await served.installed() == installed)
        let paths = Self.requested(server, from: before).map(\.path)
        #expect(!paths.contains { $0.hasPrefix("/packages/") }, "\(paths)")
        if forgery == .topSignedByNobody {
            // Refused before any shard was asked for.
            #expect(!paths.contains { $0.hasPrefix("/manifests/shards/") }, "\(paths)")
        }

        // The same refusal through the library, with its code, for a client that holds nothing.
        let key = try PublicKey(scheme: .ed25519, pem: String(contentsOfFile: served.publicKey, encoding: .utf8))
        let client = try SignedClient(trust: .signed(by: [key]))
        let url = server.baseURL.appendingPathComponent("manifest.json")
        await #expect(throws: HotUpdateError(expected, "")) { try await client.source(url).fetchManifest() }
        #expect(try await client.active().isEmpty)
    }
}

extension ShardTests {
    enum LocalDamage: String, CaseIterable, CustomTestStringConvertible {
        case otherBytesSameLength, longer, shorter, missing
        var testDescription: String { rawValue }
    }

    @Test(
        "hot sign refuses a shard file that is not what the top document names, and changes nothing it serves",
        arguments: LocalDamage.allCases
    )
    func signRefusesDamagedShard(_ damage: LocalDamage) async throws {
        let served = try await Self.serveSharded(6)
        served.server.stopNow()
        let repo = served.repo
        let shard = repo.appendingPathComponent(
            "manifests/shards/\(try #require(Self.shardFiles(repo).sorted().first))"
        )
        let bytes = try Data(contentsOf: shard)
        switch damage {
        case .otherBytesSameLength:
            var changed = bytes
            let index = try #require(changed.lastIndex(of: UInt8(ascii: "1")))
            changed[index] = UInt8(ascii: "9")
            try changed.write(to: shard)
        case .longer: try (bytes + Data("\n".utf8)).write(to: shard)
        case .shorter: try bytes.dropLast().write(to: shard)
        case .missing: try FileManager.default.removeItem(at: shard)
        }
        let servedFiles = ["manifest.json", "top.json", "timestamp.json"].map { repo.appendingPathComponent($0) }
        let before = try servedFiles.map { try Data(contentsOf: $0) }
        let signed = try await CommandLineTests.run([
            "sign", "--repo", repo.path, "--key", served.privateKey, "--expires", "30d",
        ])
        #expect(signed.status != 0, "\(signed.stdout)")
        let expected = damage == .missing ? "cannot read manifests/shards/" : "the top document names"
        let named = damage == .otherBytesSameLength ? "has SHA-256" : expected
        #expect(signed.stderr.contains(named), "\(signed.stderr)")
        #expect(try servedFiles.map { try Data(contentsOf: $0) } == before)
    }
}

extension ShardTests {
    @Test(
        "a rollout step on a sharded channel is signed over the top document and manifest.json: clients of either go back"
    )
    func rolloutStep() async throws {
        let served = try await Self.serveSharded(8)
        defer { served.server.stopNow() }
        let (repo, sync) = (served.repo, served.sync)
        let keys = try makeTemporaryDirectory("rollout-keys")
        let rolloutKey = keys.appendingPathComponent("rollout.pem").path
        let rolloutPublic = keys.appendingPathComponent("rollout.pub").path
        #expect(
            try await CommandLineTests.run(["keygen", "--private", rolloutKey, "--public", rolloutPublic]).status == 0
        )
        let source = try makeTemporaryDirectory("src-p3-2")
        try Data("p3 version 2\n".utf8).write(to: source.appendingPathComponent("p3.txt"))
        #expect(
            try await CommandLineTests.run([
                "pack", source.path, "--id", "p3", "--version", "2", "--repo", repo.path, "--deltas", "0",
            ]).status == 0
        )
        let signed = try await CommandLineTests.run([
            "sign", "--repo", repo.path, "--key", served.privateKey, "--rollout-key", rolloutPublic,
        ])
        #expect(signed.status == 0, "\(signed.stderr)")
        let first = try await CommandLineTests.run(sync)
        #expect(first.stdout.contains("p3\tadd\tok\t2"), "\(first.stdout)")

        // The rollout role takes p3 back to version 1; the release key signs the timestamp.
        let step = try await CommandLineTests.run([
            "rollout", "p3", "--back", "--key", rolloutKey, "--timestamp-key", served.privateKey, "--repo", repo.path,
        ])
        #expect(step.status == 0, "\(step.stderr)")
        let top = try SignedEnvelope.parse(Data(contentsOf: repo.appendingPathComponent("top.json")))
        let whole = try SignedEnvelope.parse(Data(contentsOf: repo.appendingPathComponent("manifest.json")))
        #expect(top.rollout != nil && whole.rollout != nil)
        let back = try await CommandLineTests.run(sync)
        #expect(back.status == 0, "\(back.stderr)")
        #expect(
            back.stdout.split(separator: "\n").contains { $0.hasPrefix("p3\t") && $0.hasSuffix("\tok\t1") },
            "\(back.stdout)"
        )
        let verified = try await CommandLineTests.run(["verify", "--repo", repo.path, "--trust", served.publicKey])
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")

        // A client of manifest.json alone gets version 1 of p3 as well.
        try FileManager.default.removeItem(at: repo.appendingPathComponent("timestamp.json"))
        let older = try makeTemporaryDirectory("older-store")
        let alone = try await CommandLineTests.run(
            ["sync", "--manifest", served.server.baseURL.appendingPathComponent("manifest.json").absoluteString]
                + ["--root", older.path, "--trust", served.publicKey]
        )
        #expect(alone.status == 0, "\(alone.stderr)")
        #expect(alone.stdout.contains("p3\tadd\tok\t1"), "\(alone.stdout)")
    }
}
