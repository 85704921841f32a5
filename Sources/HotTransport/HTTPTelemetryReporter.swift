import Foundation
import HotCore
import Logging

/// Sends telemetry events to a URL in batches, as JSON, over any `Transport`.
///
/// Events are queued by ``record(_:)``, which never waits on the network. A flush starts
/// only after the ``Options/flushInterval`` (one second at least) has passed since the
/// previous flush ended, or since the first event queued when the reporter was idle, so
/// there is at most one request a second however many events arrive; ``flush()`` sends what
/// is queued at once, before a process exits. The queue is bounded: past
/// ``Options/maxQueuedEvents`` the oldest events are dropped.
///
/// Where the queue lives:
/// - Created with a store root (``init(url:transport:root:options:logger:)``) or a
///   `queueDirectory`, the queue is a file: ``record(_:)`` appends the event to
///   `telemetry/queue.jsonl` under the root before it returns, so a process that dies loses
///   no event; the next process with that root sends them. A batch being sent is kept in a
///   file of its own until the collector answers; a batch the collector did not answer (no
///   answer, or 5xx) stays there and is sent again, with the same batch id, by the next
///   flush of a later process or by ``flush()``. A batch the collector refuses (4xx) is
///   dropped. Processes sharing a root share the queue (under `flock(2)`).
/// - Created with only a client id, the queue is in memory, and a batch that is not
///   accepted is dropped, never retried.
///
/// Each request is a `POST` of `application/json`:
///
/// ```json
/// {"batch": "1f0e…", "client": "5c0f…", "channel": "beta", "appVersion": "5.2",
///  "sentAt": "2025-01-01T12:00:00Z",
///  "events": [{"kind": "download", "date": "2025-01-01T11:59:59Z", "packageID": "app",
///              "version": "2", "bytes": 48213, "delivery": "full"}]}
/// ```
///
/// `batch` is a random id per batch, the same when a batch is sent again, so a collector
/// stores it once. `client` is `TelemetryEvent.ClientID`'s random per-install value, never a
/// device identifier. `channel` and `appVersion` come from ``Options`` and are left out
/// when nil.
///
/// ```swift
/// var configuration = UpdaterConfiguration(root: root, transport: CurlTransport(), unarchiver: ZipUnarchiver(),
///                                          verifier: CryptoVerifier(), store: FileMetadataStore(root: root))
/// configuration.telemetry = try HTTPTelemetryReporter(
///     url: URL(string: "https://collector.example.com/hot")!, transport: CurlTransport(), root: root,
///     options: .init(channel: "beta", appVersion: "5.2"))
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
        /// The channel the app follows, sent with every batch so the collector can group by it.
        public var channel: String?
        /// The app's version, sent with every batch.
        public var appVersion: String?

        /// Creates options.
        ///
        /// - Parameters:
        ///   - flushInterval: The least time between two flushes (raised to one second).
        ///   - maxQueuedEvents: The most events waiting.
        ///   - maxBatchEvents: The most events in one request.
        ///   - timeouts: Time limits for each request.
        ///   - headers: Extra headers sent with each request.
        ///   - channel: The channel the app follows, sent with every batch.
        ///   - appVersion: The app's version, sent with every batch.
        public init(
            flushInterval: Duration = .seconds(1),
            maxQueuedEvents: Int = 1000,
            maxBatchEvents: Int = 200,
            timeouts: TransportRequest.Timeouts = TransportRequest.Timeouts(
                connect: .seconds(10),
                lowSpeedWindow: .seconds(10),
                total: .seconds(30)
            ),
            headers: [String: String] = [:],
            channel: String? = nil,
            appVersion: String? = nil
        ) {
            self.flushInterval = max(.seconds(1), flushInterval)
            self.maxQueuedEvents = max(1, maxQueuedEvents)
            self.maxBatchEvents = max(1, maxBatchEvents)
            self.timeouts = timeouts
            self.headers = headers
            self.channel = channel
            self.appVersion = appVersion
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
        /// Events dropped with a batch the collector did not accept (kept for a later
        /// attempt instead, when the queue is a file, unless the collector refused them).
        public var droppedWithFailedBatches = 0
        /// Requests the collector accepted.
        public var batchesSent = 0
        /// Requests that failed.
        public var batchesFailed = 0
        /// Events waiting now (in the queue file, when there is one).
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
    private let spool: TelemetrySpool?
    private struct State {
        var queue: [TelemetryEvent] = []
        var flushing = false
        var counters = Statistics()
        /// Batch files this process failed to send: left for a later process or ``flush()``.
        var failedHere: Set<String> = []
        /// Batches taken and not yet answered.
        var inFlight = 0
        /// Nothing is sent before this: the collector's `Retry-After`.
        var notBefore: ContinuousClock.Instant?
    }

    private let state = Locked(State())

    /// Creates a reporter with a client identifier of your own, its queue in memory.
    ///
    /// - Parameters:
    ///   - url: Where the batches are posted.
    ///   - transport: Sends them.
    ///   - clientID: The identifier sent with every batch: a random per-install value
    ///     (see `TelemetryEvent.ClientID`), never a device identifier.
    ///   - options: How the reporter batches.
    ///   - logger: Where failed batches are logged (at debug level).
    ///   - sleep: Waits between flushes; tests pass one they control.
    public convenience init(
        url: URL,
        transport: any Transport,
        clientID: String,
        options: Options = Options(),
        logger: Logger = Logger(label: "HotUpdate.telemetry"),
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) {
        self.init(
            url: url,
            transport: transport,
            clientID: clientID,
            options: options,
            logger: logger,
            sleep: sleep,
            spool: nil
        )
    }

    /// The one initializer the public ones call.
    private init(
        url: URL,
        transport: any Transport,
        clientID: String,
        options: Options,
        logger: Logger,
        sleep: @escaping @Sendable (Duration) async throws -> Void,
        spool: TelemetrySpool?
    ) {
        self.url = url
        self.transport = transport
        self.clientID = clientID
        self.options = options
        self.logger = logger
        self.sleep = sleep
        self.spool = spool
    }

    /// Creates a reporter with a client identifier of your own whose unsent events are kept
    /// in files under `queueDirectory`, so that a process that dies loses none.
    ///
    /// - Parameters:
    ///   - url: Where the batches are posted.
    ///   - transport: Sends them.
    ///   - clientID: The identifier sent with every batch.
    ///   - queueDirectory: Where the queue and the batches being sent are kept.
    ///   - options: How the reporter batches.
    ///   - logger: Where failed batches are logged (at debug level).
    ///   - sleep: Waits between flushes; tests pass one they control.
    /// - Throws: `HotUpdateError.Code.fileSystem` when the directory cannot be created.
    public convenience init(
        url: URL,
        transport: any Transport,
        clientID: String,
        queueDirectory: URL,
        options: Options = Options(),
        logger: Logger = Logger(label: "HotUpdate.telemetry"),
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) throws {
        self.init(
            url: url,
            transport: transport,
            clientID: clientID,
            options: options,
            logger: logger,
            sleep: sleep,
            spool: try TelemetrySpool(directory: queueDirectory, bound: options.maxQueuedEvents)
        )
    }

    /// The directory under a store root that holds the reporter's queue.
    public static let queueDirectoryName = "telemetry"

    /// Creates a reporter whose client identifier (see `TelemetryEvent.ClientID`) and queue
    /// (``queueDirectoryName``) are kept under the store root, so that a process that dies
    /// loses no event: the next one sends them.
    ///
    /// - Parameters:
    ///   - url: Where the batches are posted.
    ///   - transport: Sends them.
    ///   - root: The store root the identifier and the queue are kept under.
    ///   - options: How the reporter batches.
    ///   - logger: Where failed batches are logged.
    /// - Throws: `HotUpdateError.Code.fileSystem` when the identifier or the queue can be
    ///   neither read nor written.
    public convenience init(
        url: URL,
        transport: any Transport,
        root: URL,
        options: Options = Options(),
        logger: Logger = Logger(label: "HotUpdate.telemetry")
    ) throws {
        try self.init(
            url: url,
            transport: transport,
            clientID: try TelemetryEvent.ClientID.load(root: root),
            queueDirectory: root.appendingPathComponent(Self.queueDirectoryName, isDirectory: true),
            options: options,
            logger: logger
        )
    }

    /// What the reporter has done so far.
    public var statistics: Statistics {
        let spooled = spool?.queuedCount()
        return state.withLock { state in
            var value = state.counters
            value.queued = spooled ?? state.queue.count
            return value
        }
    }

    /// Queues `event` and returns at once; a flush follows within the flush interval. With a
    /// queue file the event is appended to it before this returns.
    ///
    /// - Parameter event: What happened.
    public func record(_ event: TelemetryEvent) {
        var dropped = 0
        var spooled = false
        if let spool {
            do {
                dropped = try spool.append(Self.encoder().encode(event))
                spooled = true
            } catch {
                logger.debug("telemetry event kept in memory only: \(error)")
            }
        }
        let start: Bool = state.withLock { state in
            state.counters.recorded += 1
            if !spooled { state.queue.append(event) }
            let excess = state.queue.count - options.maxQueuedEvents
            if excess > 0 {
                state.queue.removeFirst(excess)
                dropped += excess
            }
            state.counters.droppedFromQueue += dropped
            guard !state.flushing else { return false }
            state.flushing = true
            return true
        }
        if start { Task { await self.flushLoop() } }
    }

    /// Sends everything queued now, without waiting for the flush interval, and returns when
    /// the collector has answered each batch: call it before a process exits. With a queue
    /// file, batches that earlier processes left unsent go first; what cannot be sent stays
    /// in the file for the next process.
    public func flush() async {
        var attempted: Set<String> = []
        while !waitingForRetryAfter(), let batch = take(skipping: attempted) {
            attempted.insert(batch.id)
            await deliver(batch)
        }
        // A batch the flush loop is sending now: wait for its answer, within its timeouts.
        while state.withLock({ $0.inFlight > 0 }) {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Whether the collector's `Retry-After` has not yet passed.
    private func waitingForRetryAfter() -> Bool {
        state.withLock { state in
            guard let notBefore = state.notBefore else { return false }
            if notBefore <= ContinuousClock.now {
                state.notBefore = nil
                return false
            }
            return true
        }
    }

    /// A batch ready to post: from the queue file, or from memory.
    private struct Outgoing {
        var id: String
        var body: Data
        var count: Int
        var spooled: TelemetrySpool.Batch?
        /// The events themselves, for a batch from memory (put back on a 429 or 5xx).
        var events: [TelemetryEvent] = []
    }

    /// The next batch, or nil when nothing waits (`skipping` batch files already tried).
    private func take(skipping: Set<String>) -> Outgoing? {
        if let spool {
            do {
                let batch = try spool.take(limit: options.maxBatchEvents, skipping: skipping) { id, lines in
                    try self.body(id: id, events: lines)
                }
                if let batch {
                    state.withLock { $0.inFlight += 1 }
                    return Outgoing(id: batch.id, body: batch.body, count: batch.count, spooled: batch)
                }
            } catch {
                logger.debug("telemetry queue unreadable: \(error)")
            }
        }
        // The memory queue; with a queue file, only events its file could not take.
        let events: [TelemetryEvent] = state.withLock { state in
            let batch = Array(state.queue.prefix(options.maxBatchEvents))
            state.queue.removeFirst(batch.count)
            if !batch.isEmpty { state.inFlight += 1 }
            return batch
        }
        guard !events.isEmpty else { return nil }
        let id = UUID().uuidString.lowercased()
        do {
            let lines = try events.map { try Self.encoder().encode($0) }
            return Outgoing(
                id: id,
                body: try body(id: id, events: lines),
                count: events.count,
                spooled: nil,
                events: events
            )
        } catch {
            state.withLock { $0.inFlight -= 1 }
            return nil
        }
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
            let wait = state.withLock { state -> Duration? in
                guard let notBefore = state.notBefore else { return nil }
                let left = notBefore - ContinuousClock.now
                return left > .zero ? left : nil
            }
            if let wait {
                do {
                    try await sleep(wait)
                } catch {
                    state.withLock { state in state.flushing = false }
                    return
                }
            }
            let failedHere = state.withLock { $0.failedHere }
            if !waitingForRetryAfter(), let batch = take(skipping: failedHere) { await deliver(batch) }
            let idle = state.withLock { state in
                let pending = !state.queue.isEmpty || (spool?.hasPending(skipping: state.failedHere) ?? false)
                if !pending { state.flushing = false }
                return !state.flushing
            }
            if idle { return }
        }
    }

    /// The JSON of a batch, its events already encoded one by one.
    private func body(id: String, events: [Data]) throws -> Data {
        var header: [String: String] = ["batch": id, "client": clientID]
        header["channel"] = options.channel
        header["appVersion"] = options.appVersion
        header["sentAt"] = ISO8601DateFormatter().string(from: Date())
        var data = try Self.encoder().encode(header)
        // `{…}` becomes `{…,"events":[e1,e2]}`.
        data.removeLast()
        data.append(contentsOf: Array(#","events":["#.utf8))
        for (index, event) in events.enumerated() {
            if index > 0 { data.append(UInt8(ascii: ",")) }
            data.append(event)
        }
        data.append(contentsOf: Array("]}".utf8))
        return data
    }

    private static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    /// Posts a batch and records the outcome: accepted; refused (4xx other than 429:
    /// dropped); deferred (429 or 5xx: kept in its file, or, for a 429 or a `Retry-After`,
    /// back in the memory queue; sent again once any `Retry-After` has passed); or not
    /// answered (kept in its file for a later attempt when there is one, else dropped).
    private func deliver(_ batch: Outgoing) async {
        var answered = false
        var deferred = false
        var retryAfter = false
        var status = 0
        do {
            var headers = options.headers
            headers["Content-Type"] = "application/json"
            let response = try await transport.fetch(
                TransportRequest(
                    url: url,
                    method: "POST",
                    headers: headers,
                    body: batch.body,
                    timeouts: options.timeouts,
                    maxBytes: 1 << 16
                )
            )
            defer { response.body.cancel() }
            status = response.statusCode
            deferred = status == 429 || (500..<600).contains(status)
            answered = (400..<500).contains(status) && !deferred
            if deferred, let value = response.headers["retry-after"],
                let seconds = CheckSchedule.parseRetryAfter(value)
            {
                retryAfter = true
                let until = ContinuousClock.now + .seconds(min(seconds, 86_400))
                state.withLock { state in
                    if state.notBefore.map({ $0 < until }) ?? true { state.notBefore = until }
                }
            }
            try response.requireSuccess()
            answered = true
            state.withLock { state in
                state.counters.sent += batch.count
                state.counters.batchesSent += 1
            }
        } catch {
            // In memory, only a batch the collector asked to send again later (429, or 5xx
            // with Retry-After) is kept: without a file, one that fails for good would be
            // posted again every flush interval.
            let requeue = batch.spooled == nil && deferred && (status == 429 || retryAfter)
            let retryLater = deferred && retryAfter
            let kept = (batch.spooled != nil && !answered) || requeue
            state.withLock { state in
                if requeue {
                    // Back to the front of the memory queue, within its bound.
                    let room = max(0, options.maxQueuedEvents - state.queue.count)
                    let back = Array(batch.events.suffix(room))
                    state.queue.insert(contentsOf: back, at: 0)
                    state.counters.droppedWithFailedBatches += batch.events.count - back.count
                } else if kept {
                    // With a Retry-After the flush loop sends it again once it has passed.
                    if !retryLater { state.failedHere.insert(batch.id) }
                } else {
                    state.counters.droppedWithFailedBatches += batch.count
                }
                state.counters.batchesFailed += 1
            }
            logger.debug(
                "telemetry batch \(kept ? "kept for later" : "dropped"): \(error)",
                metadata: ["events": "\(batch.count)"]
            )
        }
        if let spooled = batch.spooled { spool?.finish(spooled, sent: answered) }
        state.withLock { $0.inFlight -= 1 }
    }
}
