import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import HotVerify
import Testing

/// Every attack on the update channel that TUF names, against nginx on 127.0.0.1 serving a
/// signed repository: each is refused with its own error, and the version installed before
/// stays active, byte-for-byte intact and resolving, also for a restarted client.
@Suite("Signed manifests refuse attacks, over nginx")
struct TrustRefusalTests {
    enum Attack: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case unsigned, schemaOne, tooFewSignatures, unknownKey, wrongSignature, tamperedBody
        case rollback, sameVersionOtherContent, expired
        case packageSize, packageDigest, endlessPackage
        case oversizeManifest, endlessManifest
        case stalledManifest, tricklingManifest, stalledPackage, tricklingPackage
        var testDescription: String { rawValue }

        var expected: HotUpdateError.Code {
            switch self {
            case .unsigned, .schemaOne, .tooFewSignatures, .unknownKey, .wrongSignature, .tamperedBody:
                .signatureInvalid
            case .rollback, .sameVersionOtherContent: .manifestRollback
            case .expired: .manifestExpired
            case .packageSize, .endlessPackage: .sizeMismatch
            case .packageDigest: .digestMismatch
            case .oversizeManifest, .endlessManifest: .byteLimitExceeded
            case .stalledManifest, .tricklingManifest, .stalledPackage, .tricklingPackage: .timedOut
            }
        }

        /// Whether the manifest itself is refused (the sync throws) rather than one package.
        var refusesManifest: Bool {
            switch self {
            case .packageSize, .packageDigest, .endlessPackage, .stalledPackage, .tricklingPackage: false
            default: true
            }
        }
    }

    @Test(
        "the attack is refused and the previous version stays active, intact and resolving",
        arguments: Attack.allCases
    )
    func refused(attack: Attack) async throws {
        let keyA = try CryptoSigner.generate()
        let keyB = try CryptoSigner.generate()
        let repository = try SignedRepository(keys: [keyA, keyB], threshold: 2)
        try repository.pack(releaseFiles("1"), id: "app", version: "1")
        let firstManifest = try repository.sign(with: [keyA, keyB])
        let server = try await NginxServer.start(
            root: repository.directory,
            options: .init(locations: [.rateLimited(prefix: "/slow/", bytesPerSecond: 100)])
        )
        var client = try SignedClient(trust: .signed(by: [keyA.publicKey, keyB.publicKey], threshold: 2))
        let bundle = try makeBundle()
        var manifestURL = repository.url(on: server)
        #expect(try await client.sync(manifestURL).failures.isEmpty)

        var active = "1"
        if attack == .rollback || attack == .sameVersionOtherContent {
            try repository.pack(releaseFiles("2"), id: "app", version: "2")
            try repository.sign(with: [keyA, keyB])
            #expect(try await client.sync(manifestURL).failures.isEmpty)
            active = "2"
        }
        let treeBefore = try client.installedTree()
        #expect(try await client.active() == ["app \(active)"])

        var raw: RawHTTPServer?
        var packageTimeouts: TransportRequest.Timeouts?
        let next = attack == .sameVersionOtherContent ? "3" : "2"
        if attack != .rollback {
            try repository.pack(releaseFiles(next), id: "app", version: next)
        }
        switch attack {
        case .unsigned:
            repository.body.version += 1
            try repository.write(SignedEnvelope(signed: try repository.body.canonicalBytes(), signatures: []).encoded())
        case .schemaOne:
            let entry = try #require(repository.body.package("app")?.entry(for: "2"))
            try repository.write(
                ManifestDocument(packages: [
                    .init(id: "app", version: "2", url: entry.url, size: entry.size, sha256: entry.sha256)
                ]).encoded()
            )
        case .tooFewSignatures:
            try repository.sign(with: [keyA])
        case .unknownKey:
            try repository.sign(with: [try CryptoSigner.generate(), try CryptoSigner.generate()])
        case .wrongSignature:
            var envelope = try SignedEnvelope.parse(try repository.sign(with: [keyA, keyB]))
            let sig = envelope.signatures[0].sig
            envelope.signatures[0].sig = (sig.first == "0" ? "1" : "0") + sig.dropFirst()
            try repository.write(try envelope.encoded())
        case .tamperedBody:
            let served = String(decoding: try repository.sign(with: [keyA, keyB]), as: UTF8.self)
            #expect(served.contains("\"threshold\" : 2"))
            try repository.write(
                Data(served.replacingOccurrences(of: "\"threshold\" : 2", with: "\"threshold\" : 1").utf8)
            )
        case .rollback:
            try repository.write(firstManifest)  // a replay of the older, validly signed manifest
        case .sameVersionOtherContent:
            try repository.sign(with: [keyA, keyB], version: repository.body.version)
        case .expired:
            try repository.sign(with: [keyA, keyB], expires: Date().addingTimeInterval(3_600))
            client.now = { Date().addingTimeInterval(7_200) }
        case .packageSize:
            try repository.sign(with: [keyA, keyB])
            let archive = repository.archive(try #require(repository.body.package("app")?.entry(for: "2")))
            let handle = try FileHandle(forWritingTo: archive)
            try handle.seekToEnd()
            try handle.write(contentsOf: noise(5_000, seed: 3))
            try handle.close()
        case .packageDigest:
            try repository.sign(with: [keyA, keyB])
            let entry = try #require(repository.body.package("app")?.entry(for: "2"))
            // Garbage of the signed size: parsed, it would fail as "not an archive".
            try noise(Int(entry.size), seed: 11).write(to: repository.archive(entry))
        case .endlessPackage:
            let endless = try RawHTTPServer.start(.endless())
            raw = endless
            repository.body.editPackage("app") { $0.versions[$0.versions.count - 1].url = endless.url.absoluteString }
            try repository.sign(with: [keyA, keyB])
        case .oversizeManifest:
            var served = try repository.sign(with: [keyA, keyB])
            served.append(Data(repeating: UInt8(ascii: " "), count: 256 << 10))
            try repository.write(served)
            client.maxManifestBytes = 64 << 10
        case .endlessManifest:
            let endless = try RawHTTPServer.start(.endless())
            raw = endless
            manifestURL = endless.url
            client.maxManifestBytes = 64 << 10
        case .stalledManifest:
            let stalled = try RawHTTPServer.start(.stallAfterHeaders(contentLength: nil))
            raw = stalled
            manifestURL = stalled.url
            client.timeouts = TransportRequest.Timeouts(connect: .seconds(5), lowSpeedWindow: .seconds(2))
        case .tricklingManifest:
            let served = try repository.sign(with: [keyA, keyB])
            let slow = repository.directory.appendingPathComponent("slow/manifest.json")
            try FileManager.default.createDirectory(
                at: slow.deletingLastPathComponent(),
                withIntermediateDirectories: true
            )
            try served.write(to: slow)
            manifestURL = server.baseURL.appendingPathComponent("slow/manifest.json")
            // 100 bytes a second passes the low-speed check; the overall limit ends it.
            client.timeouts = TransportRequest.Timeouts(
                connect: .seconds(5),
                lowSpeedWindow: .seconds(5),
                total: .seconds(3)
            )
        case .stalledPackage:
            let entry = try #require(repository.body.package("app")?.entry(for: "2"))
            let stalled = try RawHTTPServer.start(.stallAfterHeaders(contentLength: Int(entry.size)))
            raw = stalled
            repository.body.editPackage("app") { $0.versions[$0.versions.count - 1].url = stalled.url.absoluteString }
            try repository.sign(with: [keyA, keyB])
            packageTimeouts = TransportRequest.Timeouts(connect: .seconds(5), lowSpeedWindow: .seconds(2))
        case .tricklingPackage:
            let entry = try #require(repository.body.package("app")?.entry(for: "2"))
            let slow = repository.directory.appendingPathComponent("slow/app-2.zip")
            try FileManager.default.createDirectory(
                at: slow.deletingLastPathComponent(),
                withIntermediateDirectories: true
            )
            try FileManager.default.copyItem(at: repository.archive(entry), to: slow)
            repository.body.editPackage("app") {
                $0.versions[$0.versions.count - 1].url =
                    server.baseURL.appendingPathComponent("slow/app-2.zip").absoluteString
            }
            try repository.sign(with: [keyA, keyB])
            packageTimeouts = TransportRequest.Timeouts(
                connect: .seconds(5),
                lowSpeedWindow: .seconds(5),
                total: .seconds(3)
            )
        }

        if attack.refusesManifest {
            do {
                let report = try await client.sync(manifestURL)
                Issue.record("the \(attack) manifest was accepted: \(report)")
            } catch let error as HotUpdateError {
                #expect(error.code == attack.expected, "\(error.detailedDescription())")
            }
        } else {
            let report = try await client.updater(packageTimeouts: packageTimeouts).sync(
                from: client.source(manifestURL)
            )
            let failure = try #require(report.failures.first)
            #expect(failure.error?.code == attack.expected, "\(failure.error?.detailedDescription() ?? "")")
            #expect(failure.activeVersion == active)
        }

        // A restarted client: the previous version is active, intact and resolving.
        #expect(try await client.active() == ["app \(active)"])
        #expect(try client.installedTree() == treeBefore)
        #expect(try await client.resolve("config.txt", bundle: bundle) == "config \(active) from app \(active)")
        let staging = client.root.appendingPathComponent("staging")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: staging.path)) ?? []).isEmpty)
        raw?.stop()
        await server.stop()
    }

    @Test("the trusted version survives a restart: a replayed older manifest is refused by a new updater and source")
    func rollbackAcrossRestart() async throws {
        let key = try CryptoSigner.generate()
        let repository = try SignedRepository(keys: [key])
        try repository.pack(releaseFiles("1"), id: "app", version: "1")
        let old = try repository.sign(with: [key])
        try repository.pack(releaseFiles("2"), id: "app", version: "2")
        try repository.sign(with: [key])
        let server = try await NginxServer.start(root: repository.directory)
        let client = try SignedClient(trust: .signed(by: [key.publicKey]))
        #expect(try await client.sync(repository.url(on: server)).failures.isEmpty)
        let state = try TrustState.load(root: client.root)
        #expect(state.channels[""]?.version == 2)

        // SignedClient.sync builds a new updater and source each time: nothing is kept in memory.
        try repository.write(old)
        await #expect(throws: HotUpdateError(.manifestRollback, "")) {
            try await client.sync(repository.url(on: server))
        }
        #expect(try await client.active() == ["app 2"])
        await server.stop()
    }

    @Test("unsigned manifests are accepted only by a client configured for development repositories")
    func unsignedDevelopment() async throws {
        let repository = try SignedRepository(keys: [])
        try repository.pack(releaseFiles("1"), id: "app", version: "1")
        try repository.write(SignedEnvelope(signed: try repository.body.canonicalBytes(), signatures: []).encoded())
        let server = try await NginxServer.start(root: repository.directory)
        let strict = try SignedClient(trust: .signed(by: [try CryptoSigner.generate().publicKey]))
        await #expect(throws: HotUpdateError(.signatureInvalid, "")) {
            try await strict.sync(repository.url(on: server))
        }
        #expect(try await strict.active().isEmpty)

        let development = try SignedClient(trust: .unsignedDevelopment())
        #expect(try await development.sync(repository.url(on: server)).failures.isEmpty)
        #expect(try await development.active() == ["app 1"])
        await server.stop()
    }
}
