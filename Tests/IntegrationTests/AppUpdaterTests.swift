import Foundation
import HotTestServers
import HotTesting
import HotUpdate
import Testing

/// The preset: an updater in one line from a root, a manifest URL and release keys, against a
/// signed repository served by nginx on 127.0.0.1.
@Suite("AppUpdater")
struct AppUpdaterTests {
    /// A repository of one package, `app` 1, signed by `key`, served by nginx.
    static func serve(signedBy key: CryptoSigner) async throws -> (SignedRepository, NginxServer) {
        let repository = try SignedRepository(keys: [key])
        try repository.pack(releaseFiles("1"), id: "app", version: "1")
        try repository.sign(with: [key])
        return (repository, try await NginxServer.start(root: repository.directory))
    }

    @Test("one import and one line: syncs a signed repository, resolves from the package, then the bundle")
    func syncsAndResolves() async throws {
        let key = try CryptoSigner.generate()
        let (repository, server) = try await Self.serve(signedBy: key)
        defer { server.stopNow() }
        let root = try makeTemporaryDirectory("app-updater")

        let hot = try AppUpdater(root: root, manifest: repository.url(on: server), releaseKeys: [key.publicKey.pem])
        let report = try await hot.sync()
        try report.throwIfFailed()
        #expect(report.packages.map(\.activeVersion) == ["1"])

        let resolver = try await hot.resolver(bundle: try makeBundle())
        let config = try #require(resolver.resolve("config.txt"))
        #expect(config.origin == .package(id: "app", version: "1"))
        #expect(try Data(contentsOf: config.url) == Data("config 1".utf8))
        #expect(config.url.path.hasPrefix(root.resolvingSymlinksInPath().path) || config.url.path.hasPrefix(root.path))
        let image = try #require(resolver.resolve("sub/sample"))
        #expect(try Data(contentsOf: image.url) == releaseFiles("1")["sub/sample@2x.png"])
    }

    @Test("a manifest signed by a key it was not given is refused and installs nothing")
    func refusesOtherKeys() async throws {
        let other = try CryptoSigner.generate()
        let (repository, server) = try await Self.serve(signedBy: try CryptoSigner.generate())
        defer { server.stopNow() }
        let root = try makeTemporaryDirectory("app-updater")

        let hot = try AppUpdater(root: root, manifest: repository.url(on: server), releaseKeys: [other.publicKey.pem])
        await #expect(throws: HotUpdateError(.signatureInvalid, "")) { try await hot.sync() }
        #expect(try await hot.updater.installedPackages().isEmpty)
    }

    @Test("no release key, or one that is not a key, is refused before anything is asked")
    func refusesBadKeys() throws {
        let root = try makeTemporaryDirectory("app-updater")
        let manifest = try #require(URL(string: "http://127.0.0.1:9/manifest.json"))
        #expect(throws: HotUpdateError(.invalidArgument, "")) {
            try AppUpdater(root: root, manifest: manifest, releaseKeys: [])
        }
        #expect(throws: HotUpdateError.self) {
            try AppUpdater(root: root, manifest: manifest, releaseKeys: ["not a key"])
        }
    }
}
