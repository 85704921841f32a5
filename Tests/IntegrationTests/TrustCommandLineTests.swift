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
    final class Setup: Sendable {
        let work: URL
        let repo: String
        let root: String
        let privateKey: String
        let publicKey: String
        let nginx: NginxServer
        var manifest: URL { URL(fileURLWithPath: repo).appendingPathComponent("manifest.json") }
        var manifestURL: String { nginx.baseURL.appendingPathComponent("manifest.json").absoluteString }

        init() async throws {
            work = try makeTemporaryDirectory("trust-cli")
            repo = work.appendingPathComponent("repo").path
            root = work.appendingPathComponent("store").path
            privateKey = work.appendingPathComponent("release.pem").path
            publicKey = work.appendingPathComponent("release.pub").path
            try await PublisherWorkflowTests.hot(["keygen", "--private", privateKey, "--public", publicKey])
            try FileManager.default.createDirectory(atPath: repo, withIntermediateDirectories: true)
            nginx = try await NginxServer.start(root: URL(fileURLWithPath: repo))
        }

        func publish(_ version: String) async throws {
            let source = work.appendingPathComponent("v\(version)")
            try writeTree(["config.txt": Data("config \(version)".utf8)], under: source)
            try await PublisherWorkflowTests.hot([
                "pack", source.path, "--id", "app", "--version", version, "--repo", repo,
            ])
            try await PublisherWorkflowTests.hot(["sign", "--repo", repo, "--key", privateKey])
        }

        func sync(_ extra: [String] = []) async throws -> CommandLineTests.Result {
            try await CommandLineTests.run(
                ["sync", "--manifest", manifestURL, "--root", root, "--trust", publicKey] + extra
            )
        }

        func activeVersion() async throws -> String? {
            let status = try JSONDecoder().decode(
                CommandLineTests.StatusDocument.self,
                from: Data(try await PublisherWorkflowTests.hot(["status", "--root", root, "--json"]).stdout.utf8)
            )
            return status.packages.first { $0.id == "app" }?.version
        }
    }

    @Test("after version 2, a replayed version 1 stays refused with --trust K --trust K")
    func repeatedKey() async throws {
        let setup = try await Setup()
        defer { Task { await setup.nginx.stop() } }
        try await setup.publish("1")
        let first = try Data(contentsOf: setup.manifest)
        #expect(try await setup.sync().status == 0)
        try await setup.publish("2")
        #expect(try await setup.sync().status == 0)
        #expect(try await setup.activeVersion() == "2")

        try first.write(to: setup.manifest)
        for extra in [[], ["--trust", setup.publicKey], ["--trust", setup.publicKey, "--trust", setup.publicKey]] {
            let replay = try await setup.sync(extra)
            #expect(replay.status == 1, "\(extra.count / 2 + 1) keys: \(replay.stdout)")
            #expect(replay.stderr.contains("lower than version"), "\(replay.stderr)")
            #expect(try await setup.activeVersion() == "2")
        }
    }

    @Test("a signed body with \"version\" twice is refused by hot sync and by hot verify --url")
    func duplicateVersion() async throws {
        let setup = try await Setup()
        defer { Task { await setup.nginx.stop() } }
        try await setup.publish("1")
        #expect(try await setup.sync().status == 0)
        try await setup.publish("2")

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
        try SignedEnvelope.sign(Data(text.utf8), with: [signer], verifier: CryptoVerifier()).encoded()
            .write(to: setup.manifest)

        let synced = try await setup.sync()
        #expect(synced.status == 1)
        #expect(synced.stderr.contains("has the key \"version\" twice"), "\(synced.stderr)")
        #expect(try await setup.activeVersion() == "1")
        let verified = try await CommandLineTests.run([
            "verify", "--url", setup.manifestURL, "--trust", setup.publicKey,
        ])
        #expect(verified.status == 1)
        #expect((verified.stdout + verified.stderr).contains("has the key \"version\" twice"), "\(verified.stdout)")
    }

    @Test("a 200 HTML page where the manifest should be is reported as not JSON, not as unsigned")
    func htmlPage() async throws {
        let setup = try await Setup()
        defer { Task { await setup.nginx.stop() } }
        try await setup.publish("1")
        #expect(try await setup.sync().status == 0)
        try Data("<!DOCTYPE html>\n<html><body>Maintenance</body></html>\n".utf8).write(to: setup.manifest)
        let synced = try await setup.sync()
        #expect(synced.status == 1)
        #expect(synced.stderr.contains("is not JSON"), "\(synced.stderr)")
        #expect(synced.stderr.contains("<!DOCTYPE html>"), "\(synced.stderr)")
        #expect(!synced.stderr.contains("not signed"), "\(synced.stderr)")
        #expect(try await setup.activeVersion() == "1")
    }
}
