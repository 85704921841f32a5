import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import HotVerify
import Testing

/// The channel's timestamp, over nginx on 127.0.0.1: a small signed document that names the
/// current manifest, fetched first. What a timestamp key can and cannot do, each refusal with
/// its own code and the installed version intact.
@Suite("The timestamp: what names the manifest, and what a timestamp key cannot do")
struct TimestampTests {
    /// A repository whose release manifest (version 1, signed by `release` an hour ago,
    /// expiring in a day) releases app 1 then 2 and delegates the timestamp to `timestamp`:
    /// a timestamp may expire as late as the later of the release's expiry and two hours past
    /// its signing, a day from now.
    struct Rig {
        let release: CryptoSigner
        let timestamp: CryptoSigner
        let repository: SignedRepository
        let manifest: Data
        let signedAt: Date
        let server: NginxServer

        var url: URL { repository.url(on: server) }
        var timestampFile: URL { repository.directory.appendingPathComponent(TimestampPart.fileName) }

        /// Serves a timestamp naming `bytes` (the served manifest by default), signed by
        /// `signers` (the timestamp key by default).
        @discardableResult
        func serveTimestamp(
            naming bytes: Data? = nil,
            version: Int? = nil,
            signedBy signers: [any Signer]? = nil,
            signedAt: Date? = nil,
            expires: Date = Date().addingTimeInterval(1_800)
        ) throws -> Data {
            let named = bytes ?? manifest
            let verifier = CryptoVerifier()
            let release = try SignedManifestBody.decode(SignedEnvelope.parse(named).signed)
            let part = try TimestampPart.naming(
                named,
                version: version ?? release.version,
                channel: nil,
                signedAt: signedAt ?? Date(),
                expires: expires,
                verifier: verifier
            )
            let served = try SignedEnvelope.sign(
                try part.canonicalBytes(),
                with: signers ?? [timestamp],
                verifier: verifier
            ).encoded()
            try Self.replace(timestampFile, with: served)
            return served
        }

        /// Writes `data` to `file` with a modification time past the one it had: nginx's
        /// `ETag` is the time in seconds and the size, and a file rewritten within the second to
        /// the same size would be answered 304.
        static func replace(_ file: URL, with data: Data) throws {
            let previous = (try? FileManager.default.attributesOfItem(atPath: file.path)[.modificationDate]) as? Date
            try data.write(to: file)
            let after = max(Date(), (previous ?? .distantPast).addingTimeInterval(2))
            try FileManager.default.setAttributes([.modificationDate: after], ofItemAtPath: file.path)
        }

        /// A client that trusts the release key and accepted the manifest with its timestamp.
        func client() async throws -> SignedClient {
            let client = try SignedClient(trust: .signed(by: [release.publicKey]))
            let report = try await client.sync(url)
            #expect(report.failures.isEmpty, "\(report.failures)")
            #expect(try await client.active() == ["app 2"])
            return client
        }

        /// Releases app 3 in manifest version 2 and serves it, with a timestamp naming it.
        func releaseThree() throws -> Data {
            repository.body.editPackage("app") { $0.releases.append("3") }
            repository.body.signedAt = Date()
            let bytes = try repository.sign(with: [release], expires: Date().addingTimeInterval(86_400))
            try serveTimestamp(naming: bytes)
            return bytes
        }
    }

    static func makeRig(role: Bool = true) async throws -> Rig {
        let release = try CryptoSigner.generate()
        let timestamp = try CryptoSigner.generate()
        let repository = try SignedRepository(keys: [release])
        for version in ["1", "2"] { try repository.pack(releaseFiles(version), id: "app", version: version) }
        try repository.pack(releaseFiles("3"), id: "app", version: "3", release: false)
        if role {
            let id = try CryptoVerifier().keyID(of: timestamp.publicKey)
            repository.body.timestampRole = TimestampRole(keys: [id: .init(timestamp.publicKey)], maxLifetime: 7_200)
        }
        let signedAt = Date().addingTimeInterval(-3_600)
        repository.body.signedAt = signedAt
        let bytes = try repository.sign(with: [release], expires: Date().addingTimeInterval(86_400))
        let server = try await NginxServer.start(root: repository.directory)
        let rig = Rig(
            release: release,
            timestamp: timestamp,
            repository: repository,
            manifest: bytes,
            signedAt: signedAt,
            server: server
        )
        try rig.serveTimestamp()
        return rig
    }

    @Test("a timestamp naming the manifest the client holds ends the check: no manifest is requested")
    func namesKept() async throws {
        let rig = try await Self.makeRig()
        let server = rig.server
        defer { server.stopNow() }
        let client = try await rig.client()
        #expect(await server.waitForRequests(path: "/manifest.json", count: 1).count == 1)
        #expect(try await client.sync(rig.url).failures.isEmpty)
        #expect(await server.waitForRequests(path: "/timestamp.json", count: 2).count == 2)
        #expect(server.requests().filter { $0.path == "/manifest.json" }.count == 1)
        #expect(try await client.active() == ["app 2"])

        // A new release: the timestamp names other bytes, and the manifest is downloaded once.
        _ = try rig.releaseThree()
        #expect(try await client.sync(rig.url).failures.isEmpty)
        #expect(try await client.active() == ["app 3"])
        _ = await server.waitForRequests(path: "/timestamp.json", count: 3)
        #expect(server.requests().filter { $0.path == "/manifest.json" }.count == 2)
    }

    enum Refusal: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case expired, replayed, otherBytes, otherVersion, releaseKeyWhereRoleDeclared, attackerKey, missing
        case signedBeforeRelease, expiresPastBound
        var testDescription: String { rawValue }

        var expected: HotUpdateError.Code {
            switch self {
            case .expired: .timestampExpired
            case .replayed: .timestampRollback
            case .otherBytes, .otherVersion: .timestampMismatch
            case .releaseKeyWhereRoleDeclared, .attackerKey: .timestampUnauthorized
            case .missing: .timestampMissing
            case .signedBeforeRelease, .expiresPastBound: .timestampRoleExceeded
            }
        }
    }

    @Test(
        "a timestamp that is expired, replayed, names other bytes, is signed by an undelegated key, is missing or exceeds its bounds is refused, and the client keeps what it has",
        arguments: Refusal.allCases
    )
    func refused(_ refusal: Refusal) async throws {
        let rig = try await Self.makeRig()
        let server = rig.server
        defer { server.stopNow() }
        var client = try await rig.client()
        switch refusal {
        case .expired:
            // The manifest lives a day, the timestamp half an hour: an hour on, it has expired.
            client.now = { Date().addingTimeInterval(3_600) }
        case .replayed:
            // The client took version 2; the timestamp naming version 1 comes back.
            let older = try Data(contentsOf: rig.timestampFile)
            _ = try rig.releaseThree()
            #expect(try await client.sync(rig.url).failures.isEmpty)
            try Rig.replace(rig.timestampFile, with: older)
            try rig.repository.write(rig.manifest)
        case .otherBytes:
            // A timestamp naming a manifest the release keys signed, but not the one served.
            var other = rig.repository.body
            other.version = 5
            let bytes = try SignedEnvelope.sign(
                try other.canonicalBytes(),
                with: [rig.release],
                verifier: CryptoVerifier()
            )
            .encoded()
            try rig.serveTimestamp(naming: bytes, version: 1)
            client = try SignedClient(trust: client.trust)
        case .otherVersion:
            try rig.serveTimestamp(version: 2)
            client = try SignedClient(trust: client.trust)
        case .releaseKeyWhereRoleDeclared:
            try rig.serveTimestamp(signedBy: [rig.release])
        case .attackerKey:
            try rig.serveTimestamp(signedBy: [try CryptoSigner.generate()])
        case .missing:
            try FileManager.default.removeItem(at: rig.timestampFile)
        case .signedBeforeRelease:
            try rig.serveTimestamp(signedAt: rig.signedAt.addingTimeInterval(-60))
        case .expiresPastBound:
            // Past both the release's expiry (a day) and two hours past its signing.
            try rig.serveTimestamp(expires: Date().addingTimeInterval(2 * 86_400))
        }
        let updater = client.updater()
        var thrown: HotUpdateError?
        do {
            _ = try await updater.sync(from: client.source(rig.url))
        } catch let error as HotUpdateError {
            thrown = error
        }
        #expect(thrown?.code == refusal.expected, "\(refusal): \(thrown?.message ?? "accepted")")
        if refusal == .replayed {
            #expect(try await client.active() == ["app 3"])
            // Refused before the manifest was downloaded again.
            #expect(await server.waitForRequests(path: "/manifest.json", count: 2).count == 2)
        } else if refusal == .otherBytes || refusal == .otherVersion {
            #expect(try await client.active().isEmpty)
        } else {
            #expect(try await client.active() == ["app 2"])
        }
    }

    @Test(
        "a timestamp the role lets outlive its manifest does not keep it: the manifest's expiry holds, on a settled check too"
    )
    func manifestExpiryHolds() async throws {
        let release = try CryptoSigner.generate()
        let timestamp = try CryptoSigner.generate()
        let repository = try SignedRepository(keys: [release])
        try repository.pack(releaseFiles("1"), id: "app", version: "1")
        let id = try CryptoVerifier().keyID(of: timestamp.publicKey)
        // The role may sign timestamps for 14 days; the manifest lives an hour.
        repository.body.timestampRole = TimestampRole(keys: [id: .init(timestamp.publicKey)])
        repository.body.signedAt = Date()
        let bytes = try repository.sign(with: [release], expires: Date().addingTimeInterval(3_600))
        let server = try await NginxServer.start(root: repository.directory)
        defer { server.stopNow() }
        let rig = Rig(
            release: release,
            timestamp: timestamp,
            repository: repository,
            manifest: bytes,
            signedAt: Date(),
            server: server
        )
        try rig.serveTimestamp(expires: Date().addingTimeInterval(4 * 3_600))
        var client = try SignedClient(trust: .signed(by: [release.publicKey]))
        #expect(try await client.sync(rig.url).failures.isEmpty)
        // Settled: the next check asks only for the timestamp, and finds nothing new.
        #expect(try await client.sync(rig.url).isUnchanged)
        // Two hours on, the timestamp is valid and the manifest it names has expired.
        client.now = { Date().addingTimeInterval(2 * 3_600) }
        await #expect(throws: HotUpdateError(.manifestExpired, "")) { try await client.sync(rig.url) }
        #expect(try await client.active() == ["app 1"])
    }

    @Test("without a timestamp role the release keys sign it; a server without one is read through the manifest alone")
    func withoutRole() async throws {
        let rig = try await Self.makeRig(role: false)
        let server = rig.server
        defer { server.stopNow() }
        // The timestamp key is no role's: refused.
        let client = try SignedClient(trust: .signed(by: [rig.release.publicKey]))
        await #expect(throws: HotUpdateError(.timestampUnauthorized, "")) { try await client.sync(rig.url) }
        // The release keys' timestamp: accepted.
        try rig.serveTimestamp(signedBy: [rig.release])
        #expect(try await client.sync(rig.url).failures.isEmpty)
        #expect(try await client.active() == ["app 2"])
        // No timestamp: the manifest alone, since no role requires one.
        try FileManager.default.removeItem(at: rig.timestampFile)
        _ = try rig.releaseThree()
        try FileManager.default.removeItem(at: rig.timestampFile)
        #expect(try await client.sync(rig.url).failures.isEmpty)
        #expect(try await client.active() == ["app 3"])
    }
}

/// The timestamp with the real `hot` commands, served by nginx on 127.0.0.1.
@Suite("hot timestamp: the timestamp signed by its role")
struct TimestampCommandTests {
    @discardableResult
    static func hot(_ arguments: [String]) async throws -> CommandLineTests.Result {
        try await PublisherWorkflowTests.hot(arguments)
    }

    @Test(
        "hot sign writes a timestamp; --timestamp-key delegates it to hot timestamp, which refuses other keys and bounds; hot rollout keeps clients consistent"
    )
    func workflow() async throws {
        let (work, repo, release, rollout) = try await RolloutCommandTests.makeRepository("timestamp-role")
        let root = work.appendingPathComponent("store").path
        let timestamp = work.appendingPathComponent("timestamp").path
        try await Self.hot(["keygen", "--private", timestamp + ".pem", "--public", timestamp + ".pub"])
        let server = try await NginxServer.start(root: URL(fileURLWithPath: repo))
        defer { server.stopNow() }
        let manifest = server.baseURL.appendingPathComponent("manifest.json").absoluteString
        let sync = ["sync", "--manifest", manifest, "--root", root, "--trust", release + ".pub"]
        func active() async throws -> String? {
            try await Self.hot(sync)
            let status = try JSONDecoder().decode(
                CommandLineTests.StatusDocument.self,
                from: Data(try await Self.hot(["status", "--root", root, "--json"]).stdout.utf8)
            )
            return status.packages.first?.version
        }
        let timestampFile = URL(fileURLWithPath: repo + "/timestamp.json")

        // hot sign alone: a timestamp signed by the release key, expiring with the manifest.
        let signed = try await Self.hot(["sign", "--repo", repo, "--key", release + ".pem", "--expires", "1d"])
        #expect(signed.stdout.contains("signed timestamp.json naming manifest version 1"), "\(signed.stdout)")
        #expect(try await active() == "2")

        // The role declared: hot sign leaves the timestamp to it, and clients take the new
        // release once the role signs it.
        try await Self.hot(["rollback", "app", "--repo", repo])
        let delegated = try await Self.hot(
            ["sign", "--repo", repo, "--key", release + ".pem", "--expires", "1d"]
                + ["--timestamp-key", timestamp + ".pub", "--timestamp-lifetime", "2h"]
        )
        #expect(delegated.stderr.contains("hot timestamp"), "\(delegated.stderr)")
        #expect(try await active() == "2", "the old timestamp still names the release before")
        let before = try Data(contentsOf: timestampFile)
        for (arguments, complaint) in [
            (["--key", release + ".pem"], "timestamp role's keys"),
            (["--key", timestamp + ".pem", "--expires", "2d"], "past the timestamp role's bound"),
        ] {
            let refused = try await CommandLineTests.run(["timestamp", "--repo", repo] + arguments)
            #expect(refused.status != 0, "\(arguments)")
            #expect(refused.stderr.contains(complaint), "\(arguments): \(refused.stderr)")
        }
        #expect(try Data(contentsOf: timestampFile) == before)
        try await Self.hot(["timestamp", "--repo", repo, "--key", timestamp + ".pem", "--expires", "1h"])
        #expect(try await active() == "1")

        // Stripped, the timestamp is missed: the manifest declares a role.
        let stash = work.appendingPathComponent("stash.json")
        try FileManager.default.moveItem(at: timestampFile, to: stash)
        let missing = try await CommandLineTests.run(sync)
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("declares a timestamp role"), "\(missing.stderr)")
        try FileManager.default.moveItem(at: stash, to: timestampFile)

        // A rollout step with the timestamp key: clients see it at once.
        try await Self.hot(["release", "app", "2", "--repo", repo])
        try await Self.hot(
            ["sign", "--repo", repo, "--key", release + ".pem", "--expires", "1d", "--rollout-key", rollout + ".pub"]
        )
        try await Self.hot(["timestamp", "--repo", repo, "--key", timestamp + ".pem"])
        #expect(try await active() == "2")
        try await Self.hot(
            ["rollout", "app", "--percent", "0", "--key", rollout + ".pem", "--repo", repo]
                + ["--timestamp-key", timestamp + ".pem"]
        )
        #expect(try await active() == "1")
        #expect(try await Self.hot(["verify", "--repo", repo, "--trust", release + ".pub"]).stdout.contains("ok"))
    }
}
