import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import Testing

/// The publisher's workflow with the real `hot` commands, served by nginx on 127.0.0.1.
@Suite("hot publisher workflow")
struct PublisherWorkflowTests {
    /// Runs `hot` and expects it to succeed.
    @discardableResult
    static func hot(_ arguments: [String]) async throws -> CommandLineTests.Result {
        let result = try await CommandLineTests.run(arguments)
        #expect(result.status == 0, "hot \(arguments.joined(separator: " ")): \(result.stderr)")
        return result
    }

    @Test("release → sync → rollback → sync → disable → sync → enable → sync, checking what is active after each")
    func walk() async throws {
        let work = try makeTemporaryDirectory("walk")
        let repo = work.appendingPathComponent("repo").path
        let root = work.appendingPathComponent("store").path
        let privateKey = work.appendingPathComponent("release.pem").path
        let publicKey = work.appendingPathComponent("release.pub").path
        try await Self.hot(["keygen", "--private", privateKey, "--public", publicKey])
        let mode = try FileManager.default.attributesOfItem(atPath: privateKey)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)

        for version in ["1", "2"] {
            let source = work.appendingPathComponent("v\(version)")
            try writeTree(releaseFiles(version), under: source)
            try await Self.hot([
                "pack", source.path, "--id", "app", "--version", version, "--repo", repo, "--no-release",
            ])
        }
        let bundle = try makeBundle()
        let server = try await NginxServer.start(root: URL(fileURLWithPath: repo))
        let manifestURL = server.baseURL.appendingPathComponent("manifest.json").absoluteString
        let sign = ["sign", "--repo", repo, "--key", privateKey, "--expires", "1h"]

        /// Syncs and returns `config.txt` as the app resolves it, and the package's state.
        func syncAndResolve() async throws -> (String, String?) {
            try await Self.hot(["sync", "--manifest", manifestURL, "--root", root, "--trust", publicKey])
            let resolved = try await Self.hot(["resolve", "config.txt", "--root", root, "--bundle", bundle.path])
            let text = try String(
                contentsOfFile: resolved.stdout.trimmingCharacters(in: .newlines),
                encoding: .utf8
            )
            let status = try JSONDecoder().decode(
                CommandLineTests.StatusDocument.self,
                from: Data(try await Self.hot(["status", "--root", root, "--json"]).stdout.utf8)
            )
            return (text, status.packages.first.map { "\($0.version ?? "-") \($0.state)" })
        }

        try await Self.hot(["release", "app", "1", "--repo", repo])
        try await Self.hot(sign)
        #expect(try await syncAndResolve() == ("config 1", "1 installed"))

        try await Self.hot(["release", "app", "2", "--repo", repo])
        try await Self.hot(sign)
        #expect(try await syncAndResolve() == ("config 2", "2 installed"))

        let v1File = try #require(
            try FileManager.default.contentsOfDirectory(atPath: repo + "/packages").first { $0.hasPrefix("app-1-") }
        )
        _ = await server.waitForRequests(path: "/manifest.json", count: 2)
        #expect(server.requestCount(for: "/packages/\(v1File)") == 1)

        try await Self.hot(["rollback", "app", "--repo", repo])
        try await Self.hot(sign)
        #expect(try await syncAndResolve() == ("config 1", "1 installed"))
        // The rolled-back version is the one kept for rollback: restored from disk, not downloaded.
        _ = await server.waitForRequests(path: "/manifest.json", count: 3)
        #expect(server.requestCount(for: "/packages/\(v1File)") == 1)

        try await Self.hot(["disable", "app", "--repo", repo])
        try await Self.hot(sign)
        #expect(try await syncAndResolve() == ("config bundled", "1 disabled"))
        let downloadsBefore = server.requestCount(for: "/packages/\(v1File)")

        try await Self.hot(["enable", "app", "--repo", repo])
        try await Self.hot(sign)
        #expect(try await syncAndResolve() == ("config 1", "1 installed"))
        // Enabling the kept version downloads nothing.
        _ = await server.waitForRequests(path: "/manifest.json", count: 5)
        #expect(server.requestCount(for: "/packages/\(v1File)") == downloadsBefore)

        // The repository checks out; a stray file or a damaged package does not.
        #expect(try await Self.hot(["verify", "--repo", repo, "--trust", publicKey]).stdout.contains("ok"))
        try Data("stray".utf8).write(to: URL(fileURLWithPath: repo + "/packages/stray.zip"))
        let stray = try await CommandLineTests.run(["verify", "--repo", repo, "--trust", publicKey])
        #expect(stray.status == 1)
        #expect(stray.stdout.contains("packages/stray.zip: dangling"))
        try FileManager.default.removeItem(atPath: repo + "/packages/stray.zip")
        try Data("damaged".utf8).write(to: URL(fileURLWithPath: repo + "/packages/\(v1File)"))
        let damaged = try await CommandLineTests.run(["verify", "--repo", repo, "--trust", publicKey])
        #expect(damaged.status == 1)
        #expect(damaged.stdout.contains("app 1: size is 7"))
        await server.stop()
    }

    @Test("sign bumps the version and sets the expiry; several keys give several signatures; an edit drops them")
    func signing() async throws {
        let work = try makeTemporaryDirectory("sign")
        let repo = work.appendingPathComponent("repo").path
        let keys = (1...2).map {
            (work.appendingPathComponent("k\($0).pem").path, work.appendingPathComponent("k\($0).pub").path)
        }
        try await Self.hot(["keygen", "--private", keys[0].0, "--public", keys[0].1])
        try await Self.hot(["keygen", "--private", keys[1].0, "--public", keys[1].1, "--rsa"])
        let overwrite = try await CommandLineTests.run(["keygen", "--private", keys[0].0, "--public", keys[0].1])
        #expect(overwrite.status != 0)

        let source = work.appendingPathComponent("v1")
        try writeTree(releaseFiles("1"), under: source)
        try await Self.hot(["pack", source.path, "--id", "app", "--version", "1", "--repo", repo])
        try await Self.hot([
            "sign", "--repo", repo, "--key", keys[0].0, "--key", keys[1].0, "--trusted-key", keys[0].1,
            "--trusted-key", keys[1].1, "--threshold", "2", "--expires", "2030-01-01T00:00:00Z",
        ])
        let manifest = URL(fileURLWithPath: repo + "/manifest.json")
        var envelope = try SignedEnvelope.parse(Data(contentsOf: manifest))
        var body = try SignedManifestBody.decode(envelope.signed)
        #expect(envelope.signatures.count == 2)
        #expect(body.version == 1 && body.threshold == 2 && body.keys.count == 2)
        #expect(SignedManifestBody.rfc3339(body.expires) == "2030-01-01T00:00:00Z")

        try await Self.hot(["sign", "--repo", repo, "--key", keys[0].0, "--key", keys[1].0, "--expires", "12h"])
        envelope = try SignedEnvelope.parse(Data(contentsOf: manifest))
        body = try SignedManifestBody.decode(envelope.signed)
        #expect(body.version == 2)
        #expect(abs(body.expires.timeIntervalSinceNow - 12 * 3_600) < 600)

        // One key of a threshold of two: refused before anything is written.
        let short = try await CommandLineTests.run(["sign", "--repo", repo, "--key", keys[0].0])
        #expect(short.status != 0)
        #expect(try SignedManifestBody.decode(SignedEnvelope.parse(Data(contentsOf: manifest)).signed).version == 2)

        try await Self.hot(["release", "app", "1", "--repo", repo, "--rollout", "25", "--min-app-version", "3.1"])
        envelope = try SignedEnvelope.parse(Data(contentsOf: manifest))
        #expect(envelope.signatures.isEmpty)
        let package = try #require(try SignedManifestBody.decode(envelope.signed).package("app"))
        #expect(package.rollout == 25 && package.minAppVersion == "3.1")

        let unsignedSync = try await CommandLineTests.run([
            "sync", "--manifest", manifest.path, "--root", work.appendingPathComponent("store").path,
        ])
        #expect(unsignedSync.status != 0)
        #expect(unsignedSync.stderr.contains("--trust"))
    }

    @Test("a version packed for staging is released to production from the same file; verify checks every channel")
    func channelsShareFiles() async throws {
        let work = try makeTemporaryDirectory("channels")
        let repo = work.appendingPathComponent("repo").path
        let key = (work.appendingPathComponent("k.pem").path, work.appendingPathComponent("k.pub").path)
        try await Self.hot(["keygen", "--private", key.0, "--public", key.1])
        let source = work.appendingPathComponent("v1")
        try writeTree(releaseFiles("1"), under: source)
        try await Self.hot([
            "pack", source.path, "--id", "app", "--version", "1", "--repo", repo, "--channel", "staging",
        ])
        try await Self.hot(["release", "app", "1", "--repo", repo, "--channel", "production"])
        for channel in ["staging", "production"] {
            try await Self.hot(["sign", "--repo", repo, "--channel", channel, "--key", key.0])
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: repo + "/packages")
        #expect(files.count == 1)
        for channel in ["staging", "production"] {
            let data = try Data(contentsOf: URL(fileURLWithPath: "\(repo)/channels/\(channel)/manifest.json"))
            let body = try SignedManifestBody.decode(SignedEnvelope.parse(data).signed)
            #expect(body.channel == channel)
            #expect(body.package("app")?.entry(for: "1")?.url == "../../packages/\(try #require(files.first))")
        }
        let verified = try await Self.hot(["verify", "--repo", repo, "--trust", key.1])
        #expect(verified.stdout.contains("ok: 2 manifest(s), 1 package file(s)"))

        let missing = try await CommandLineTests.run(["release", "app", "9", "--repo", repo, "--channel", "production"])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("not packed"))
    }
}
