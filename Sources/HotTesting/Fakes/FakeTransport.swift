import Foundation
import HotCore

/// A `Transport` that answers from a table of canned responses, for the engine's unit tests.
///
/// ```swift
/// let transport = FakeTransport()
/// await transport.serve(packageBytes, at: packageURL)
/// await transport.fail(otherURL, with: HotUpdateError(.transportFailed, "connection reset"))
/// // … run the engine …
/// #expect(await transport.requestCount(for: packageURL) == 1)
/// ```
public actor FakeTransport: Transport {
    /// A canned answer.
    public enum Reply: Sendable {
        /// A status and body, delivered in chunks of `chunkSize`.
        case response(status: Int, body: Data, headers: [String: String], chunkSize: Int)
        /// The body stops after `deliver` bytes with `error`, though `body.count` is announced.
        case truncated(body: Data, deliver: Int, error: HotUpdateError)
        /// The request fails before any response.
        case failure(HotUpdateError)
        /// The first `deliver` bytes arrive, then the body waits until ``FakeTransport/release(_:)``
        /// (or the consumer cancels).
        case held(body: Data, deliver: Int)
    }

    private var replies: [URL: Reply] = [:]
    private var requests: [TransportRequest] = []
    private var heldBodies: [URL: [(writer: ByteStream.Writer, rest: Data)]] = [:]

    /// Creates a transport that answers 404 to everything until told otherwise.
    public init() {}

    /// Serves `body` with status 200 (or another) at `url`.
    public func serve(_ body: Data, at url: URL, status: Int = 200, chunkSize: Int = 64 << 10) {
        replies[url] = .response(status: status, body: body, headers: [:], chunkSize: max(1, chunkSize))
    }

    /// Answers `url` with `reply`.
    public func reply(_ reply: Reply, at url: URL) {
        replies[url] = reply
    }

    /// Makes requests for `url` fail with `error`.
    public func fail(_ url: URL, with error: HotUpdateError) {
        replies[url] = .failure(error)
    }

    /// Forgets what is served at `url` (it answers 404 again).
    public func remove(_ url: URL) {
        replies[url] = nil
    }

    /// Serves `body` at `url`, holding every response after its first `deliver` bytes until
    /// ``release(_:)``: a download that is in progress for as long as a test needs.
    public func hold(_ body: Data, at url: URL, deliver: Int = 0) {
        replies[url] = .held(body: body, deliver: max(0, min(deliver, body.count)))
    }

    /// Lets every held response for `url` deliver the rest of its body; later requests are
    /// answered at once.
    public func release(_ url: URL) {
        if case .held(let body, _) = replies[url] {
            replies[url] = .response(status: 200, body: body, headers: [:], chunkSize: 64 << 10)
        }
        for held in heldBodies.removeValue(forKey: url) ?? [] {
            Task {
                try? await held.writer.write(held.rest)
                held.writer.finish()
            }
        }
    }

    /// How many responses for `url` are being held.
    public func heldCount(for url: URL) -> Int {
        heldBodies[url]?.count ?? 0
    }

    /// Every request received, in order.
    public var receivedRequests: [TransportRequest] { requests }

    /// How many requests asked for `url`.
    public func requestCount(for url: URL) -> Int {
        requests.filter { $0.url == url }.count
    }

    public func fetch(_ request: TransportRequest) async throws -> TransportResponse {
        try Task.checkCancellation()
        requests.append(request)
        switch replies[request.url] {
        case nil:
            return TransportResponse(
                url: request.url,
                statusCode: 404,
                expectedContentLength: 0,
                body: ByteStream(chunks: [])
            )
        case .failure(let error):
            throw error
        case .response(let status, let body, let headers, let chunkSize):
            var slice = body
            if let range = request.range {
                let start = Int(min(range.start, Int64(body.count)))
                let end = range.end.map { Int(min($0 + 1, Int64(body.count))) } ?? body.count
                slice = body.subdata(in: start..<max(start, end))
            }
            if let limit = request.maxBytes, Int64(slice.count) > limit {
                throw HotUpdateError(
                    .byteLimitExceeded,
                    "the body announces \(slice.count) bytes, more than the \(limit) allowed",
                    subject: request.url.absoluteString
                )
            }
            return TransportResponse(
                url: request.url,
                statusCode: request.range == nil ? status : 206,
                headers: headers,
                expectedContentLength: Int64(slice.count),
                body: ByteStream(chunks: Self.chunks(slice, chunkSize))
            )
        case .held(let body, let deliver):
            let (stream, writer) = ByteStream.makeStream(capacity: 1 << 16)
            if deliver > 0 { try writer.writeBlocking(body.prefix(deliver)) }
            heldBodies[request.url, default: []].append((writer, Data(body.dropFirst(deliver))))
            return TransportResponse(
                url: request.url,
                statusCode: 200,
                expectedContentLength: Int64(body.count),
                body: stream
            )
        case .truncated(let body, let deliver, let error):
            let (stream, writer) = ByteStream.makeStream(capacity: 1 << 16)
            let delivered = body.prefix(deliver)
            for chunk in Self.chunks(Data(delivered), 64 << 10) { try writer.writeBlocking(chunk) }
            writer.finish(throwing: error)
            return TransportResponse(
                url: request.url,
                statusCode: 200,
                expectedContentLength: Int64(body.count),
                body: stream
            )
        }
    }

    private static func chunks(_ data: Data, _ size: Int) -> [Data] {
        var result: [Data] = []
        var offset = data.startIndex
        while offset < data.endIndex {
            let end = min(offset + size, data.endIndex)
            result.append(data.subdata(in: offset..<end))
            offset = end
        }
        return result
    }
}
