#if Curl && canImport(CHotCurl)
import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import HotTransport
import HotVerify
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `hot publish` to a real S3-compatible server (moto) on 127.0.0.1, and clients reading
/// the bucket.
@Suite("hot publish to S3")
struct PublishTests {
    /// Credentials moto accepts; the tool reads them from the environment.
    static let environment = [
        "AWS_ACCESS_KEY_ID=hot-test", "AWS_SECRET_ACCESS_KEY=\(MotoServer.secretAccessKey)", "AWS_REGION=eu-west-1",
    ]

    /// Runs `hot` with the test credentials.
    static func hot(_ arguments: [String]) async throws -> CommandLineTests.Result {
        let output = try await Subprocess.run(
            "env",
            environment + [try CommandLineTests.hotExecutable().path] + arguments
        )
        return CommandLineTests.Result(status: output.status, stdout: output.stdout, stderr: output.stderr)
    }

    /// Runs `hot` and expects success.
    @discardableResult
    static func succeed(_ arguments: [String]) async throws -> CommandLineTests.Result {
        let result = try await hot(arguments)
        #expect(result.status == 0, "hot \(arguments.joined(separator: " ")): \(result.stderr)")
        return result
    }

    /// A repository with a key pair, in a fresh directory.
    struct Workspace {
        let directory: URL
        var repo: String { directory.appendingPathComponent("repo").path }
        var privateKey: String { directory.appendingPathComponent("release.pem").path }
        var publicKey: String { directory.appendingPathComponent("release.pub").path }

        static func make(_ label: String) async throws -> Workspace {
            let workspace = Workspace(directory: try makeTemporaryDirectory(label))
            try await PublishTests.succeed([
                "keygen", "--private", workspace.privateKey, "--public", workspace.publicKey,
            ])
            return workspace
        }

        /// Packs `files` as `id` `version` (released) and returns the source tree.
        @discardableResult
        func pack(_ id: String, _ version: String, _ files: [String: Data]) async throws -> [String: Data] {
            let source = directory.appendingPathComponent("src-\(id)-\(version)")
            try writeTree(files, under: source)
            try await PublishTests.succeed(["pack", source.path, "--id", id, "--version", version, "--repo", repo])
            return files
        }

        func sign() async throws {
            try await PublishTests.succeed(["sign", "--repo", repo, "--key", privateKey, "--expires", "1h"])
        }

        /// The package file names in the repository.
        func packageFiles() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: repo + "/packages").sorted()
        }

        /// Syncs a fresh or existing store from `manifest` and returns each package's installed tree.
        func install(_ manifest: String, root: String, extra: [String] = []) async throws -> [String: [String: Data]] {
            try await PublishTests.succeed(
                ["sync", "--manifest", manifest, "--root", root, "--trust", publicKey] + extra
            )
            let status = try await PublishTests.succeed(["status", "--root", root, "--json"])
            let document = try JSONDecoder().decode(
                CommandLineTests.StatusDocument.self,
                from: Data(status.stdout.utf8)
            )
            var trees: [String: [String: Data]] = [:]
            for package in document.packages {
                trees[package.id] = try readTree(URL(fileURLWithPath: try #require(package.path)))
            }
            return trees
        }
    }

    /// Where clients read a key of bucket `releases` (path-style, public-read).
    static func publicURL(_ moto: MotoServer, _ key: String) -> String {
        moto.baseURL.absoluteString + "releases/" + key
    }

    static func publishArguments(_ workspace: Workspace, _ moto: MotoServer, prefix: String = "app") -> [String] {
        [
            "publish", workspace.repo, "s3://releases/\(prefix)", "--endpoint", moto.baseURL.absoluteString, "--acl",
            "public-read",
        ]
    }

    /// Uploads (PUT and POST) recorded by moto, from index `start` on.
    static func uploads(_ moto: MotoServer, from start: Int = 0) -> [MotoServer.Request] {
        Array(moto.requests().dropFirst(start)).filter {
            ($0.method == "PUT" || $0.method == "POST") && $0.status < 300
        }
    }

    @Test(
        "publish: packages before the manifest, immutable headers, byte-exact install from the bucket, no re-upload, a new version uploads only its file"
    )
    func publishAndInstall() async throws {
        let moto = try await MotoServer.start()
        try await moto.createBucket("releases")
        let workspace = try await Workspace.make("publish")
        let app1 = try await workspace.pack("app", "1", releaseFiles("1"))
        let fonts = try await workspace.pack("fonts", "1", ["f/a.ttf": noise(30_000, seed: 9)])
        try await workspace.sign()
        let start = moto.requests().count
        let published = try await Self.succeed(Self.publishArguments(workspace, moto))
        #expect(published.stdout.contains("2 package file(s) uploaded"))

        // Order, read from the server: every package file before the manifest.
        let uploads = Self.uploads(moto, from: start)
        let packagePuts = uploads.indices.filter { uploads[$0].path.hasPrefix("/releases/app/packages/") }
        let manifestPut = try #require(uploads.firstIndex { $0.path == "/releases/app/manifest.json" })
        #expect(packagePuts.count == 2)
        #expect(packagePuts.allSatisfy { $0 < manifestPut })
        #expect(packagePuts.allSatisfy { uploads[$0].ifNoneMatch == "*" })
        #expect(uploads[manifestPut].ifNoneMatch == nil)
        // libcurl's SigV4 signatures are the ones botocore computes, for every request hot sent.
        let signed = moto.requests().dropFirst(start)
        #expect(!signed.isEmpty && signed.allSatisfy { $0.signatureValid == true })

        // Headers, read back with HEAD.
        let transport = CurlTransport()
        func head(_ key: String) async throws -> [String: String] {
            let url = try #require(URL(string: Self.publicURL(moto, key)))
            let response = try await transport.fetch(TransportRequest(url: url, method: "HEAD"))
            #expect(response.statusCode == 200, "HEAD \(key)")
            return response.headers
        }
        for file in try workspace.packageFiles() {
            let headers = try await head("app/packages/\(file)")
            #expect(headers["cache-control"] == "public, max-age=31536000, immutable")
            #expect(headers["content-type"] == "application/zip")
        }
        let manifestHeaders = try await head("app/manifest.json")
        #expect(manifestHeaders["cache-control"] == "no-cache")
        #expect(manifestHeaders["content-type"] == "application/json")

        // A client installs from the bucket's URL, byte-exact, and the repository verifies there.
        let manifestURL = Self.publicURL(moto, "app/manifest.json")
        let root = workspace.directory.appendingPathComponent("store").path
        let installed = try await workspace.install(manifestURL, root: root)
        #expect(installed == ["app": app1, "fonts": fonts])
        let verified = try await Self.succeed(["verify", "--url", manifestURL, "--trust", workspace.publicKey])
        #expect(verified.stdout.contains("2 package file(s) reachable"))

        // Publishing again unchanged uploads nothing.
        let beforeAgain = moto.requests().count
        let again = try await Self.succeed(Self.publishArguments(workspace, moto))
        #expect(
            again.stdout.contains("0 package file(s) uploaded, 2 already there, 0 manifest(s) uploaded, 1 unchanged")
        )
        #expect(Self.uploads(moto, from: beforeAgain).isEmpty)

        // A new version uploads its own file, then the manifest.
        let before = Set(try workspace.packageFiles())
        let app2 = try await workspace.pack("app", "2", releaseFiles("2"))
        try await workspace.sign()
        let newFiles = Set(try workspace.packageFiles()).subtracting(before)
        let beforeNew = moto.requests().count
        try await Self.succeed(Self.publishArguments(workspace, moto))
        let newUploads = Self.uploads(moto, from: beforeNew).map(\.path)
        #expect(newUploads.filter { $0.contains("/packages/") } == newFiles.map { "/releases/app/packages/\($0)" })
        // The manifest, then the timestamp naming its content-addressed copy, last.
        #expect(newUploads.suffix(2) == ["/releases/app/manifest.json", "/releases/app/timestamp.json"])
        let copy = try #require(newUploads.firstIndex { $0.hasPrefix("/releases/app/manifests/") })
        #expect(copy < newUploads.count - 2)
        #expect(try await workspace.install(manifestURL, root: root) == ["app": app2, "fonts": fonts])

        // A damaged object in the bucket is what verify --url reports.
        let damaged = try #require(before.sorted().first { $0.hasPrefix("app-1-") })
        try await Subprocess.check(
            "python3",
            [
                "-c",
                "import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=b'x', method='PUT', headers={'x-amz-acl': 'public-read', 'Content-Type': 'application/zip'}))",
                Self.publicURL(moto, "app/packages/\(damaged)"),
            ]
        )
        let refused = try await Self.hot(["verify", "--url", manifestURL, "--trust", workspace.publicKey])
        #expect(refused.status == 1)
        #expect(refused.stdout.contains("app 1: \(Self.publicURL(moto, "app/packages/\(damaged)")) has 1 bytes"))
        await moto.stop()
    }

    @Test("virtual-hosted addressing publishes to BUCKET.HOST/KEY")
    func virtualHosted() async throws {
        let moto = try await MotoServer.start()
        try await moto.createBucket("releases")
        let workspace = try await Workspace.make("virtual")
        let files = try await workspace.pack("app", "1", releaseFiles("1"))
        try await workspace.sign()
        // *.localhost resolves to the loopback address in libcurl.
        try await Self.succeed([
            "publish", workspace.repo, "s3://releases/v", "--endpoint", "http://localhost:\(moto.port)",
            "--addressing", "virtual", "--acl", "public-read",
        ])
        #expect(
            moto.requests().contains {
                $0.method == "PUT" && $0.host == "releases.localhost:\(moto.port)" && $0.path == "/v/manifest.json"
            }
        )
        let installed = try await workspace.install(
            "http://releases.localhost:\(moto.port)/v/manifest.json",
            root: workspace.directory.appendingPathComponent("store").path
        )
        #expect(installed == ["app": files])
        await moto.stop()
    }

    @Test(
        "a publish killed in the middle of a multipart upload: the old manifest keeps serving a whole repository; the rerun resumes and finishes"
    )
    func interrupted() async throws {
        let moto = try await MotoServer.start()
        try await moto.createBucket("releases")
        let workspace = try await Workspace.make("interrupted")
        let app1 = try await workspace.pack("app", "1", releaseFiles("1"))
        try await workspace.sign()
        let small = ["--multipart-threshold", "5", "--part-size", "5", "--concurrency", "1"]
        try await Self.succeed(Self.publishArguments(workspace, moto) + small)
        let manifestURL = Self.publicURL(moto, "app/manifest.json")

        // Version 2 carries an 11 MiB file: three parts of at most 5 MiB.
        let big = ["big.bin": noise(11 << 20, seed: 3), "config.txt": Data("config 2".utf8)]
        try await workspace.pack("app", "2", big)
        try await workspace.sign()
        try moto.stall(matching: "partNumber=2")
        let process = try ChildProcess(
            "/usr/bin/env",
            Self.environment + [try CommandLineTests.hotExecutable().path] + Self.publishArguments(workspace, moto)
                + small,
            standardOutput: .null,
            standardError: .null
        )
        let held = await moto.waitForRequest { $0.stalled == true && $0.query.contains("partNumber=2") }
        #expect(
            held != nil,
            "the second part never arrived: \(moto.requests().map { "\($0.method) \($0.path)?\($0.query)" })"
        )
        process.kill()
        #expect(await process.exit(within: .seconds(60)) == .signalled(SIGKILL))
        moto.release()

        // Clients still see version 1, and everything it names is there.
        let manifest = try SignedManifestBody.decode(
            try SignedEnvelope.parse(
                try await CurlTransport().fetchDocument(url: try #require(URL(string: manifestURL)), maxBytes: 1 << 20)
            ).signed
        )
        #expect(manifest.version == 1)
        try await Self.succeed(["verify", "--url", manifestURL, "--trust", workspace.publicKey])
        let root = workspace.directory.appendingPathComponent("store").path
        #expect(try await workspace.install(manifestURL, root: root) == ["app": app1])

        // The rerun keeps the part already stored and finishes.
        let rerun = try await Self.succeed(Self.publishArguments(workspace, moto) + small)
        #expect(rerun.stdout.contains("resumed after 1 part(s)"))
        // Multipart requests (?uploads=, ?uploadId=, ?partNumber=) are signed right too.
        #expect(moto.requests().filter { $0.query.contains("upload") }.allSatisfy { $0.signatureValid == true })
        let parts = moto.requests().filter {
            $0.method == "PUT" && $0.query.contains("partNumber=1") && $0.status == 200
        }
        #expect(parts.count == 1)
        try await Self.succeed(["verify", "--url", manifestURL, "--trust", workspace.publicKey])
        #expect(try await workspace.install(manifestURL, root: root) == ["app": big])
        await moto.stop()
    }

    @Test("prune deletes only what no kept manifest names; --dry-run deletes nothing")
    func prune() async throws {
        let moto = try await MotoServer.start()
        try await moto.createBucket("releases")
        let workspace = try await Workspace.make("prune")
        try await workspace.pack("app", "1", releaseFiles("1"))
        try await workspace.pack("fonts", "1", ["f/a.ttf": noise(10_000, seed: 4)])
        try await workspace.sign()
        try await Self.succeed(Self.publishArguments(workspace, moto))
        let firstManifest = try Data(contentsOf: URL(fileURLWithPath: workspace.repo + "/manifest.json"))
        let firstSHA256 = try CryptoVerifier().digest(of: firstManifest, using: .sha256).hex
        let firstCopy = "manifests/\(firstSHA256).json"
        let fontsFile = try #require(try workspace.packageFiles().first { $0.hasPrefix("fonts-1-") })

        // Version 2 of the manifest drops fonts; a stray file goes up with it.
        let manifestFile = URL(fileURLWithPath: workspace.repo + "/manifest.json")
        var body = try SignedManifestBody.decode(try SignedEnvelope.parse(Data(contentsOf: manifestFile)).signed)
        body.packages.removeAll { $0.id == "fonts" }
        try SignedEnvelope(signed: try body.canonicalBytes(), signatures: []).encoded().write(to: manifestFile)
        try FileManager.default.removeItem(atPath: workspace.repo + "/packages/\(fontsFile)")
        try Data("stray".utf8).write(to: URL(fileURLWithPath: workspace.repo + "/packages/stray.zip"))
        try await workspace.sign()
        try await Self.succeed(Self.publishArguments(workspace, moto))
        let appFile = try #require(try workspace.packageFiles().first { $0.hasPrefix("app-1-") })

        let beforeDryRun = moto.requests().count
        let dryRun = try await Self.succeed(
            Self.publishArguments(workspace, moto) + ["--prune", "--keep", "1", "--dry-run"]
        )
        #expect(dryRun.stdout.contains("would delete\tpackages/\(fontsFile)"))
        #expect(dryRun.stdout.contains("would delete\tpackages/stray.zip"))
        #expect(!dryRun.stdout.contains(appFile))
        #expect(!moto.requests().dropFirst(beforeDryRun).contains { $0.method == "DELETE" || $0.method == "PUT" })

        // Two kept manifests: the first still names fonts, so only the stray file goes.
        let keepTwo = try await Self.succeed(Self.publishArguments(workspace, moto) + ["--prune", "--keep", "2"])
        #expect(keepTwo.stdout.contains("deleted 1 package file(s)"))
        #expect(keepTwo.stdout.contains("deleted\tpackages/stray.zip"))

        // One kept manifest, the live one: fonts goes, and the first manifest's copy; what the
        // live manifest and its timestamp name stays.
        let keepOne = try await Self.succeed(Self.publishArguments(workspace, moto) + ["--prune", "--keep", "1"])
        #expect(keepOne.stdout.contains("deleted\tpackages/\(fontsFile)"))
        #expect(keepOne.stdout.contains("deleted\t\(firstCopy)"))
        let deleted = moto.requests().filter { $0.method == "DELETE" && $0.status < 300 }.map(\.path)
        #expect(
            Set(deleted) == [
                "/releases/app/packages/stray.zip", "/releases/app/packages/\(fontsFile)", "/releases/app/\(firstCopy)",
            ]
        )
        try await Self.succeed([
            "verify", "--url", Self.publicURL(moto, "app/manifest.json"), "--trust", workspace.publicKey,
        ])
        await moto.stop()
    }

    @Test(
        "pull brings each timestamp with its manifest; a publish whose repository dropped a channel's timestamp deletes the bucket's"
    )
    func timestampsFollowTheRepository() async throws {
        let moto = try await MotoServer.start()
        try await moto.createBucket("releases")
        let workspace = try await Workspace.make("pull-timestamps")
        try await workspace.pack("app", "1", releaseFiles("1"))
        try await workspace.sign()
        try await Self.succeed(Self.publishArguments(workspace, moto))
        let timestampURL = try #require(URL(string: Self.publicURL(moto, "app/timestamp.json")))
        let transport = CurlTransport()
        func served() async throws -> Int {
            try await transport.fetch(TransportRequest(url: timestampURL, method: "HEAD")).statusCode
        }
        #expect(try await served() == 200)

        // Pulled, the working copy holds the manifest and the timestamp the bucket serves.
        let work = try makeTemporaryDirectory("pulled")
        let pulled = try await Self.succeed([
            "pull", "s3://releases/app", "--repo", work.path, "--endpoint", moto.baseURL.absoluteString,
        ])
        #expect(pulled.stdout.contains("pulled 1 manifest(s)"), "\(pulled.stdout)")
        let local = work.appendingPathComponent("timestamp.json")
        #expect(
            try Data(contentsOf: local) == Data(contentsOf: URL(fileURLWithPath: workspace.repo + "/timestamp.json"))
        )

        // The working copy drops it (as hot rollout does when it cannot sign one again): the
        // publish deletes the bucket's, after the manifest, and clients read the manifest.
        try FileManager.default.removeItem(at: local)
        let published = try await Self.succeed([
            "publish", work.path, "s3://releases/app", "--endpoint", moto.baseURL.absoluteString, "--acl",
            "public-read",
        ])
        #expect(published.stdout.contains("deleted\ttimestamp.json"), "\(published.stdout)")
        #expect(try await served() == 404)
        let root = workspace.directory.appendingPathComponent("store").path
        #expect(
            try await workspace.install(Self.publicURL(moto, "app/manifest.json"), root: root).keys.sorted() == ["app"]
        )
        await moto.stop()
    }

    @Test("mirrors: with the first mirror stopped, a client installs from the bucket")
    func mirrorFallback() async throws {
        let moto = try await MotoServer.start()
        try await moto.createBucket("releases")
        let workspace = try await Workspace.make("mirrors")
        let files = try await workspace.pack("app", "1", releaseFiles("1"))
        try await workspace.sign()
        try await Self.succeed(Self.publishArguments(workspace, moto))
        let cdn = try await NginxServer.start(root: URL(fileURLWithPath: workspace.repo))
        await cdn.stop()
        let origin = Self.publicURL(moto, "app/")
        let installed = try await workspace.install(
            cdn.baseURL.appendingPathComponent("manifest.json").absoluteString,
            root: workspace.directory.appendingPathComponent("store").path,
            extra: ["--mirror", cdn.baseURL.absoluteString, "--mirror", origin]
        )
        #expect(installed == ["app": files])
        let reads = moto.requests().filter { $0.method == "GET" && $0.path.hasPrefix("/releases/app/") }.map(\.path)
        // The timestamp, then the manifest copy it names, then the package: all from the bucket.
        #expect(reads.contains("/releases/app/timestamp.json"), "\(reads)")
        #expect(reads.contains { $0.hasPrefix("/releases/app/manifests/") }, "\(reads)")
        #expect(reads.contains { $0.hasPrefix("/releases/app/packages/app-1-") })
        await moto.stop()
    }
}
#endif
