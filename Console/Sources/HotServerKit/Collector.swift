import Foundation
import HTTPTypes
import HotCore
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore

/// A value behind a lock, for the collector's counters and tables.
final class Guarded<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func with<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Batches per client and source network: a token bucket each, in a table of bounded size.
///
/// The key is the client id *and* the network the batch came from (``SourceNetwork``), so
/// that someone who knows a device's client id cannot use up that device's rate from
/// elsewhere and so keep its reports (its rollbacks) out.
public final class ClientRateLimiter: Sendable {
    /// Batches a client may send a second, sustained.
    public let rate: Double
    /// Batches a client may send at once.
    public let burst: Double
    /// The most clients remembered; past it the table is emptied (each client starts full again).
    public let maxClients: Int

    private struct Bucket: Sendable {
        var tokens: Double
        var updated: Double
    }
    private let buckets = Guarded([String: Bucket]())

    /// Creates a limiter.
    public init(rate: Double = 2, burst: Double = 20, maxClients: Int = 200_000) {
        self.rate = rate
        self.burst = burst
        self.maxClients = maxClients
    }

    /// Whether `client` may send a batch now from `network` (and takes a token when it may);
    /// when it may not, the seconds until it may.
    public func admit(
        _ client: String,
        network: String = "",
        now: Double = ProcessInfo.processInfo.systemUptime
    ) -> (allowed: Bool, retryAfter: Int) {
        let key = network + " " + client
        return buckets.with { buckets in
            if buckets.count >= maxClients, buckets[key] == nil { buckets.removeAll(keepingCapacity: true) }
            var bucket = buckets[key] ?? Bucket(tokens: burst, updated: now)
            bucket.tokens = min(burst, bucket.tokens + (now - bucket.updated) * rate)
            bucket.updated = now
            let allowed = bucket.tokens >= 1
            if allowed { bucket.tokens -= 1 }
            buckets[key] = bucket
            let wait = allowed || rate <= 0 ? 0 : Int(((1 - bucket.tokens) / rate).rounded(.up))
            return (allowed, max(allowed ? 0 : 1, min(wait, 86_400)))
        }
    }

    /// Whether `client` may send a batch now from `network` (and takes a token when it may).
    public func allow(
        _ client: String,
        network: String = "",
        now: Double = ProcessInfo.processInfo.systemUptime
    ) -> Bool {
        admit(client, network: network, now: now).allowed
    }
}

/// Whether a batch comes from a genuine install of the app: the place where a device
/// attestation check (Apple's App Attest, Google's Play Integrity) plugs into the collector.
///
/// Without one, a collector cannot tell a device from a script that posts what a device
/// would: it can only make forging expensive (see ``IntakePolicy``). The default,
/// ``AcceptAllAttestation``, accepts every batch.
public protocol DeviceAttestationVerifier: Sendable {
    /// Whether to accept a batch from `client`.
    ///
    /// - Parameters:
    ///   - client: The batch's client id.
    ///   - headers: The request's headers, names in lowercase (where an attestation token
    ///     would travel).
    ///   - body: The bytes posted.
    /// - Returns: false to refuse the batch (answered 403, nothing stored).
    func verify(client: String, headers: [String: String], body: Data) async -> Bool
}

/// Accepts every batch: no attestation. What a collector that uses it counts is only as
/// trustworthy as ``IntakePolicy`` makes it.
public struct AcceptAllAttestation: DeviceAttestationVerifier {
    /// Creates the verifier.
    public init() {}

    /// Always true.
    public func verify(client: String, headers: [String: String], body: Data) async -> Bool { true }
}

/// The collector: checks each batch and stores it once.
public final class Collector: Sendable {
    /// The database written.
    public let database: any TelemetryDatabase
    /// The bounds of a batch.
    public let limits: BatchLimits
    /// The per-client rate limit.
    public let limiter: ClientRateLimiter
    /// The most batches being stored at once; past it requests are answered 503 at once, so
    /// memory stays bounded under a flood.
    public let maxInFlight: Int
    /// Enrolment and storage bounds per source network.
    public let intake: IntakePolicy
    /// The key a request must carry (`X-Hot-Api-Key: KEY` or `Authorization: Bearer KEY`);
    /// nil: none needed.
    public let apiKey: String?
    /// Decides whether a batch comes from a genuine install.
    public let attestation: any DeviceAttestationVerifier

    /// What the collector has answered.
    public struct Counters: Sendable, Hashable, Codable {
        /// Batches stored.
        public var stored = 0
        /// Batches already stored, answered 200 and not stored again.
        public var duplicates = 0
        /// Batches refused as malformed or too large.
        public var rejected = 0
        /// Events refused in batches whose other events were stored.
        public var refusedEvents = 0
        /// Batches refused by the rate limit.
        public var rateLimited = 0
        /// Batches refused because their network used up its storage budget.
        public var overBudget = 0
        /// Batches refused because too many were in flight.
        public var overloaded = 0
        /// Requests refused for a missing or wrong API key, or a failed attestation.
        public var unauthorized = 0
    }
    private let state = Guarded((counters: Counters(), inFlight: 0))

    /// Creates a collector.
    public init(
        database: any TelemetryDatabase,
        limits: BatchLimits = BatchLimits(),
        limiter: ClientRateLimiter = ClientRateLimiter(),
        maxInFlight: Int = 64,
        intake: IntakePolicy = IntakePolicy(),
        apiKey: String? = nil,
        attestation: any DeviceAttestationVerifier = AcceptAllAttestation()
    ) {
        self.database = database
        self.limits = limits
        self.limiter = limiter
        self.maxInFlight = maxInFlight
        self.intake = intake
        self.apiKey = apiKey
        self.attestation = attestation
    }

    /// The counters so far.
    public var counters: Counters { state.with { $0.counters } }

    /// An answer: the status, the text, and the seconds of a `Retry-After`.
    public struct Answer: Sendable, Hashable {
        /// The HTTP status.
        public var status: Int
        /// The body.
        public var text: String
        /// `Retry-After`, in seconds, for 429 and 503.
        public var retryAfter: Int?
        /// The body's type.
        public var type = "text/plain; charset=utf-8"
    }

    /// Handles one posted body from `network` (``SourceNetwork``).
    public func receive(
        _ body: Data,
        network: String = "",
        headers: [String: String] = [:],
        now: Date = Date()
    ) async -> Answer {
        let admitted = state.with { state -> Bool in
            guard state.inFlight < maxInFlight else {
                state.counters.overloaded += 1
                return false
            }
            state.inFlight += 1
            return true
        }
        guard admitted else {
            return Answer(status: 503, text: "the collector is busy; send the batch later", retryAfter: 5)
        }
        defer { state.with { $0.inFlight -= 1 } }
        let batch: TelemetryBatch
        do {
            batch = try TelemetryBatch.parse(body, limits: limits)
        } catch let rejection as BatchRejection {
            state.with { $0.counters.rejected += 1 }
            return Answer(status: rejection.status, text: rejection.reason)
        } catch {
            state.with { $0.counters.rejected += 1 }
            return Answer(status: 400, text: "\(error)")
        }
        guard await attestation.verify(client: batch.client, headers: headers, body: body) else {
            state.with { $0.counters.unauthorized += 1 }
            return Answer(status: 403, text: "the device's attestation was refused")
        }
        let admission = limiter.admit(batch.client, network: network)
        guard admission.allowed else {
            state.with { $0.counters.rateLimited += 1 }
            return Answer(
                status: 429,
                text: "too many batches from this client; send them later",
                retryAfter: admission.retryAfter
            )
        }
        do {
            let fresh = try await database.store(
                batch,
                receivedAt: now,
                network: network,
                bytes: body.count,
                intake: intake
            )
            state.with { state in
                if fresh {
                    state.counters.stored += 1
                    state.counters.refusedEvents += batch.refused.count
                } else {
                    state.counters.duplicates += 1
                }
            }
            guard fresh else { return Answer(status: 200, text: "already stored") }
            guard !batch.refused.isEmpty else { return Answer(status: 204, text: "") }
            return Answer(status: 200, text: Self.refusals(batch), type: "application/json")
        } catch let over as StorageBudgetExceeded {
            state.with { $0.counters.overBudget += 1 }
            return Answer(
                status: 429,
                text: "this network has used its storage for the day; send the batch later",
                retryAfter: over.retryAfter
            )
        } catch {
            return Answer(status: 503, text: "the batch could not be stored; send it later", retryAfter: 5)
        }
    }

    /// `{"stored": N, "refused": [{"index": I, "reason": "…"}]}`: what a batch with wrong
    /// events is answered (200: the others are stored, and it must not be sent again).
    static func refusals(_ batch: TelemetryBatch) -> String {
        struct Body: Encodable {
            var stored: Int
            var refused: [RefusedEvent]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = (try? encoder.encode(Body(stored: batch.events.count, refused: batch.refused))) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    /// Whether `headers` carry ``apiKey`` (always, when there is none).
    func authorized(_ headers: HTTPFields) -> Bool {
        guard let apiKey else { return true }
        if let name = HTTPField.Name("X-Hot-Api-Key"), let given = headers[name], constantTimeEqual(given, apiKey) {
            return true
        }
        if let value = headers[.authorization], value.lowercased().hasPrefix("bearer ") {
            return constantTimeEqual(String(value.dropFirst("bearer ".count)), apiKey)
        }
        return false
    }

    /// Adds `POST /collect` (and `GET /health`) to `router`.
    public func addRoutes(to router: Router<BasicRequestContext>) {
        let maxBody = limits.maxBodyBytes
        router.post("collect") { request, _ -> Response in
            guard self.authorized(request.headers) else {
                self.state.with { $0.counters.unauthorized += 1 }
                return textResponse(401, "this collector needs its API key (X-Hot-Api-Key or Authorization: Bearer)")
            }
            // Without it a web page could post with a "simple" no-cors request.
            guard let type = request.headers[.contentType], type.lowercased().hasPrefix("application/json") else {
                self.state.with { $0.counters.rejected += 1 }
                return textResponse(415, "the batch must be sent as Content-Type: application/json")
            }
            if let length = request.headers[.contentLength], let announced = Int64(length), announced > maxBody {
                self.state.with { $0.counters.rejected += 1 }
                return textResponse(413, "the batch is \(announced) bytes, over the limit of \(maxBody)")
            }
            let buffer: ByteBuffer
            do {
                buffer = try await request.body.collect(upTo: maxBody)
            } catch {
                self.state.with { $0.counters.rejected += 1 }
                return textResponse(413, "the batch is over the limit of \(maxBody) bytes")
            }
            var headers: [String: String] = [:]
            for field in request.headers where field.name != ConnectionGuard.networkField {
                headers[field.name.canonicalName] = field.value
            }
            let answer = await self.receive(
                Data(buffer.readableBytesView),
                network: ConnectionGuard.network(of: request),
                headers: headers
            )
            return textResponse(answer.status, answer.text, type: answer.type, retryAfter: answer.retryAfter)
        }
        router.get("health") { _, _ -> Response in
            let counters = self.counters
            return textResponse(
                200,
                "stored \(counters.stored) duplicates \(counters.duplicates) rejected \(counters.rejected) refused-events \(counters.refusedEvents) rate-limited \(counters.rateLimited) over-budget \(counters.overBudget) overloaded \(counters.overloaded) unauthorized \(counters.unauthorized)"
            )
        }
    }
}

/// A plain-text (or empty) response.
func textResponse(
    _ status: Int,
    _ text: String,
    type: String = "text/plain; charset=utf-8",
    retryAfter: Int? = nil
) -> Response {
    var headers = HTTPFields()
    if !text.isEmpty { headers[.contentType] = type }
    if status == 503 || status == 429 { headers[.retryAfter] = String(retryAfter ?? 5) }
    return Response(
        status: HTTPResponse.Status(code: status),
        headers: headers,
        body: text.isEmpty ? ResponseBody() : ResponseBody(byteBuffer: ByteBuffer(string: text))
    )
}

/// Runs a Hummingbird application on `listen` (HOST:PORT; port 0 picks one), printing
/// `listening on http://HOST:PORT` once it accepts connections, until SIGINT or SIGTERM.
/// Every connection is bounded by `connections` (``ConnectionLimits``).
public func serve(
    router: Router<BasicRequestContext>,
    listen: String,
    logger: Logger,
    connections: ConnectionLimits = ConnectionLimits()
) async throws {
    let parts = listen.split(separator: ":", omittingEmptySubsequences: false)
    guard parts.count >= 2, let port = Int(parts.last ?? ""), (0...65535).contains(port) else {
        throw HotUpdateError(.invalidArgument, "--listen takes HOST:PORT, not '\(listen)'")
    }
    let host = parts.dropLast().joined(separator: ":")
    let table = ConnectionTable(limits: connections)
    let app = Application(
        router: router,
        server: .http1(
            configuration: HTTP1Channel.Configuration(
                additionalChannelHandlers: [ConnectionGuard(table: table)],
                idleTimeout: .milliseconds(Int64(connections.idleTimeout * 1000))
            )
        ),
        configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: "hot-server"),
        onServerRunning: { channel in
            let bound = channel.localAddress?.port ?? port
            FileHandle.standardOutput.write(Data("listening on http://\(host):\(bound)\n".utf8))
        },
        logger: logger
    )
    try await app.runService()
}
