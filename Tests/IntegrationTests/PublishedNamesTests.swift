import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import HotVerify
import Testing

/// The publisher's tools refuse what every client would refuse, before writing anything.
@Suite("Published names: hot pack, sign and verify")
struct PublishedNamesTests {
    static let nfc = "caf\u{E9}.txt"
    static let nfd = "cafe\u{301}.txt"

    /// A source directory holding `names`, each file its own name as content.
    static func source(_ names: [String]) throws -> URL {
        let directory = try makeTemporaryDirectory("names")
        for name in names {
            let file = directory.appendingPathComponent(name)
            try FileManager.default.createDirectory(
                at: file.deletingLastPathComponent(),
                withIntermediateDirectories: true
            )
            try Data(name.utf8).write(to: file)
        }
        return directory
    }

    @Test("hot pack refuses NFC/NFD twins and case twins, naming both, and writes nothing")
    func packRefuses() async throws {
        for (names, why) in [([Self.nfc, Self.nfd, "a.txt"], "Unicode"), (["Readme.txt", "README.txt"], "case")] {
            let source = try Self.source(names)
            #expect(try FileManager.default.contentsOfDirectory(atPath: source.path).count == names.count)
            let repo = try makeTemporaryDirectory("names-repo")
            let packed = try await CommandLineTests.run([
                "pack", source.path, "--id", "text", "--version", "1", "--repo", repo.path,
            ])
            #expect(packed.status == 1, "\(why): \(packed.stdout)")
            #expect(packed.stderr.contains(why == "case" ? "differ only by case" : "two Unicode normalisations"))
            let escaped = [#"caf\u{00E9}.txt"#, #"cafe\u{0301}.txt"#]
            let expected = why == "case" ? ["'Readme.txt'", "'README.txt'"] : escaped
            for name in expected { #expect(packed.stderr.contains(name), "\(packed.stderr)") }
            // Nothing but the repository's lock file, which every change holds (empty, never published).
            let left = try FileManager.default.contentsOfDirectory(atPath: repo.path).filter { $0 != ".hot-lock" }
            #expect(left.isEmpty, "\(why): \(left)")
        }
    }

    @Test("with --case-sensitive-only, case twins are packed, marked, and installed on a case-sensitive volume")
    func caseSensitiveOnly() async throws {
        let source = try Self.source(["Readme.txt", "README.txt"])
        let repo = try makeTemporaryDirectory("names-cs")
        let packed = try await CommandLineTests.run([
            "pack", source.path, "--id", "text", "--version", "1", "--repo", repo.path, "--case-sensitive-only",
        ])
        #expect(packed.status == 0, "\(packed.stderr)")
        // NFC twins stay refused even then.
        let twins = try Self.source([Self.nfc, Self.nfd])
        let refused = try await CommandLineTests.run([
            "pack", twins.path, "--id", "twins", "--version", "1", "--repo", repo.path, "--case-sensitive-only",
        ])
        #expect(refused.status == 1)
        let envelope = try SignedEnvelope.parse(Data(contentsOf: repo.appendingPathComponent("manifest.json")))
        let body = try SignedManifestBody.decode(envelope.signed)
        #expect(body.package("text")?.entry(for: "1")?.caseSensitive == true)

        let server = try await NginxServer.start(root: repo)
        defer { server.stopNow() }
        let root = try makeTemporaryDirectory("names-store")
        let synced = try await CommandLineTests.run([
            "sync", "--manifest", server.baseURL.appendingPathComponent("manifest.json").absoluteString,
            "--root", root.path, "--allow-unsigned",
        ])
        #expect(synced.status == 0, "\(synced.stderr)")
        let status = try JSONDecoder().decode(
            CommandLineTests.StatusDocument.self,
            from: Data(try await CommandLineTests.run(["status", "--root", root.path, "--json"]).stdout.utf8)
        )
        let path = try #require(status.packages.first?.path)
        #expect(
            try readTree(URL(fileURLWithPath: path)) == [
                "Readme.txt": Data("Readme.txt".utf8), "README.txt": Data("README.txt".utf8),
            ]
        )
    }

    @Test("package ids that differ only by case: hot pack and hot sign refuse, hot verify reports")
    func ids() async throws {
        let work = try makeTemporaryDirectory("names-ids")
        let repo = work.appendingPathComponent("repo").path
        let key = work.appendingPathComponent("k.pem").path
        let publicKey = work.appendingPathComponent("k.pub").path
        try await PublisherWorkflowTests.hot(["keygen", "--private", key, "--public", publicKey])
        try await PublisherWorkflowTests.hot([
            "pack", try Self.source(["a.txt"]).path, "--id", "img", "--version", "1", "--repo", repo,
        ])
        let upper = try await CommandLineTests.run([
            "pack", try Self.source(["b.txt"]).path, "--id", "IMG", "--version", "1", "--repo", repo,
        ])
        #expect(upper.status == 1)
        #expect(upper.stderr.contains("'img' and 'IMG' differ only by case"), "\(upper.stderr)")

        // A manifest edited by hand to list both: hot sign refuses it, hot verify reports it.
        let manifest = URL(fileURLWithPath: repo).appendingPathComponent("manifest.json")
        let text = try String(contentsOf: manifest, encoding: .utf8)
        var body = try SignedManifestBody.decode(try SignedEnvelope.parse(Data(text.utf8)).signed)
        var twin = try #require(body.package("img"))
        twin.id = "IMG"
        body.packages.append(twin)
        try SignedEnvelope(signed: try body.canonicalBytes(), signatures: []).encoded().write(to: manifest)
        let signed = try await CommandLineTests.run(["sign", "--repo", repo, "--key", key])
        #expect(signed.status == 1)
        #expect(signed.stderr.contains("differ only by case"), "\(signed.stderr)")
    }

    @Test("hot verify --repo reports an archive whose paths are NFC/NFD twins")
    func verifyReportsTwins() async throws {
        let work = try makeTemporaryDirectory("names-verify")
        let repo = work.appendingPathComponent("repo").path
        let key = work.appendingPathComponent("k.pem").path
        let publicKey = work.appendingPathComponent("k.pub").path
        try await PublisherWorkflowTests.hot(["keygen", "--private", key, "--public", publicKey])
        try await PublisherWorkflowTests.hot([
            "pack", try Self.source(["a.txt"]).path, "--id", "text", "--version", "1", "--repo", repo,
        ])
        try await PublisherWorkflowTests.hot(["sign", "--repo", repo, "--key", key])
        let fine = try await CommandLineTests.run(["verify", "--repo", repo, "--trust", publicKey])
        #expect(fine.status == 0, "\(fine.stdout) \(fine.stderr)")

        // The archive swapped for one with twin paths (as another tool would make it), and the
        // manifest's digest updated to match and signed: only the names are wrong.
        let packages = URL(fileURLWithPath: repo).appendingPathComponent("packages")
        let archive = try #require(
            try FileManager.default.contentsOfDirectory(atPath: packages.path).first { $0.hasSuffix(".zip") }
        )
        let archiveURL = packages.appendingPathComponent(archive)
        try FileManager.default.removeItem(at: archiveURL)
        let script = """
            import sys, zipfile
            with zipfile.ZipFile(sys.argv[1], "w") as z:
                z.writestr("caf\\u00e9.txt", b"one")
                z.writestr("cafe\\u0301.txt", b"two")
            """
        try await Subprocess.check("python3", ["-c", script, archiveURL.path])
        let manifest = URL(fileURLWithPath: repo).appendingPathComponent("manifest.json")
        var body = try SignedManifestBody.decode(try SignedEnvelope.parse(Data(contentsOf: manifest)).signed)
        let bytes = try Data(contentsOf: archiveURL)
        body.editPackage("text") { package in
            package.versions[0].size = Int64(bytes.count)
            package.versions[0].sha256 = (try? CryptoVerifier().digest(of: bytes, using: .sha256).hex) ?? ""
            package.versions[0].md5 = nil
        }
        try SignedEnvelope(signed: try body.canonicalBytes(), signatures: []).encoded().write(to: manifest)
        try await PublisherWorkflowTests.hot(["sign", "--repo", repo, "--key", key])
        let verified = try await CommandLineTests.run(["verify", "--repo", repo, "--trust", publicKey])
        #expect(verified.status == 1, "\(verified.stdout)")
        #expect(
            verified.stdout.contains("two Unicode normalisations") || verified.stdout.contains("the same path"),
            "\(verified.stdout) \(verified.stderr)"
        )
        #expect(!verified.stdout.contains("ok:"))
    }
}
