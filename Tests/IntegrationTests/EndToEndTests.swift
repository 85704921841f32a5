import Foundation
import HotArchive
import HotAssets
import HotCore
import HotManifest
import HotStore
import HotTestServers
import HotTesting
import HotTransport
import HotVerify
import Testing

/// check → download → verify → unpack → commit → resolve, over nginx on 127.0.0.1,
/// through both HTTP transports and both unarchivers.
@Suite("End to end over nginx")
struct EndToEndTests {
    static let combinations: [(TransportKind, UnarchiverKind)] = TransportKind.allCases.flatMap { transport in
        UnarchiverKind.allCases.map { (transport, $0) }
    }

    /// A sample package: images in three scales, nested scripts, an empty file.
    static func sampleTree(version: Int) -> [String: Data] {
        [
            "sub/sample@3x.png": noise(30_000, seed: UInt64(version)),
            "sub/sample@2x.png": noise(20_000, seed: UInt64(version) + 100),
            "web/js/app.js": Data(String(repeating: "console.log('v\(version)');\n", count: 2_000).utf8),
            "web/index.html": Data("<html>v\(version)</html>".utf8),
            "config.json": Data(#"{"version": \#(version)}"#.utf8),
            "empty.txt": Data(),
        ]
    }

    @Test("a published package installs identically and resolves before the bundle", arguments: combinations)
    func installAndResolve(transport: TransportKind, unarchiver: UnarchiverKind) async throws {
        let source = try makeTemporaryDirectory("source")
        let files = Self.sampleTree(version: 1)
        try writeTree(files, under: source)
        let repository = try Repository()
        let entry = try repository.publish(source, id: "images", version: "1")
        let server = try await NginxServer.start(root: repository.directory)
        let root = try makeTemporaryDirectory("store")
        let updater = makeUpdater(root: root, transport: transport, unarchiver: unarchiver)
        let manifestURL = server.baseURL.appendingPathComponent("manifest.json")

        let report = try await updater.sync(from: StaticManifestSource(url: manifestURL, transport: transport.make()))
        #expect(report.failures.isEmpty, "\(report.failures.map { $0.error?.detailedDescription() ?? "" })")
        #expect(report.bytesDownloaded == entry.size)

        let installed = try #require(try await updater.installedPackages().first)
        #expect(try readTree(installed.directory) == files)

        let bundle = try makeTemporaryDirectory("bundle")
        try writeTree(["sub/sample.png": Data("bundled".utf8), "logo.png": Data("logo".utf8)], under: bundle)
        let resolver = try AssetResolverChain.make(packages: [installed], bundle: bundle)
        let sample = try #require(resolver.resolve("sub/sample"))
        #expect(sample.url.lastPathComponent == "sample@3x.png")
        #expect(sample.origin == .package(id: "images", version: "1"))
        #expect(resolver.resolve("logo")?.origin == .bundle)

        // Nothing new: nothing downloaded.
        let again = try await updater.sync(from: StaticManifestSource(url: manifestURL, transport: transport.make()))
        #expect(again.packages.map(\.change) == [.unchanged])
        _ = await server.waitForRequests(path: "/manifest.json", count: 2)
        #expect(server.requestCount(for: "/\(entry.url)") == 1)
        await server.stop()
    }

    /// How a newer release is broken on the server.
    enum Sabotage: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case wrongDigest, missingArchive, corruptArchive, truncatedBody, oversizeBody
        var testDescription: String { rawValue }
        var expected: [HotUpdateError.Code] {
            switch self {
            case .wrongDigest: [.digestMismatch]
            case .missingArchive: [.httpStatus]
            case .corruptArchive: [.notAnArchive, .corruptArchive]
            case .truncatedBody: [.truncated]
            case .oversizeBody: [.sizeMismatch]
            }
        }
    }

    @Test(
        "a broken newer release is refused and the previous version stays active and intact",
        arguments: TransportKind.allCases,
        Sabotage.allCases
    )
    func brokenReleaseKeepsPrevious(transport: TransportKind, sabotage: Sabotage) async throws {
        let repository = try Repository()
        let v1 = try makeTemporaryDirectory("v1")
        try writeTree(Self.sampleTree(version: 1), under: v1)
        try repository.publish(v1, id: "images", version: "1")
        let server = try await NginxServer.start(root: repository.directory)
        let root = try makeTemporaryDirectory("store")
        let updater = makeUpdater(root: root, transport: transport)
        let source = StaticManifestSource(
            url: server.baseURL.appendingPathComponent("manifest.json"),
            transport: transport.make()
        )
        #expect(try await updater.sync(from: source).failures.isEmpty)
        let before = try readTree(root.appendingPathComponent("packages"))
        let storeBefore = try await updater.installedPackages().map { "\($0.id) \($0.version) \($0.directory.path)" }

        let v2 = try makeTemporaryDirectory("v2")
        try writeTree(Self.sampleTree(version: 2), under: v2)
        let entry = try repository.publish(v2, id: "images", version: "2")
        var rawServer: RawHTTPServer?
        switch sabotage {
        case .wrongDigest:
            try repository.update { $0.packages[0].sha256 = String(repeating: "0", count: 64) }
        case .missingArchive:
            try FileManager.default.removeItem(at: repository.archive(entry))
        case .corruptArchive:
            // Garbage whose size and digest match the manifest: it passes verification and
            // must be refused by the unarchiver.
            let garbage = noise(Int(entry.size), seed: 99)
            try garbage.write(to: repository.archive(entry))
            let sha = try CryptoVerifier().digest(of: garbage, using: .sha256).hex
            try repository.update {
                $0.packages[0].sha256 = sha
                $0.packages[0].md5 = nil
            }
        case .truncatedBody:
            let raw = try RawHTTPServer.start(.truncated(announced: Int(entry.size), sent: Int(entry.size) / 2))
            rawServer = raw
            try repository.update { $0.packages[0].url = raw.url.absoluteString }
        case .oversizeBody:
            try repository.update { $0.packages[0].size = entry.size - 100 }
        }

        let report = try await updater.sync(from: source)
        let failure = try #require(report.failures.first)
        #expect(
            sabotage.expected.contains(try #require(failure.error).code),
            "\(failure.error?.detailedDescription() ?? "")"
        )
        #expect(failure.activeVersion == "1")
        #expect(
            try await updater.installedPackages().map { "\($0.id) \($0.version) \($0.directory.path)" } == storeBefore
        )
        #expect(try readTree(root.appendingPathComponent("packages")) == before)
        #expect(try await updater.currentSnapshot().packages["images"]?.state == .failed)
        let staging = root.appendingPathComponent("staging")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: staging.path)) ?? []).isEmpty)

        // A reopened store (next launch) still serves version 1.
        let reopened = makeUpdater(root: root, transport: transport)
        #expect(try await reopened.installedPackages().map(\.version) == ["1"])
        rawServer?.stop()
        await server.stop()
    }

    @Test("the property-list store and the older {url, md5} patch info work end to end")
    func patchInfoWithPropertyList() async throws {
        let repository = try Repository()
        let source = try makeTemporaryDirectory("patch")
        try writeTree(["sub/sample@2x.png": noise(500, seed: 5)], under: source)
        let entry = try repository.publish(source, id: "patch", version: "1")
        let patchInfo = #"{"url": "\#(entry.url)", "md5": "\#(entry.md5 ?? "")"}"#
        try Data(patchInfo.utf8).write(to: repository.directory.appendingPathComponent("patch.json"))
        try Data(#"{"url": "", "md5": ""}"#.utf8).write(to: repository.directory.appendingPathComponent("none.json"))
        let server = try await NginxServer.start(root: repository.directory)
        let root = try makeTemporaryDirectory("store")
        let updater = makeUpdater(root: root, transport: .http, plist: true)

        let report = try await updater.sync(
            from: PatchInfoManifestSource(
                url: server.baseURL.appendingPathComponent("patch.json"),
                transport: httpTransport()
            )
        )
        #expect(report.failures.isEmpty)
        #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent("store.plist").path))
        let installed = try #require(try await updater.installedPackages().first)
        #expect(installed.version == entry.md5)
        #expect(try readTree(installed.directory).keys.sorted() == ["sub/sample@2x.png"])

        // Publishing "no patch" removes it: assets fall back to the bundle.
        let removal = try await updater.sync(
            from: PatchInfoManifestSource(
                url: server.baseURL.appendingPathComponent("none.json"),
                transport: httpTransport()
            )
        )
        #expect(removal.packages.map(\.change) == [.remove])
        #expect(try await updater.installedPackages().isEmpty)
        await server.stop()
    }
}
