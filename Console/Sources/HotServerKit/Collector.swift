import Foundation
import HTTPTypes
import HotCore
import Hummingbird
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

/// Batches per client: a token bucket each, in a table of bounded size.
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

    /// Whether `client` may send a batch now (and takes a token when it may).
    public func allow(_ client: String, now: Double = ProcessInfo.processInfo.systemUptime) -> Bool {
        buckets.with { buckets in
            if buckets.count >= maxClients, buckets[client] == nil { buckets.removeAll(keepingCapacity: true) }
            var bucket = buckets[client] ?? Bucket(tokens: burst, updated: now)
            bucket.tokens = min(burst, bucket.tokens + (now - bucket.updated) * rate)
            bucket.updated = now
            let allowed = bucket.tokens >= 1
            if allowed { bucket.tokens -= 1 }
            buckets[client] = bucket
            return allowed
        }
    }
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

    /// What the collector has answered.
    public struct Counters: Sendable, Hashable, Codable {
        /// Batches stored.
        public var stored = 0
        /// Batches already stored, answered 200 and not stored again.
        public var duplicates = 0
        /// Batches refused as malformed or too large.
        public var rejected = 0
        /// Batches refused by the rate limit.
        public var rateLimited = 0
        /// Batches refused because too many were in flight.
        public var overloaded = 0
    }
    private let state = Guarded((counters: Counters(), inFlight: 0))

    /// Creates a collector.
    public init(
        database: any TelemetryDatabase,
        limits: BatchLimits = BatchLimits(),
        limiter: ClientRateLimiter = ClientRateLimiter(),
        maxInFlight: Int = 64
    ) {
        self.database = database
        self.limits = limits
        self.limiter = limiter
        self.maxInFlight = maxInFlight
    }

    /// The counters so far.
    public var counters: Counters { state.with { $0.counters } }

    /// Handles one posted body: the status and the text to answer.
    public func receive(_ body: Data, now: Date = Date()) async -> (status: Int, text: String) {
        let admitted = state.with { state -> Bool in
            guard state.inFlight < maxInFlight else {
                state.counters.overloaded += 1
                return false
            }
            state.inFlight += 1
            return true
        }
        guard admitted else { return (503, "the collector is busy; send the batch later") }
        defer { state.with { $0.inFlight -= 1 } }
        let batch: TelemetryBatch
        do {
            batch = try TelemetryBatch.parse(body, limits: limits, now: now)
        } catch let rejection as BatchRejection {
            state.with { $0.counters.rejected += 1 }
            return (rejection.status, rejection.reason)
        } catch {
            state.with { $0.counters.rejected += 1 }
            return (400, "\(error)")
        }
        guard limiter.allow(batch.client) else {
            state.with { $0.counters.rateLimited += 1 }
            return (429, "too many batches from this client; send them later")
        }
        do {
            let fresh = try await database.store(batch, receivedAt: now)
            state.with { state in
                if fresh {
                    state.counters.stored += 1
                } else {
                    state.counters.duplicates += 1
                }
            }
            return (fresh ? 204 : 200, fresh ? "" : "already stored")
        } catch {
            return (503, "the batch could not be stored; send it later")
        }
    }

    /// Adds `POST /collect` (and `GET /health`) to `router`.
    public func addRoutes(to router: Router<BasicRequestContext>) {
        let maxBody = limits.maxBodyBytes
        router.post("collect") { request, _ -> Response in
            let buffer: ByteBuffer
            do {
                buffer = try await request.body.collect(upTo: maxBody)
            } catch {
                self.state.with { $0.counters.rejected += 1 }
                return textResponse(413, "the batch is over the limit of \(maxBody) bytes")
            }
            if let type = request.headers[.contentType], !type.lowercased().hasPrefix("application/json") {
                self.state.with { $0.counters.rejected += 1 }
                return textResponse(415, "the batch must be application/json")
            }
            let answer = await self.receive(Data(buffer.readableBytesView))
            return textResponse(answer.status, answer.text)
        }
        router.get("health") { _, _ -> Response in
            let counters = self.counters
            return textResponse(
                200,
                "stored \(counters.stored) duplicates \(counters.duplicates) rejected \(counters.rejected) rate-limited \(counters.rateLimited) overloaded \(counters.overloaded)"
            )
        }
    }
}

/// A plain-text (or empty) response.
func textResponse(_ status: Int, _ text: String, type: String = "text/plain; charset=utf-8") -> Response {
    var headers = HTTPFields()
    if !text.isEmpty { headers[.contentType] = type }
    if status == 503 || status == 429 { headers[.retryAfter] = "5" }
    return Response(
        status: HTTPResponse.Status(code: status),
        headers: headers,
        body: text.isEmpty ? ResponseBody() : ResponseBody(byteBuffer: ByteBuffer(string: text))
    )
}

/// Runs a Hummingbird application on `listen` (HOST:PORT; port 0 picks one), printing
/// `listening on http://HOST:PORT` once it accepts connections, until SIGINT or SIGTERM.
public func serve(router: Router<BasicRequestContext>, listen: String, logger: Logger) async throws {
    let parts = listen.split(separator: ":", omittingEmptySubsequences: false)
    guard parts.count >= 2, let port = Int(parts.last ?? ""), (0...65535).contains(port) else {
        throw HotUpdateError(.invalidArgument, "--listen takes HOST:PORT, not '\(listen)'")
    }
    let host = parts.dropLast().joined(separator: ":")
    let app = Application(
        router: router,
        configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: "hot-server"),
        onServerRunning: { channel in
            let bound = channel.localAddress?.port ?? port
            FileHandle.standardOutput.write(Data("listening on http://\(host):\(bound)\n".utf8))
        },
        logger: logger
    )
    try await app.runService()
}
