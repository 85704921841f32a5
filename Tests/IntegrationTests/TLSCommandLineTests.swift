import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

/// `hot` against nginx serving a signed repository over HTTPS on 127.0.0.1, under a
/// certificate from a private CA made by the test.
@Suite("hot over HTTPS")
struct TLSCommandLineTests {
    /// Runs `hot`.
    static func hot(_ arguments: [String]) async throws -> CommandLineTests.Result {
        try await CommandLineTests.run(arguments)
    }

    /// The `hot: error:` lines of a run.
    static func errors(_ result: CommandLineTests.Result) -> [Substring] {
        result.stderr.split(separator: "\n").filter { $0.hasPrefix("hot: error: ") }
    }

    /// A signed repository with package `app` version 1, a key pair, and the CA's files.
    struct Repository {
        let directory: URL
        let authority: TestCertificateAuthority
        let loopback: TestCertificateAuthority.Issued
        var repo: URL { directory.appendingPathComponent("repo") }
        var privateKey: String { directory.appendingPathComponent("release.pem").path }
        var publicKey: String { directory.appendingPathComponent("release.pub").path }
        var caFile: String { authority.certificate.path }

        static func make(_ label: String) async throws -> Repository {
            let repository = Repository(
                directory: try makeTemporaryDirectory(label),
                authority: try TestCertificateAuthority.shared(),
                loopback: try TestCertificateAuthority.sharedLoopback()
            )
            let keys = try await hot(["keygen", "--private", repository.privateKey, "--public", repository.publicKey])
            #expect(keys.status == 0, "\(keys.stderr)")
            try await repository.release("1")
            return repository
        }

        /// Packs `app` `version` (its files from ``releaseFiles(_:)``) and signs the repository.
        func release(_ version: String) async throws {
            let source = directory.appendingPathComponent("src-\(version)")
            try writeTree(releaseFiles(version), under: source)
            let packed = try await hot(["pack", source.path, "--id", "app", "--version", version, "--repo", repo.path])
            #expect(packed.status == 0, "\(packed.stderr)")
            let signed = try await hot(["sign", "--repo", repo.path, "--key", privateKey, "--expires", "1h"])
            #expect(signed.status == 0, "\(signed.stderr)")
        }

        /// `hot sync` of `server`'s manifest into `root` with `extra` options.
        func sync(_ server: NginxServer, root: URL, _ extra: [String]) async throws -> CommandLineTests.Result {
            try await hot(
                [
                    "sync", "--manifest", server.baseURL.appendingPathComponent("manifest.json").absoluteString,
                    "--root", root.path, "--trust", publicKey, "--quiet",
                ] + extra
            )
        }

        /// nginx serving the repository over HTTPS with `certificate` (the loopback one by default).
        func serve(_ certificate: TestCertificateAuthority.Issued? = nil) async throws -> NginxServer {
            try await NginxServer.start(root: repo, options: .init(tls: .init(certificate ?? loopback)))
        }

        /// The version of `app` installed at `root`.
        func installed(_ root: URL) async throws -> String? {
            let status = try await hot(["status", "--root", root.path, "--json"])
            let document = try JSONDecoder().decode(
                CommandLineTests.StatusDocument.self,
                from: Data(status.stdout.utf8)
            )
            return document.packages.first { $0.id == "app" }?.version
        }
    }

    #if Curl && canImport(CHotCurl)
    @Test(
        "--ca-file installs from a private CA's server; without it, another host's or an expired certificate: one short error"
    )
    func privateCA() async throws {
        let repository = try await Repository.make("tls-ca")
        let server = try await repository.serve()
        let root = try makeTemporaryDirectory("tls-ca-store")

        let refused = try await repository.sync(
            server,
            root: root.appendingPathComponent("none"),
            ["--transport", "curl"]
        )
        #expect(refused.status == 1)
        let refusal = Self.errors(refused)
        #expect(refusal.count == 1, "\(refused.stderr)")
        #expect(refusal.first?.contains("not from a trusted certificate authority") == true, "\(refused.stderr)")
        #expect((refusal.first?.count ?? 0) < 400, "\(refused.stderr)")

        let synced = try await repository.sync(
            server,
            root: root,
            ["--transport", "curl", "--ca-file", repository.caFile]
        )
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(try await repository.installed(root) == "1")
        let checked = try await Self.hot([
            "verify", "--url", server.baseURL.appendingPathComponent("manifest.json").absoluteString,
            "--trust", repository.publicKey, "--ca-file", repository.caFile,
        ])
        #expect(checked.status == 0, "\(checked.stderr)")
        await server.stop()

        let wrong: [(String, TestCertificateAuthority.Issued, String)] = [
            (
                "another host", try repository.authority.issue("cli-other", hosts: ["other.example"]),
                "is not for 127.0.0.1"
            ),
            (
                "expired", try repository.authority.issue("cli-expired", hosts: ["127.0.0.1"], validity: .expired),
                "has expired"
            ),
        ]
        for (name, certificate, words) in wrong {
            let other = try await repository.serve(certificate)
            let result = try await repository.sync(
                other,
                root: root.appendingPathComponent(name),
                ["--ca-file", repository.caFile]
            )
            #expect(result.status == 1, "\(name)")
            let lines = Self.errors(result)
            #expect(lines.count == 1 && lines.first?.contains(words) == true, "\(name): \(result.stderr)")
            #expect(other.requests().isEmpty, "\(name): a request went through")
            await other.stop()
        }
    }

    @Test("--pin: the server's key installs; another key is refused and the installed version stays byte-exact")
    func pins() async throws {
        let repository = try await Repository.make("tls-pin")
        let server = try await repository.serve()
        let root = try makeTemporaryDirectory("tls-pin-store")
        let right = ["--ca-file", repository.caFile, "--pin", repository.loopback.pin]
        let first = try await repository.sync(server, root: root, right)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try await repository.installed(root) == "1")

        try await repository.release("2")
        let before = try readTree(root)
        let unused = try repository.authority.unusedPin()
        let refused = try await repository.sync(server, root: root, ["--ca-file", repository.caFile, "--pin", unused])
        #expect(refused.status == 1)
        let lines = Self.errors(refused)
        #expect(lines.count == 1 && lines.first?.contains("pinned keys") == true, "\(refused.stderr)")
        #expect(try readTree(root) == before, "the store changed after a refused sync")
        #expect(try await repository.installed(root) == "1")

        // Rotation: the next key pinned beside the current one keeps clients working.
        let rotated = try await repository.sync(server, root: root, right + ["--pin", unused])
        #expect(rotated.status == 0, "\(rotated.stderr)")
        #expect(try await repository.installed(root) == "2")
        await server.stop()
    }

    @Test("hot publish to S3 over HTTPS under a private CA, through nginx in front of moto; clients install from it")
    func publish() async throws {
        let moto = try await MotoServer.start()
        try await moto.createBucket("releases")
        let loopback = try TestCertificateAuthority.sharedLoopback()
        let caFile = try TestCertificateAuthority.shared().certificate.path
        let proxy = try await NginxServer.start(
            root: try makeTemporaryDirectory("tls-proxy"),
            options: .init(tls: .init(loopback), proxyTo: moto.baseURL)
        )
        let workspace = try await PublishTests.Workspace.make("tls-publish")
        let files = try await workspace.pack("app", "1", releaseFiles("1"))
        try await workspace.sign()
        let publish = [
            "publish", workspace.repo, "s3://releases/app", "--endpoint", proxy.baseURL.absoluteString, "--acl",
            "public-read",
        ]

        let untrusted = try await PublishTests.hot(publish)
        #expect(untrusted.status == 1)
        #expect(Self.errors(untrusted).first?.contains("not from a trusted certificate authority") == true)
        let unpinned = try await PublishTests.hot(
            publish + ["--ca-file", caFile, "--pin", try TestCertificateAuthority.shared().unusedPin()]
        )
        #expect(unpinned.status == 1)
        #expect(Self.errors(unpinned).first?.contains("pinned keys") == true, "\(unpinned.stderr)")
        let start = moto.requests().count
        #expect(
            !PublishTests.uploads(moto).contains { $0.path.hasPrefix("/releases/app/") },
            "a refused publish uploaded something"
        )

        let published = try await PublishTests.hot(publish + ["--ca-file", caFile, "--pin", loopback.pin])
        #expect(published.status == 0, "\(published.stderr)")
        let uploads = PublishTests.uploads(moto, from: start)
        #expect(uploads.contains { $0.path == "/releases/app/manifest.json" })
        #expect(uploads.allSatisfy { $0.signatureValid == true })

        let manifest = proxy.baseURL.appendingPathComponent("releases/app/manifest.json").absoluteString
        let root = try makeTemporaryDirectory("tls-publish-store").path
        let installed = try await workspace.install(manifest, root: root, extra: ["--ca-file", caFile])
        #expect(installed["app"] == files)
        await proxy.stop()
        await moto.stop()
    }
    #endif

    @Test("--transport urlsession with --ca-file or --pin: installs, or refuses in one line before any request")
    func urlSession() async throws {
        let repository = try await Repository.make("tls-urlsession")
        let server = try await repository.serve()
        let root = try makeTemporaryDirectory("tls-urlsession-store")
        for extra in [
            ["--ca-file", repository.caFile], ["--ca-file", repository.caFile, "--pin", repository.loopback.pin],
        ] {
            let result = try await repository.sync(server, root: root, ["--transport", "urlsession"] + extra)
            #if canImport(FoundationNetworking)
            #expect(result.status == 1)
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 1 && lines.first?.contains("use --transport curl") == true, "\(result.stderr)")
            #expect(server.requests().isEmpty, "a request went out before the refusal")
            #else
            #expect(result.status == 0, "\(result.stderr)")
            #expect(try await repository.installed(root) == "1")
            #endif
        }
        await server.stop()
    }
}
