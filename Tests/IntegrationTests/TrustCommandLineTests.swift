import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import HotVerify
import Testing

/// Trust's soft spots, tried with the real `hot` against nginx: a key listed twice, a key
/// given twice in the signed body, and an HTML page where the manifest should be.
@Suite("Trust with the real hot")
struct TrustCommandLineTests {
    static func publish(_ setup: PublishedRepository, _ version: String) async throws {
        try await setup.publish(version, files: ["config.txt": Data("config \(version)".utf8)])
    }

    static func sync(_ setup: PublishedRepository, _ extra: [String] = []) async throws -> CommandLineTests.Result {
        try await CommandLineTests.run(setup.sync + extra)
    }

    /// Writes `data` as the served manifest.json, and takes the timestamp away: an attacker who
    /// controls the server serves none (none is required without a timestamp role), so the
    /// client reads manifest.json itself rather than the copy the timestamp names.
    static func serve(_ data: Data, _ setup: PublishedRepository) throws {
        try data.write(to: setup.manifest)
        try? FileManager.default.removeItem(
            at: setup.manifest.deletingLastPathComponent().appendingPathComponent("timestamp.json")
        )
    }

    @Test("after version 2, a replayed version 1 stays refused with --trust K --trust K")
    func repeatedKey() async throws {
        let setup = try await PublishedRepository("trust-cli")
        defer { setup.stopNow() }
        try await Self.publish(setup, "1")
        let first = try Data(contentsOf: setup.manifest)
        #expect(try await Self.sync(setup).status == 0)
        try await Self.publish(setup, "2")
        #expect(try await Self.sync(setup).status == 0)
        #expect(try await setup.active().version == "2")

        try Self.serve(first, setup)
        for extra in [[], ["--trust", setup.publicKey], ["--trust", setup.publicKey, "--trust", setup.publicKey]] {
            let replay = try await Self.sync(setup, extra)
            #expect(replay.status == 1, "\(extra.count / 2 + 1) keys: \(replay.stdout)")
            #expect(replay.stderr.contains("lower than version"), "\(replay.stderr)")
            #expect(try await setup.active().version == "2")
        }
    }

    @Test("a signed body with \"version\" twice is refused by hot sync and by hot verify --url")
    func duplicateVersion() async throws {
        let setup = try await PublishedRepository("trust-cli")
        defer { setup.stopNow() }
        try await Self.publish(setup, "1")
        #expect(try await Self.sync(setup).status == 0)
        try await Self.publish(setup, "2")

        // Signed properly, by the right key, over a text with the key twice.
        var body = try SignedManifestBody.decode(try SignedEnvelope.parse(Data(contentsOf: setup.manifest)).signed)
        body.version += 1
        let text = String(decoding: try body.canonicalBytes(), as: UTF8.self)
            .replacingOccurrences(
                of: "\"version\" : \(body.version)",
                with: "\"version\" : 99,\n  \"version\" : \(body.version)"
            )
        // Once at the top level, and once per version entry (a string there).
        #expect(text.components(separatedBy: "\"version\" : ").count == 3 + body.packages.flatMap(\.versions).count)
        let signer = try CryptoSigner(privateKeyPEM: String(contentsOfFile: setup.privateKey, encoding: .utf8))
        try Self.serve(
            SignedEnvelope.sign(Data(text.utf8), with: [signer], verifier: CryptoVerifier()).encoded(),
            setup
        )

        let synced = try await Self.sync(setup)
        #expect(synced.status == 1)
        #expect(synced.stderr.contains("has the key \"version\" twice"), "\(synced.stderr)")
        #expect(try await setup.active().version == "1")
        let verified = try await CommandLineTests.run([
            "verify", "--url", setup.manifestURL, "--trust", setup.publicKey,
        ])
        #expect(verified.status == 1)
        #expect((verified.stdout + verified.stderr).contains("has the key \"version\" twice"), "\(verified.stdout)")
    }

    @Test("a 200 HTML page where the manifest should be is reported as not JSON, not as unsigned")
    func htmlPage() async throws {
        let setup = try await PublishedRepository("trust-cli")
        defer { setup.stopNow() }
        try await Self.publish(setup, "1")
        #expect(try await Self.sync(setup).status == 0)
        try Self.serve(Data("<!DOCTYPE html>\n<html><body>Maintenance</body></html>\n".utf8), setup)
        let synced = try await Self.sync(setup)
        #expect(synced.status == 1)
        #expect(synced.stderr.contains("is not JSON"), "\(synced.stderr)")
        #expect(synced.stderr.contains("<!DOCTYPE html>"), "\(synced.stderr)")
        #expect(!synced.stderr.contains("not signed"), "\(synced.stderr)")
        #expect(try await setup.active().version == "1")
    }
}
