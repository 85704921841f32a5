import Foundation
import HotArchive
import HotCore
import HotManifest
import HotStore
import HotTestServers
import HotTesting
import HotTransport
import HotVerify
import Logging
import Testing

@Suite("Telemetry over nginx")
struct TelemetryOffTests {
    /// A sync and two launches of a guarded package against nginx, the updater's telemetry
    /// set to `telemetry(root)`.
    private func run(
        _ repository: SignedRepository,
        on nginx: NginxServer,
        client: SignedClient,
        telemetry: (URL) throws -> (any TelemetryReporter)?
    ) async throws {
        var configuration = client.updater().configuration
        configuration.launch = LaunchPolicy(guarded: ["app"])
        configuration.telemetry = try telemetry(client.root)
        let updater = Updater(configuration: configuration)
        let report = try await updater.sync(from: client.source(repository.url(on: nginx)))
        try report.throwIfFailed()
        let launch = try await updater.launch.begin()
        #expect(launch.package("app")?.version == "1")
        try await updater.launch.confirm(launch.token)
        _ = try await updater.sync(from: client.source(repository.url(on: nginx)))
    }

    @Test("off by default: a full sync and launch send nothing but the manifest and package requests")
    func zeroRequestsWhenOff() async throws {
        let key = try CryptoSigner.generate()
        let repository = try SignedRepository(keys: [key])
        try repository.pack(["main.js": Data("print(1)".utf8)], id: "app", version: "1")
        try repository.sign(with: [key])
        let bodies = try makeTemporaryDirectory("collected")
        let nginx = try await NginxServer.start(
            root: repository.directory,
            options: .init(locations: [
                .init(
                    """
                    location = /collect { client_body_in_file_only on; \
                    client_body_temp_path "\(bodies.path)"; proxy_pass http://127.0.0.1:$server_port/accepted; }
                    """
                ),
                .status(204, at: "/accepted"),
            ])
        )
        defer { nginx.stopNow() }

        // Off: the configuration's default.
        let off = try SignedClient(trust: .signed(by: [key.publicKey]))
        #expect(off.updater().configuration.telemetry == nil)
        try await run(repository, on: nginx, client: off) { _ in nil }
        let manifest = "/" + repository.manifestPath
        // The timestamp the client looks for beside the manifest (this repository has none).
        let timestamp = ((manifest as NSString).deletingLastPathComponent as NSString).appendingPathComponent(
            "timestamp.json"
        )
        let requests = nginx.requests()
        #expect(requests.filter { $0.method != "GET" }.isEmpty, "\(requests)")
        #expect(
            requests.filter { $0.path != manifest && $0.path != timestamp && !$0.path.hasPrefix("/packages/") }.isEmpty,
            "\(requests)"
        )
        #expect(requests.filter { $0.path.hasPrefix("/packages/") }.count == 1)
        #expect(requests.filter { $0.path == manifest }.count == 2)
        #expect(try FileManager.default.contentsOfDirectory(atPath: bodies.path).isEmpty)
        #expect(
            !FileManager.default.fileExists(
                atPath: off.root.appendingPathComponent(TelemetryEvent.ClientID.fileName).path
            )
        )

        // On, as a control: the same run posts its events.
        let on = try SignedClient(trust: .signed(by: [key.publicKey]))
        let reporter = try HTTPTelemetryReporter(
            url: nginx.baseURL.appendingPathComponent("collect"),
            transport: SchemeRoutingTransport.platformHTTP(),
            root: on.root
        )
        try await run(repository, on: nginx, client: on) { _ in reporter }
        let deadline = ContinuousClock.now.advanced(by: .seconds(60))
        while reporter.statistics.sent + reporter.statistics.droppedWithFailedBatches < reporter.statistics.recorded,
            ContinuousClock.now < deadline
        {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(reporter.statistics.sent == reporter.statistics.recorded)
        let posts = nginx.requests().filter { $0.path == "/collect" }
        #expect(!posts.isEmpty && posts.allSatisfy { $0.method == "POST" && $0.status == 204 })
        let clientID = try TelemetryEvent.ClientID.load(root: on.root)
        let files = try FileManager.default.contentsOfDirectory(atPath: bodies.path)
        #expect(files.count == posts.count)
        let body = try files.map { try String(contentsOf: bodies.appendingPathComponent($0), encoding: .utf8) }
            .joined()
        #expect(body.contains(#""client":"\#(clientID)""#))
        for kind in ["check", "download", "install", "confirm"] { #expect(body.contains(#""kind":"\#(kind)""#)) }
    }
}
