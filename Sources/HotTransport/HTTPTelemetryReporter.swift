import Foundation
import HotCore
import Logging

/// Sends telemetry events to a URL in batches, as JSON, over any `Transport`.
///
/// Events are queued by ``record(_:)``, which never waits. A flush starts only after the
/// ``Options/flushInterval`` (one second at least) has passed since the previous flush
/// ended, or since the first event queued when the reporter was idle, so there is at most
/// one request a second however many events arrive. The queue is bounded: past
/// ``Options/maxQueuedEvents`` the oldest events are dropped. A batch the server does not
/// accept (no 2xx, or no answer) is dropped too, never retried, so an unreachable
/// collector costs one request a second at most, and nothing piles up.
///
/// Each request is a `POST` of `application/json`:
///
/// ```json
/// {"client": "5c0f…", "sentAt": "2025-01-01T12:00:00Z",
///  "events": [{"kind": "download", "date": "2025-01-01T11:59:59Z", "packageID": "app",
///              "version": "2", "bytes": 48213, "delivery": "full"}]}
/// ```
///
/// `client` is `TelemetryEvent.ClientID`'s random per-install value, never a device
/// identifier.
///
/// ```swift
/// var configuration = UpdaterConfiguration(root: root, transport: CurlTransport(), unarchiver: ZipUnarchiver(),
///                                          verifier: CryptoVerifier(), store: FileMetadataStore(root: root))
/// configuration.telemetry = try HTTPTelemetryReporter(
///     url: URL(string: "https://collector.example.com/hot")!, transport: CurlTransport(), root: root)
/// ```
public final class HTTPTelemetryReporter: TelemetryReporter, Sendable {
    /// How the reporter batches.
    public struct Options: Sendable, Hashable {
        /// The least time between two flushes; at least one second.
        public var flushInterval: Duration
        /// The most events waiting; past it the oldest are dropped (at least 1).
        public var maxQueuedEvents: Int
        /// The most events in one request (at least 1).
        public var maxBatchEvents: Int
        /// Time limits for each request.
        public var timeouts: TransportRequest.Timeouts
        /// Extra headers sent with each request, such as an API key of the collector.
        public var headers: [String: String]

        /// Creates options.
        ///
        /// - Parameters:
        ///   - flushInterval: The least time between two flushes (raised to one second).
        ///   - maxQueuedEvents: The most events waiting.
        ///   - maxBatchEvents: The most events in one request.
        ///   - timeouts: Time limits for each request.
        ///   - headers: Extra headers sent with each request.
        public init(
            flushInterval: Duration = .seconds(1),
            maxQueuedEvents: Int = 1000,
            maxBatchEvents: Int = 200,
            timeouts: TransportRequest.Timeouts = TransportRequest.Timeouts(
                connect: .seconds(10),
                lowSpeedWindow: .seconds(10),
                total: .seconds(30)
            ),
            headers: [String: String] = [:]
        ) {
            self.flushInterval = max(.seconds(1), flushInterval)
            self.maxQueuedEvents = max(1, maxQueuedEvents)
            self.maxBatchEvents = max(1, maxBatchEvents)
            self.timeouts = timeouts
            self.headers = headers
        }
    }

    /// What the reporter has done since it was created.
    public struct Statistics: Sendable, Hashable {
        /// Events passed to ``HTTPTelemetryReporter/record(_:)``.
        public var recorded = 0
        /// Events the collector accepted.
        public var sent = 0
        /// Events dropped because the queue was full.
        public var droppedFromQueue = 0
        /// Events dropped with a batch the collector did not accept.
        public var droppedWithFailedBatches = 0
        /// Requests the collector accepted.
        public var batchesSent = 0
        /// Requests that failed.
        public var batchesFailed = 0
        /// Events waiting now.
        public var queued = 0
    }

    /// Where the batches go.
    public let url: URL
    /// The per-install identifier sent with every batch.
    public let clientID: String
    /// How the reporter batches.
    public let options: Options

    private let transport: any Transport
    private let logger: Logger
    private let sleep: @Sendable (Duration) async throws -> Void
    private struct State {
        var queue: [TelemetryEvent] = []
        var flushing = false
        var counters = Statistics()
    }

    private let state = Locked(State())

    /// Creates a reporter with a client identifier of your own.
    ///
    /// - Parameters:
    ///   - url: Where the batches are posted.
    ///   - transport: Sends them.
    ///   - clientID: The identifier sent with every batch: a random per-install value
    ///     (see `TelemetryEvent.ClientID`), never a device identifier.
    ///   - options: How the reporter batches.
    ///   - logger: Where failed batches are logged (at debug level).
    ///   - sleep: Waits between flushes; tests pass one they control.
    public init(
        url: URL,
        transport: any Transport,
        clientID: String,
        options: Options = Options(),
        logger: Logger = Logger(label: "HotUpdate.telemetry"),
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) {
        self.url = url
        self.transport = transport
        self.clientID = clientID
        self.options = options
        self.logger = logger
        self.sleep = sleep
    }

    /// Creates a reporter whose client identifier is kept under the store root (see
    /// `TelemetryEvent.ClientID`).
    ///
    /// - Parameters:
    ///   - url: Where the batches are posted.
    ///   - transport: Sends them.
    ///   - root: The store root the identifier is kept under.
    ///   - options: How the reporter batches.
    ///   - logger: Where failed batches are logged.
    /// - Throws: `HotUpdateError.Code.fileSystem` when the identifier can be neither read nor written.
    public convenience init(
        url: URL,
        transport: any Transport,
        root: URL,
        options: Options = Options(),
        logger: Logger = Logger(label: "HotUpdate.telemetry")
    ) throws {
        self.init(
            url: url,
            transport: transport,
            clientID: try TelemetryEvent.ClientID.load(root: root),
            options: options,
            logger: logger
        )
    }

    /// What the reporter has done so far.
    public var statistics: Statistics {
        state.withLock { state in
            var value = state.counters
            value.queued = state.queue.count
            return value
        }
    }

    /// Queues `event` and returns at once; a flush follows within the flush interval.
    ///
    /// - Parameter event: What happened.
    public func record(_ event: TelemetryEvent) {
        let start: Bool = state.withLock { state in
            state.counters.recorded += 1
            state.queue.append(event)
            let excess = state.queue.count - options.maxQueuedEvents
            if excess > 0 {
                state.queue.removeFirst(excess)
                state.counters.droppedFromQueue += excess
            }
            guard !state.flushing else { return false }
            state.flushing = true
            return true
        }
        if start { Task { await self.flushLoop() } }
    }

    /// The only flush loop running: waits the interval, sends one batch, and goes on while
    /// events wait.
    private func flushLoop() async {
        while true {
            do {
                try await sleep(options.flushInterval)
            } catch {
                state.withLock { state in state.flushing = false }
                return
            }
            let batch: [TelemetryEvent] = state.withLock { state in
                let batch = Array(state.queue.prefix(options.maxBatchEvents))
                state.queue.removeFirst(batch.count)
                return batch
            }
            if !batch.isEmpty { await send(batch) }
            let idle = state.withLock { state in
                if state.queue.isEmpty { state.flushing = false }
                return !state.flushing
            }
            if idle { return }
        }
    }

    private struct Body: Encodable {
        var client: String
        var sentAt: Date
        var events: [TelemetryEvent]
    }

    private func send(_ batch: [TelemetryEvent]) async {
        do {
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .iso8601
            encoder.outputFormatting = [.sortedKeys]
            let body = try encoder.encode(Body(client: clientID, sentAt: Date(), events: batch))
            var headers = options.headers
            headers["Content-Type"] = "application/json"
            let response = try await transport.fetch(
                TransportRequest(
                    url: url,
                    method: "POST",
                    headers: headers,
                    body: body,
                    timeouts: options.timeouts,
                    maxBytes: 1 << 16
                )
            )
            defer { response.body.cancel() }
            try response.requireSuccess()
            state.withLock { state in
                state.counters.sent += batch.count
                state.counters.batchesSent += 1
            }
        } catch {
            state.withLock { state in
                state.counters.droppedWithFailedBatches += batch.count
                state.counters.batchesFailed += 1
            }
            logger.debug("telemetry batch dropped: \(error)", metadata: ["events": "\(batch.count)"])
        }
    }
}
