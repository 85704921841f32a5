import Foundation
import HotCore
import HotTesting

/// nginx as a telemetry collector for tests: the body of every `POST /collect` is kept as a
/// file (read by ``batches()``) and answered 204; `/broken` answers 500.
///
/// ```swift
/// let collector = try await TelemetryCollector.start()
/// // … an HTTPTelemetryReporter posting to collector.collectURL …
/// let events = try collector.batches().flatMap(\.events)
/// await collector.stop()
/// ```
public struct TelemetryCollector: Sendable {
    /// The server.
    public let nginx: NginxServer
    /// Where the bodies are kept, one file each, in the order received.
    public let bodies: URL
    let root: URL

    /// Starts nginx on 127.0.0.1 with the collector's locations.
    public static func start() async throws -> TelemetryCollector {
        let root = ScratchDirectory.parentDirectory.appendingPathComponent("collector-\(UUID().uuidString)")
        let bodies = root.appendingPathComponent("bodies")
        let served = root.appendingPathComponent("served")
        try FileManager.default.createDirectory(at: bodies, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: served, withIntermediateDirectories: true)
        let nginx = try await NginxServer.start(
            root: served,
            options: .init(locations: [
                .init(
                    """
                    location = /collect { client_body_in_file_only on; client_body_buffer_size 1m; \
                    client_body_temp_path "\(bodies.path)"; proxy_pass http://127.0.0.1:$server_port/accepted; }
                    """
                ),
                .status(204, at: "/accepted"),
                .status(500, at: "/broken"),
            ])
        )
        return TelemetryCollector(nginx: nginx, bodies: bodies, root: root)
    }

    /// Where reporters post.
    public var collectURL: URL { nginx.baseURL.appendingPathComponent("collect") }
    /// A URL that answers 500.
    public var brokenURL: URL { nginx.baseURL.appendingPathComponent("broken") }

    /// One posted batch, as `HTTPTelemetryReporter` writes it.
    public struct Batch: Decodable, Sendable {
        /// The batch's id, which a resent batch keeps.
        public var batch: String?
        /// The client's id.
        public var client: String
        /// The channel, when the reporter was given one.
        public var channel: String?
        /// The app version, when the reporter was given one.
        public var appVersion: String?
        /// When the batch was sent.
        public var sentAt: Date
        /// The events.
        public var events: [TelemetryEvent]
    }

    /// The bodies posted to `/collect`, in order, decoded.
    public func batches() throws -> [Batch] {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try FileManager.default.contentsOfDirectory(atPath: bodies.path).sorted().map {
            try decoder.decode(Batch.self, from: Data(contentsOf: bodies.appendingPathComponent($0)))
        }
    }

    /// Requests logged for `path`.
    public func posts(_ path: String) -> [NginxServer.Request] {
        nginx.requests().filter { $0.path == path && $0.method == "POST" }
    }

    /// Stops nginx and removes its files.
    public func stop() async {
        await nginx.stop()
        try? FileManager.default.removeItem(at: root)
    }
}
