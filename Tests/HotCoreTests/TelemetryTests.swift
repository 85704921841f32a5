import Foundation
import HotCore
import HotTesting
import Testing

/// Keeps every event it is given.
final class RecordingReporter: TelemetryReporter, @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [TelemetryEvent] = []

    func record(_ event: TelemetryEvent) { lock.withLock { recorded.append(event) } }

    var events: [TelemetryEvent] { lock.withLock { recorded } }

    /// `kind package version` of each event, with its bytes, restored version or error code.
    var lines: [String] {
        events.map { event in
            var line = "\(event.kind) \(event.packageID ?? "-") \(event.version ?? "-")"
            if let bytes = event.bytes { line += " bytes=\(bytes) \(event.delivery?.rawValue ?? "?")" }
            if let manifest = event.manifestVersion { line += " manifest=\(manifest)" }
            if event.kind == .rollback { line += " restored=\(event.restoredVersion ?? "bundle")" }
            if let code = event.errorCode { line += " error=\(code)" }
            return line
        }
    }
}

private struct FixedSource: ManifestSource {
    var manifest: Manifest?
    func fetchManifest() async throws -> Manifest {
        guard let manifest else { throw HotUpdateError(.transportFailed, "the server is down") }
        return manifest
    }
}

@Suite("Telemetry events from the engine")
struct TelemetryTests {
    @Test("check, download (bytes, full), install, confirm, rollback and block are reported, in order")
    func engineEvents() async throws {
        let fixture = try EngineFixture(launch: LaunchPolicy(guarded: ["app"]))
        let reporter = RecordingReporter()
        var configuration = fixture.updater.configuration
        configuration.telemetry = reporter
        let v1 = try await fixture.publish("app", "1", ["main.js": "1"])
        let v2 = try await fixture.publish("app", "2", ["main.js": "2"])

        var updater = Updater(configuration: configuration)
        _ = try await updater.sync(from: FixedSource(manifest: try Manifest(version: 7, packages: [v1])))
        let first = try await updater.launch.begin()
        try await updater.launch.confirm(first.token)
        _ = try await updater.apply(try Manifest(packages: [v2]))
        _ = try await updater.launch.begin()  // dies before confirming
        updater = Updater(configuration: configuration)
        _ = try await updater.launch.begin()
        await #expect(throws: HotUpdateError.self) { try await updater.sync(from: FixedSource(manifest: nil)) }

        #expect(
            reporter.lines == [
                "check - - manifest=7",
                "download app 1 bytes=\(v1.size ?? -1) full",
                "install app 1",
                "confirm app 1",
                "download app 2 bytes=\(v2.size ?? -1) full",
                "install app 2",
                "rollback app 2 restored=1",
                "block app 2 error=launchFailed",
                "check - - error=transportFailed",
            ]
        )
        #expect(reporter.events.filter(\.failed).map(\.kind) == [.check])
    }

    @Test("a failed download is reported with its code and no bytes")
    func failedDownload() async throws {
        let fixture = try EngineFixture()
        let reporter = RecordingReporter()
        var configuration = fixture.updater.configuration
        configuration.telemetry = reporter
        let missing = try PackageDescriptor(
            id: "pack",
            version: "1",
            url: URL(string: "https://cdn.test/missing.zip")!,
            size: 10,
            sha256: Digest(algorithm: .sha256, hex: String(repeating: "ab", count: 32))
        )
        let report = try await Updater(configuration: configuration).apply(try Manifest(packages: [missing]))
        let code = try #require(report.failures.first?.error?.code)
        #expect(reporter.lines == ["download pack 1 error=\(code)"])
    }

    @Test("the client id is random, kept under the root, and the same at the next launch")
    func clientID() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("telemetry-id-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let first = try TelemetryEvent.ClientID.load(root: root)
        #expect(UUID(uuidString: first) != nil)
        #expect(try TelemetryEvent.ClientID.load(root: root) == first)
        let other = root.appendingPathComponent("other")
        #expect(try TelemetryEvent.ClientID.load(root: other) != first)
        // A damaged file is replaced with a new random value.
        try Data("not an id".utf8).write(to: root.appendingPathComponent(TelemetryEvent.ClientID.fileName))
        let replaced = try TelemetryEvent.ClientID.load(root: root)
        #expect(replaced != first && UUID(uuidString: replaced) != nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.path).sorted() == ["other", "telemetry-id"])
    }
}
