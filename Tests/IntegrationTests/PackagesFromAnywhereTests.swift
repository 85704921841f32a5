import Foundation
import HotAssets
import HotCore
import HotTestServers
import HotTesting
import HotTransport
import HotVerify
import Testing

/// One updater, one manifest, packages from a file shipped with the app, from the app's
/// bundle and from a server; and password-protected (ZipCrypto) packages.
@Suite("Packages from anywhere")
struct PackagesFromAnywhereTests {
    /// A descriptor for `archive` at `url`, with its real size and digests.
    func descriptor(
        _ id: String,
        _ version: String,
        archive: URL,
        url: URL,
        password: String? = nil
    ) throws
        -> PackageDescriptor
    {
        let verifier = CryptoVerifier()
        return try PackageDescriptor(
            id: id,
            version: version,
            url: url,
            size: Int64(try Data(contentsOf: archive).count),
            sha256: try verifier.digest(ofFile: archive, using: .sha256),
            password: password
        )
    }

    @Test("a file:// package, a bundle:/// package and an http:// package install in one sync")
    func mixedSources() async throws {
        let shipped = try makeTemporaryDirectory("shipped")
        let bundle = try makeTemporaryDirectory("bundle")
        let served = try makeTemporaryDirectory("served")
        defer { for directory in [shipped, bundle, served] { try? FileManager.default.removeItem(at: directory) } }
        let local = try await zipFiles(
            ["a.txt": Data("from a file".utf8)],
            to: shipped.appendingPathComponent("local.zip")
        )
        let bundled = try await zipFiles(
            ["b.txt": Data("from the bundle".utf8)],
            to: bundle.appendingPathComponent("packs/3000.zip")
        )
        let remote = try await zipFiles(
            ["c.txt": Data("from the server".utf8)],
            to: served.appendingPathComponent("remote.zip")
        )
        let nginx = try await NginxServer.start(root: served)
        let root = try makeTemporaryDirectory("store")
        defer { try? FileManager.default.removeItem(at: root) }
        let transport = SchemeRoutingTransport(http: httpTransport(), file: FileTransport(bundleRoot: bundle))
        let updater = makeUpdater(root: root, using: transport)

        let manifest = try Manifest(packages: [
            try descriptor("local", "1", archive: local, url: local),
            try descriptor(
                "bundled",
                "1",
                archive: bundled,
                url: try #require(URL(string: "bundle:///packs/3000.zip"))
            ),
            try descriptor("remote", "1", archive: remote, url: nginx.baseURL.appendingPathComponent("remote.zip")),
        ])
        let report = try await updater.sync(from: FixedManifestSource(manifest: manifest))
        #expect(report.failures.isEmpty, "\(report.failures.map { $0.error?.detailedDescription() ?? "" })")
        #expect(try await installedTree(updater, "local") == ["a.txt": Data("from a file".utf8)])
        #expect(try await installedTree(updater, "bundled") == ["b.txt": Data("from the bundle".utf8)])
        #expect(try await installedTree(updater, "remote") == ["c.txt": Data("from the server".utf8)])
        #expect(nginx.requests().map(\.path) == ["/remote.zip"])
        await nginx.stop()
    }

    @Test("the platform's HTTP transport is libcurl where it is linked, and the router sends files to FileTransport")
    func platformDefault() throws {
        let router = SchemeRoutingTransport(http: SchemeRoutingTransport.platformHTTP())
        let http = try #require(router.transport(for: URL(string: "https://cdn.example.com/p.zip")!))
        #if Curl
        #expect(http is CurlTransport)
        #else
        #expect(http is URLSessionTransport)
        #endif
        #expect(router.transport(for: URL(fileURLWithPath: "/p.zip")) is FileTransport)
        #expect(router.transport(for: URL(string: "ftp://example.com/p.zip")!) == nil)
    }

    @Test("a scheme without a route fails only its package, before anything is fetched")
    func unroutedScheme() async throws {
        let shipped = try makeTemporaryDirectory("shipped")
        let root = try makeTemporaryDirectory("store")
        defer { for directory in [shipped, root] { try? FileManager.default.removeItem(at: directory) } }
        let local = try await zipFiles(["a.txt": Data("a".utf8)], to: shipped.appendingPathComponent("local.zip"))
        let updater = makeUpdater(root: root, using: SchemeRoutingTransport(http: httpTransport()))
        let manifest = try Manifest(packages: [
            try descriptor("local", "1", archive: local, url: local),
            try descriptor("ftp", "1", archive: local, url: try #require(URL(string: "ftp://127.0.0.1/local.zip"))),
        ])
        let report = try await updater.sync(from: FixedManifestSource(manifest: manifest))
        #expect(report.failures.map(\.id) == ["ftp"])
        #expect(report.failures.first?.error?.code == .invalidArgument)
        #expect(report.failures.first?.error?.message.contains("ftp:") == true)
        #expect(try await activeVersions(updater) == ["local": "1"])
    }

    @Test("a ZipCrypto package made with zip -P installs with its password over nginx")
    func passwordProtected() async throws {
        let served = try makeTemporaryDirectory("served")
        let root = try makeTemporaryDirectory("store")
        defer { for directory in [served, root] { try? FileManager.default.removeItem(at: directory) } }
        let files = [
            "index.json": Data(#"{"id": "111", "type": "filter", "filter": ["warm.cube", "cold.cube"]}"#.utf8),
            "warm.cube": noise(40_000, seed: 1), "cold.cube": Data(String(repeating: "LUT 0 0 0\n", count: 500).utf8),
        ]
        let v1 = try await zipFiles(files, to: served.appendingPathComponent("111.zip"), password: "111")
        let listing = try await Subprocess.check("zipinfo", ["-v", v1.path])
        #expect(listing.stdout.contains("encrypted"))
        let nginx = try await NginxServer.start(root: served)
        let updater = makeUpdater(root: root, using: SchemeRoutingTransport(http: httpTransport()))
        let url = nginx.baseURL.appendingPathComponent("111.zip")

        let report = try await updater.sync(
            from: FixedManifestSource(
                manifest: try Manifest(packages: [
                    try descriptor("filters", "1", archive: v1, url: url, password: "111")
                ])
            )
        )
        #expect(report.failures.isEmpty, "\(report.failures.map { $0.error?.detailedDescription() ?? "" })")
        #expect(try await installedTree(updater, "filters") == files)

        // The typed resources of the installed pack resolve to its files.
        let package = try #require(try await updater.installedPackages().first)
        let pack = try ResourcePackResolver().open(package)
        #expect(pack.index.id == "111")
        #expect(try pack.url(for: "warm.cube", type: .filter).map { try Data(contentsOf: $0) } == files["warm.cube"])
        await nginx.stop()
    }

    @Test("a wrong or missing password fails the update and keeps the installed version")
    func wrongPassword() async throws {
        let served = try makeTemporaryDirectory("served")
        let root = try makeTemporaryDirectory("store")
        defer { for directory in [served, root] { try? FileManager.default.removeItem(at: directory) } }
        let v1 = try await zipFiles(
            ["a.txt": Data("v1".utf8)],
            to: served.appendingPathComponent("v1.zip"),
            password: "right"
        )
        let v2 = try await zipFiles(
            ["a.txt": Data("v2".utf8)],
            to: served.appendingPathComponent("v2.zip"),
            password: "right"
        )
        let updater = makeUpdater(root: root, using: SchemeRoutingTransport(http: httpTransport()))
        let sync = { (descriptor: PackageDescriptor) in
            try await updater.sync(from: FixedManifestSource(manifest: try Manifest(packages: [descriptor])))
        }
        try await sync(try descriptor("p", "1", archive: v1, url: v1, password: "right")).throwIfFailed()

        let wrong = try await sync(try descriptor("p", "2", archive: v2, url: v2, password: "wrong"))
        #expect(wrong.failures.first?.error?.code == .wrongPassword)
        let missing = try await sync(try descriptor("p", "2", archive: v2, url: v2))
        #expect(missing.failures.first?.error?.code == .passwordRequired)
        #expect(try await activeVersions(updater) == ["p": "1"])
        #expect(try await installedTree(updater, "p") == ["a.txt": Data("v1".utf8)])
    }
}

@Suite("Scheme routing and redirects")
struct SchemeRoutingRedirectTests {
    @Test("a server cannot redirect a download to a local file", arguments: TransportKind.allCases)
    func redirectToFile(transport: TransportKind) async throws {
        let served = try makeTemporaryDirectory("served")
        let secrets = try makeTemporaryDirectory("secrets")
        defer { for directory in [served, secrets] { try? FileManager.default.removeItem(at: directory) } }
        let secret = secrets.appendingPathComponent("secret.txt")
        try Data("local secret".utf8).write(to: secret)
        let nginx = try await NginxServer.start(
            root: served,
            options: .init(locations: [.redirect(from: "/package.zip", to: secret.absoluteString)])
        )
        let router = SchemeRoutingTransport(http: transport.make())
        let url = nginx.baseURL.appendingPathComponent("package.zip")
        var body = Data()
        do {
            let response = try await router.fetch(TransportRequest(url: url, maxBytes: 1 << 20))
            if response.isSuccess { body = try await response.collect(limit: 1 << 20) } else { response.body.cancel() }
        } catch let error as HotUpdateError {
            // Refused as a transport failure (the redirect's scheme is not followed), never
            // anything else: a cancelled fetch or a file-system error would mean it was tried.
            #expect([.transportFailed, .httpStatus, .unsupported].contains(error.code), "\(error)")
        }
        #expect(nginx.requests().first?.status == 302)
        #expect(body != Data("local secret".utf8))
        await nginx.stop()
    }
}
