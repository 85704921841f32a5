import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

/// A publisher's repository made as users make it (`hot keygen`, `hot pack`, `hot sign`),
/// served by nginx, and a client store synced from it with the real `hot`.
final class PublishedRepository: Sendable {
    let work: URL
    let repo: String
    let root: String
    let privateKey: String
    let publicKey: String
    let nginx: NginxServer
    var manifest: URL { URL(fileURLWithPath: repo).appendingPathComponent("manifest.json") }
    var manifestURL: String { nginx.baseURL.appendingPathComponent("manifest.json").absoluteString }
    /// `hot sync` of the store from the repository, trusting its key.
    var sync: [String] { ["sync", "--manifest", manifestURL, "--root", root, "--trust", publicKey] }

    init(_ name: String) async throws {
        work = try makeTemporaryDirectory(name)
        repo = work.appendingPathComponent("repo").path
        root = work.appendingPathComponent("store").path
        privateKey = work.appendingPathComponent("release.pem").path
        publicKey = work.appendingPathComponent("release.pub").path
        try await PublisherWorkflowTests.hot(["keygen", "--private", privateKey, "--public", publicKey])
        try FileManager.default.createDirectory(atPath: repo, withIntermediateDirectories: true)
        nginx = try await NginxServer.start(root: URL(fileURLWithPath: repo))
    }

    /// Packs (no deltas), releases and signs `version` of `app` holding `files`, expiring
    /// after `expires`; returns the archive's path on the server.
    @discardableResult
    func publish(_ version: String, files: [String: Data], expires: String = "30d") async throws -> String {
        let source = work.appendingPathComponent("v\(version)")
        try writeTree(files, under: source)
        try await PublisherWorkflowTests.hot([
            "pack", source.path, "--id", "app", "--version", version, "--repo", repo, "--deltas", "0",
        ])
        try await PublisherWorkflowTests.hot(["sign", "--repo", repo, "--key", privateKey, "--expires", expires])
        let packages = try FileManager.default.contentsOfDirectory(atPath: repo + "/packages")
        let archive = try #require(packages.first { $0.hasPrefix("app-\(version)-") && $0.hasSuffix(".zip") })
        return "/packages/" + archive
    }

    /// The active version of `app` and its files, as `hot status --json` names them.
    func active() async throws -> (version: String?, files: [String: Data]) {
        let status = try JSONDecoder().decode(
            CommandLineTests.StatusDocument.self,
            from: Data(try await PublisherWorkflowTests.hot(["status", "--root", root, "--json"]).stdout.utf8)
        )
        let package = try #require(status.packages.first { $0.id == "app" })
        let path = try #require(package.path)
        return (package.version, try readTree(URL(fileURLWithPath: path, isDirectory: true)))
    }

    func stop() async {
        await nginx.stop()
        try? FileManager.default.removeItem(at: work)
    }

    /// ``stop()`` on the calling thread, for a `defer`.
    func stopNow() {
        nginx.stopNow()
        try? FileManager.default.removeItem(at: work)
    }
}
