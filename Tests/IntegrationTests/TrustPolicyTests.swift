import Foundation
import HotAssets
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import HotVerify
import Testing

/// Key rotation, staged rollouts, app-version limits and channels, over nginx on 127.0.0.1.
@Suite("Signed manifests: rotation and release policy, over nginx")
struct TrustPolicyTests {
    /// A client that installed version 1 signed by `old`, and a repository whose next manifest
    /// (version 2, not yet signed) declares only `new`.
    static func rotationSetup(
        newKey: KeyKind
    ) async throws
        -> (old: CryptoSigner, new: CryptoSigner, SignedRepository, NginxServer, SignedClient)
    {
        let old = try CryptoSigner.generate()
        let new = try CryptoSigner.generate(newKey)
        let repository = try SignedRepository(keys: [old])
        try repository.pack(releaseFiles("1"), id: "app", version: "1")
        try repository.sign(with: [old])
        let server = try await NginxServer.start(root: repository.directory)
        let client = try SignedClient(trust: .signed(by: [old.publicKey]))
        #expect(try await client.sync(repository.url(on: server)).failures.isEmpty)
        repository.body.keys = [try CryptoVerifier().keyID(of: new.publicKey): .init(new.publicKey)]
        try repository.pack(releaseFiles("2"), id: "app", version: "2")
        return (old, new, repository, server, client)
    }

    @Test("a manifest signed by the trusted key and the new one rotates to the new key, across restarts")
    func rotationAccepted() async throws {
        let (old, new, repository, server, client) = try await Self.rotationSetup(newKey: .rsa(bits: 2048))
        let url = repository.url(on: server)
        // Version 2 declares only the new key, signed by the old (trusted) and the new (declared).
        try repository.sign(with: [old, new])
        #expect(try await client.sync(url).failures.isEmpty)
        #expect(try await client.active() == ["app 2"])

        // From now on the new key alone is enough, and the old key alone is not.
        try repository.pack(releaseFiles("3"), id: "app", version: "3")
        try repository.sign(with: [new])
        #expect(try await client.sync(url).failures.isEmpty)
        #expect(try await client.active() == ["app 3"])
        try repository.pack(releaseFiles("4"), id: "app", version: "4")
        try repository.sign(with: [old])
        await #expect(throws: HotUpdateError(.signatureInvalid, "")) { try await client.sync(url) }
        #expect(try await client.active() == ["app 3"])
        await server.stop()
    }

    @Test("a rotation signed only by the new key, or only by the old key, is refused")
    func rotationRefused() async throws {
        let (old, new, repository, server, client) = try await Self.rotationSetup(newKey: .ed25519)
        let url = repository.url(on: server)
        for signers in [[new], [old]] {
            try repository.sign(with: signers)
            await #expect(throws: HotUpdateError(.signatureInvalid, "")) { try await client.sync(url) }
            #expect(try await client.active() == ["app 1"])
        }
        #expect(try TrustState.load(root: client.root).channels[""]?.version == 1)
        await server.stop()
    }

    @Test("after a refused expired manifest, a freshly signed one is accepted")
    func recoversAfterFreeze() async throws {
        let key = try CryptoSigner.generate()
        let repository = try SignedRepository(keys: [key])
        try repository.pack(releaseFiles("1"), id: "app", version: "1")
        try repository.sign(with: [key], expires: Date().addingTimeInterval(3_600))
        let server = try await NginxServer.start(root: repository.directory)
        var client = try SignedClient(trust: .signed(by: [key.publicKey]))
        client.now = { Date().addingTimeInterval(7_200) }
        await #expect(throws: HotUpdateError(.manifestExpired, "")) {
            try await client.sync(repository.url(on: server))
        }
        #expect(try await client.active().isEmpty)

        try repository.sign(with: [key], expires: Date().addingTimeInterval(86_400))
        #expect(try await client.sync(repository.url(on: server)).failures.isEmpty)
        #expect(try await client.active() == ["app 1"])
        await server.stop()
    }

    @Test("an app that ships other root keys trusts them, and their manifests start a new version floor")
    func newRootKeysRecover() async throws {
        let lost = try CryptoSigner.generate()
        let repository = try SignedRepository(keys: [lost])
        try repository.pack(releaseFiles("1"), id: "app", version: "1")
        try repository.sign(with: [lost], version: 1_000_000)  // a far-future version, say by a thief
        let server = try await NginxServer.start(root: repository.directory)
        var client = try SignedClient(trust: .signed(by: [lost.publicKey]))
        #expect(try await client.sync(repository.url(on: server)).failures.isEmpty)

        let replacement = try CryptoSigner.generate()
        let fresh = try SignedRepository(directory: repository.directory, keys: [replacement])
        try fresh.pack(releaseFiles("2"), id: "app", version: "2")
        try fresh.sign(with: [replacement], version: 1)
        // Still the old app: the new key is unknown.
        await #expect(throws: HotUpdateError(.signatureInvalid, "")) { try await client.sync(fresh.url(on: server)) }
        // The next app release ships the replacement key.
        client.trust = .signed(by: [replacement.publicKey])
        #expect(try await client.sync(fresh.url(on: server)).failures.isEmpty)
        #expect(try await client.active() == ["app 2"])
        #expect(try TrustState.load(root: client.root).channels[""]?.version == 1)
        // And the old key no longer counts.
        try repository.sign(with: [lost], version: 1_000_001)
        await #expect(throws: HotUpdateError(.signatureInvalid, "")) {
            try await client.sync(repository.url(on: server))
        }
        await server.stop()
    }

    @Test("a web module the publisher disables is served online again, and from its kept files once enabled")
    func disabledWebModuleGoesOnline() async throws {
        let key = try CryptoSigner.generate()
        let repository = try SignedRepository(keys: [key])
        try repository.pack(["index.html": Data("<p>offline</p>".utf8)], id: "home", version: "1")
        try repository.sign(with: [key])
        let server = try await NginxServer.start(root: repository.directory)
        let client = try SignedClient(trust: .signed(by: [key.publicKey]))
        let page = try #require(URL(string: "https://m.example.com/home/"))
        let location = { () async throws -> WebPageLocation in
            WebModuleResolver(
                modules: [WebModule(id: "home", onlineBase: page)],
                installed: try await client.updater().installedPackages()
            ).resolve(page)
        }
        #expect(try await client.sync(repository.url(on: server)).failures.isEmpty)
        guard case .local(let local) = try await location() else {
            Issue.record("the installed module is not served locally")
            return
        }
        #expect(local.fileURL.lastPathComponent == "index.html")

        repository.body.editPackage("home") { $0.disabled = true }
        try repository.sign(with: [key])
        #expect(try await client.sync(repository.url(on: server)).packages.map(\.change) == [.disable])
        #expect(try await location() == .online(page, reason: .notInstalled))

        repository.body.editPackage("home") { $0.disabled = false }
        try repository.sign(with: [key])
        #expect(try await client.sync(repository.url(on: server)).packages.map(\.change) == [.enable])
        #expect(try await location() == .local(local))
        await server.stop()
    }

    @Test("rollout buckets are deterministic, spread evenly, and differ between releases")
    func rolloutBuckets() throws {
        let policy = { (id: String) in ReleasePolicy(context: ClientContext(clientID: id), verifier: CryptoVerifier()) }
        let ids = (0..<2_000).map { "client-\($0)" }
        let buckets = try ids.map { try policy($0).bucket(packageID: "app", version: "2") }
        #expect(try ids.map { try policy($0).bucket(packageID: "app", version: "2") } == buckets)
        #expect(buckets.allSatisfy { (0..<100).contains($0) })
        // 2,000 fixed ids: the count under 30 is a fixed number; it must be near 30 %.
        let inRollout = buckets.filter { $0 < 30 }.count
        #expect((500...700).contains(inRollout), "\(inRollout) of 2000 in a 30 % rollout")
        let other = try ids.map { try policy($0).bucket(packageID: "app", version: "3") }
        #expect(other != buckets)
    }

    @Test("a staged rollout: clients inside get the new release, the others keep the previous one")
    func rolloutRespected() async throws {
        let key = try CryptoSigner.generate()
        let repository = try SignedRepository(keys: [key])
        try repository.pack(releaseFiles("1"), id: "app", version: "1")
        try repository.pack(releaseFiles("2"), id: "app", version: "2")
        repository.body.editPackage("app") { $0.rollout = 50 }
        try repository.sign(with: [key])
        let server = try await NginxServer.start(root: repository.directory)

        let bucket = { (id: String) in
            try ReleasePolicy(context: ClientContext(clientID: id), verifier: CryptoVerifier())
                .bucket(packageID: "app", version: "2")
        }
        let ids = (0..<100).map { "device-\($0)" }
        let inside = try #require(try ids.first { try bucket($0) < 50 })
        let outside = try #require(try ids.first { try bucket($0) >= 50 })
        let insideClient = try SignedClient(
            trust: .signed(by: [key.publicKey]),
            context: ClientContext(clientID: inside)
        )
        let outsideClient = try SignedClient(
            trust: .signed(by: [key.publicKey]),
            context: ClientContext(clientID: outside)
        )
        for client in [insideClient, outsideClient] {
            #expect(try await client.sync(repository.url(on: server)).failures.isEmpty)
        }
        #expect(try await insideClient.active() == ["app 2"])
        #expect(try await outsideClient.active() == ["app 1"])
        // The same client asks again: the same answer, nothing downloaded.
        #expect(try await outsideClient.sync(repository.url(on: server)).packages.map(\.change) == [.unchanged])

        // The rollout completes: everyone gets 2.
        repository.body.editPackage("app") { $0.rollout = nil }
        try repository.sign(with: [key])
        #expect(try await outsideClient.sync(repository.url(on: server)).failures.isEmpty)
        #expect(try await outsideClient.active() == ["app 2"])

        // A first release at 0 % reaches nobody: with no previous release the package is withheld.
        try repository.pack(releaseFiles("1"), id: "fresh", version: "1")
        repository.body.editPackage("fresh") { $0.rollout = 0 }
        try repository.sign(with: [key])
        let report = try await insideClient.sync(repository.url(on: server))
        #expect(report.failures.isEmpty)
        #expect(try await insideClient.active() == ["app 2"])
        await server.stop()
    }

    @Test(
        "minimum and maximum app versions are respected",
        arguments: [
            ("4.9", false), ("5.0", true), ("5.10.2", true), ("6.0", true), ("6.0.1", false), ("10", false),
        ]
    )
    func appVersions(appVersion: String, gets: Bool) async throws {
        let key = try CryptoSigner.generate()
        let repository = try SignedRepository(keys: [key])
        try repository.pack(releaseFiles("1"), id: "app", version: "1")
        repository.body.editPackage("app") {
            $0.minAppVersion = "5.0"
            $0.maxAppVersion = "6"
        }
        try repository.sign(with: [key])
        let server = try await NginxServer.start(root: repository.directory)
        let client = try SignedClient(
            trust: .signed(by: [key.publicKey]),
            context: ClientContext(appVersion: appVersion)
        )
        #expect(try await client.sync(repository.url(on: server)).failures.isEmpty)
        #expect(try await client.active() == (gets ? ["app 1"] : []))
        #expect(
            try await client.resolve("config.txt", bundle: try makeBundle())
                == (gets ? "config 1 from app 1" : "config bundled from bundle")
        )
        await server.stop()
    }

    @Test("channels share package files; each client follows its own, and another channel's manifest is refused")
    func channels() async throws {
        let key = try CryptoSigner.generate()
        let production = try SignedRepository(channel: "production", keys: [key])
        let staging = try SignedRepository(directory: production.directory, channel: "staging", keys: [key])
        let v1 = try production.pack(releaseFiles("1"), id: "app", version: "1")
        try production.sign(with: [key])
        staging.body.editPackage("app") {
            $0.versions.append(v1)  // the same file, listed by both channels
            $0.releases.append("1")
        }
        try staging.pack(releaseFiles("2"), id: "app", version: "2")
        try staging.sign(with: [key])
        let server = try await NginxServer.start(root: production.directory)

        let productionClient = try SignedClient(
            trust: .signed(by: [key.publicKey]),
            context: ClientContext(channel: "production")
        )
        let stagingClient = try SignedClient(
            trust: .signed(by: [key.publicKey]),
            context: ClientContext(channel: "staging")
        )
        #expect(try await productionClient.sync(production.url(on: server)).failures.isEmpty)
        #expect(try await stagingClient.sync(staging.url(on: server)).failures.isEmpty)
        #expect(try await productionClient.active() == ["app 1"])
        #expect(try await stagingClient.active() == ["app 2"])

        await #expect(throws: HotUpdateError(.manifestInvalid, "")) {
            try await productionClient.sync(staging.url(on: server))
        }
        #expect(try await productionClient.active() == ["app 1"])
        await server.stop()
    }
}

/// The root of trust is the set of keys, however the app spells the list.
@Suite("Trusted key lists, spelled every way")
struct TrustedKeySpellingTests {
    /// `key` in PEM with CRLF line endings, its base64 rewrapped at 76 columns with trailing
    /// spaces, and a comment line before the block.
    static func respelled(_ key: PublicKey) -> PublicKey {
        let lines = key.pem.split(whereSeparator: \.isNewline)
        let body = lines.filter { !$0.hasPrefix("-----") }.joined()
        var wrapped: [String] = []
        var rest = Substring(body)
        while !rest.isEmpty {
            wrapped.append(String(rest.prefix(76)) + "  ")
            rest = rest.dropFirst(76)
        }
        let text =
            (["# release key", String(lines[0])] + wrapped + [String(lines[lines.count - 1])])
            .joined(separator: "\r\n") + "\r\n"
        return PublicKey(scheme: key.scheme, pem: text)
    }

    @Test("order, repeats, CRLF and rewrapped PEM name one root: a replayed older manifest stays refused")
    func spellings() async throws {
        let keyA = try CryptoSigner.generate()
        let keyB = try CryptoSigner.generate(.rsa(bits: 2048))
        let repository = try SignedRepository(keys: [keyA, keyB], threshold: 2)
        try repository.pack(releaseFiles("1"), id: "app", version: "1")
        let first = try repository.sign(with: [keyA, keyB])
        try repository.pack(releaseFiles("2"), id: "app", version: "2")
        try repository.sign(with: [keyA, keyB])
        let server = try await NginxServer.start(root: repository.directory)
        defer { server.stopNow() }
        var client = try SignedClient(trust: .signed(by: [keyA.publicKey, keyB.publicKey], threshold: 2))
        #expect(try await client.sync(repository.url(on: server)).failures.isEmpty)
        #expect(
            try CryptoVerifier().keyID(of: Self.respelled(keyB.publicKey))
                == CryptoVerifier().keyID(of: keyB.publicKey)
        )

        try repository.write(first)
        let a = keyA.publicKey
        let b = keyB.publicKey
        let spellings: [(String, [PublicKey])] = [
            ("reversed", [b, a]),
            ("repeated", [a, a, b]),
            ("repeated and reversed", [b, a, b, a]),
            ("CRLF, rewrapped, commented", [Self.respelled(a), Self.respelled(b)]),
            ("both spellings at once", [a, Self.respelled(a), b, Self.respelled(b)]),
        ]
        for (name, keys) in spellings {
            client.trust = .signed(by: keys, threshold: 2)
            let error = await #expect(throws: HotUpdateError.self, "\(name)") {
                try await client.sync(repository.url(on: server))
            }
            #expect(error?.code == .manifestRollback, "\(name): \(String(describing: error))")
            #expect(try await client.active() == ["app 2"], "\(name)")
            #expect(try TrustState.load(root: client.root).channels[""]?.version == 2, "\(name)")
        }
    }
}
