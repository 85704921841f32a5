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
        case duplicateVersionKey, duplicateNestedKey, htmlPage, truncatedManifest, trailingBytes, tooDeep
        case hugeNumber, fractionalNumber, notAManifest, repeatedTrustKeys, strippedSignatures
        var testDescription: String { rawValue }

        var expected: HotUpdateError.Code {
            switch self {
            case .unsigned, .schemaOne, .strippedSignatures: .manifestUnsigned
            case .tooFewSignatures, .unknownKey, .wrongSignature, .tamperedBody:
                .signatureInvalid
            case .duplicateVersionKey, .duplicateNestedKey: .manifestDuplicateKey
            case .htmlPage, .trailingBytes: .manifestNotJSON
            case .truncatedManifest: .manifestTruncated
            case .tooDeep: .manifestTooDeep
            case .hugeNumber, .fractionalNumber: .manifestNumberOutOfRange
            case .notAManifest: .notAManifest
            case .repeatedTrustKeys: .manifestRollback
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
        if attack == .rollback || attack == .sameVersionOtherContent || attack == .repeatedTrustKeys {
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
        if attack != .rollback && attack != .repeatedTrustKeys {
            try repository.pack(releaseFiles(next), id: "app", version: next)
        }
        /// The next manifest, validly signed, with `edit` applied to its signed text before signing.
        func signEdited(_ edit: (String) -> String) throws {
            repository.body.version += 1
            let text = edit(String(decoding: try repository.body.canonicalBytes(), as: UTF8.self))
            let envelope = try SignedEnvelope.sign(Data(text.utf8), with: [keyA, keyB], verifier: CryptoVerifier())
            try repository.write(try envelope.encoded())
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
        case .duplicateVersionKey:
            // A parser that keeps the last value reads version 1000; one that keeps the first, the next.
            try signEdited { text in
                text.replacingOccurrences(of: "\"version\" : ", with: "\"version\" : 1000,\n  \"version\" : ")
            }
        case .duplicateNestedKey:
            try signEdited { text in
                text.replacingOccurrences(of: "\"sha256\" : ", with: "\"sha256\" : \"00\", \"sha256\" : ")
            }
        case .htmlPage:
            try repository.write(Data("<!DOCTYPE html>\n<html><body><h1>502 Bad Gateway</h1></body></html>\n".utf8))
        case .truncatedManifest:
            let served = try repository.sign(with: [keyA, keyB])
            try repository.write(served.prefix(served.count / 2))
        case .trailingBytes:
            var served = try repository.sign(with: [keyA, keyB])
            served.append(Data("<!-- cached -->".utf8))
            try repository.write(served)
        case .tooDeep:
            try repository.write(Data((String(repeating: "[", count: 100) + String(repeating: "]", count: 100)).utf8))
        case .hugeNumber:
            try signEdited { text in
                text.replacingOccurrences(of: "\"threshold\" : 2", with: "\"threshold\" : 18446744073709551616")
            }
        case .fractionalNumber:
            let size = try #require(repository.body.package("app")?.entry(for: "2")?.size)
            try signEdited { text in
                text.replacingOccurrences(of: "\"size\" : \(size)", with: "\"size\" : \(size).5")
            }
        case .notAManifest:
            try repository.write(Data(#"{"error": "not found", "status": 404}"#.utf8))
        case .repeatedTrustKeys:
            // The same trusted keys, listed twice and in another order: the same root, whose
            // version floor (2) refuses the replay of version 1.
            client.trust = .signed(by: [keyB.publicKey, keyA.publicKey, keyA.publicKey, keyB.publicKey], threshold: 2)
            try repository.write(firstManifest)
        case .strippedSignatures:
            // A client for development repositories, but given keys: stripping the signatures
            // does not make the manifest acceptable.
            repository.body.version += 1
            try repository.write(SignedEnvelope(signed: try repository.body.canonicalBytes(), signatures: []).encoded())
            client.trust = .unsignedDevelopment(keys: [keyA.publicKey, keyB.publicKey], threshold: 2)
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
        repository.body.expires = Date().addingTimeInterval(86_400)
        try repository.write(SignedEnvelope(signed: try repository.body.canonicalBytes(), signatures: []).encoded())
        let server = try await NginxServer.start(root: repository.directory)
        let strict = try SignedClient(trust: .signed(by: [try CryptoSigner.generate().publicKey]))
        await #expect(throws: HotUpdateError(.manifestUnsigned, "")) {
            try await strict.sync(repository.url(on: server))
        }
        #expect(try await strict.active().isEmpty)

        let development = try SignedClient(trust: .unsignedDevelopment())
        #expect(try await development.sync(repository.url(on: server)).failures.isEmpty)
        #expect(try await development.active() == ["app 1"])

        // Channel and expiry hold in development mode too.
        let other = try SignedClient(trust: .unsignedDevelopment(), context: ClientContext(channel: "beta"))
        await #expect(throws: HotUpdateError(.manifestInvalid, "")) { try await other.sync(repository.url(on: server)) }
        repository.body.expires = Date().addingTimeInterval(-60)
        try repository.write(SignedEnvelope(signed: try repository.body.canonicalBytes(), signatures: []).encoded())
        await #expect(throws: HotUpdateError(.manifestExpired, "")) {
            try await development.sync(repository.url(on: server))
        }

        // Given keys, a development client still refuses unsigned manifests, unless told
        // to despite the keys.
        repository.body.expires = Date().addingTimeInterval(86_400)
        try repository.write(SignedEnvelope(signed: try repository.body.canonicalBytes(), signatures: []).encoded())
        let keyed = try SignedClient(trust: .unsignedDevelopment(keys: [try CryptoSigner.generate().publicKey]))
        await #expect(throws: HotUpdateError(.manifestUnsigned, "")) {
            try await keyed.sync(repository.url(on: server))
        }
        let despite = try SignedClient(
            trust: .unsignedDevelopment(keys: [try CryptoSigner.generate().publicKey], despiteKeys: true)
        )
        #expect(try await despite.sync(repository.url(on: server)).failures.isEmpty)
        await server.stop()
    }
}
