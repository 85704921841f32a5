import Foundation

/// Fetches bytes from a URL: HTTP(S), a file, a bundled package.
///
/// The response's body arrives as an `AsyncSequence` of chunks, so a package is
/// hashed and written to disk while it downloads and never held in memory whole.
/// Cancelling the calling task cancels the transfer.
///
/// Implementations: `CurlTransport`, `URLSessionTransport`, `FileTransport` (in `HotTransport`).
///
/// ```swift
/// let response = try await transport.fetch(TransportRequest(url: url, maxBytes: 50 << 20))
/// try response.requireSuccess()
/// for try await chunk in response.body { hasher.update(chunk) }
/// ```
public protocol Transport: Sendable {
    /// Starts a request and returns as soon as the status and headers are known.
    ///
    /// Implementations do not throw for HTTP error statuses: they return them, and
    /// callers use ``TransportResponse/requireSuccess()``.
    ///
    /// - Parameter request: What to fetch, with its limits.
    /// - Returns: The status, the headers and the body still streaming.
    /// - Throws: ``HotUpdateError`` with ``HotUpdateError/Code/transportFailed``,
    ///   ``HotUpdateError/Code/timedOut``, ``HotUpdateError/Code/invalidArgument`` (a scheme
    ///   this transport does not speak) or ``HotUpdateError/Code/cancelled``.
    func fetch(_ request: TransportRequest) async throws -> TransportResponse
}

/// A request for a ``Transport``.
public struct TransportRequest: Sendable, Hashable {
    /// The URL to fetch.
    public var url: URL
    /// The HTTP method; ignored by transports that have none.
    public var method: String
    /// Extra headers.
    public var headers: [String: String]
    /// A request body, for POST-style manifest sources.
    public var body: Data?
    /// A byte range, for resuming.
    public var range: TransportRequest.ByteRange?
    /// Time limits.
    public var timeouts: TransportRequest.Timeouts
    /// The most body bytes accepted; more fails with ``HotUpdateError/Code/byteLimitExceeded``
    /// (endless-data defence). Nil means no limit.
    public var maxBytes: Int64?

    /// Creates a request.
    public init(
        url: URL,
        method: String = "GET",
        headers: [String: String] = [:],
        body: Data? = nil,
        range: TransportRequest.ByteRange? = nil,
        timeouts: TransportRequest.Timeouts = TransportRequest.Timeouts(),
        maxBytes: Int64? = nil
    ) {
        self.url = url
        self.method = method
        self.headers = headers
        self.body = body
        self.range = range
        self.timeouts = timeouts
        self.maxBytes = maxBytes
    }
}

/// What a ``Transport`` returns: the status and headers, and the body still arriving.
public struct TransportResponse: Sendable {
    /// The URL that answered, after redirects.
    public var url: URL
    /// The HTTP status; transports without statuses report 200 (or 206 for a range).
    public var statusCode: Int
    /// Response headers, names in lowercase.
    public var headers: [String: String]
    /// The announced body length (`Content-Length`), if any.
    public var expectedContentLength: Int64?
    /// The body. Iterate it once.
    public var body: ByteStream

    /// Creates a response.
    public init(
        url: URL,
        statusCode: Int,
        headers: [String: String] = [:],
        expectedContentLength: Int64? = nil,
        body: ByteStream
    ) {
        self.url = url
        self.statusCode = statusCode
        self.headers = headers
        self.expectedContentLength = expectedContentLength
        self.body = body
    }

    /// Whether the status is 2xx.
    public var isSuccess: Bool { (200..<300).contains(statusCode) }

    /// Throws ``HotUpdateError/Code/httpStatus`` unless the status is 2xx, and cancels the body.
    /// A 429 or 503 answer's `Retry-After` is part of the message, for ``CheckSchedule``.
    public func requireSuccess() throws {
        guard isSuccess else {
            body.cancel()
            var message = "the server answered HTTP \(statusCode)"
            if statusCode == 429 || statusCode == 503, let retryAfter = headers["retry-after"] {
                message += " (Retry-After: \(retryAfter))"
            }
            throw HotUpdateError(.httpStatus, message, subject: url.absoluteString)
        }
    }

    /// Reads the whole body into memory, refusing more than `limit` bytes.
    /// For manifests and other small documents; packages are streamed.
    ///
    /// - Throws: ``HotUpdateError/Code/byteLimitExceeded`` past `limit`,
    ///   ``HotUpdateError/Code/truncated`` when fewer bytes than announced arrive.
    public func collect(limit: Int64) async throws -> Data {
        var data = Data()
        if let expected = expectedContentLength, expected > limit {
            body.cancel()
            throw HotUpdateError(
                .byteLimitExceeded,
                "the body announces \(expected) bytes, more than the \(limit) allowed",
                subject: url.absoluteString
            )
        }
        for try await chunk in body {
            guard Int64(data.count + chunk.count) <= limit else {
                body.cancel()
                throw HotUpdateError(
                    .byteLimitExceeded,
                    "the body is longer than the \(limit) bytes allowed",
                    subject: url.absoluteString
                )
            }
            data.append(chunk)
        }
        if let expected = expectedContentLength, Int64(data.count) < expected {
            throw HotUpdateError(
                .truncated,
                "the body ended after \(data.count) of \(expected) bytes",
                subject: url.absoluteString
            )
        }
        return data
    }
}

extension Transport {
    /// Fetches a small document whole: checks the status and the size limit.
    ///
    /// - Throws: ``HotUpdateError`` with the transport's codes, ``HotUpdateError/Code/httpStatus``
    ///   or ``HotUpdateError/Code/byteLimitExceeded``.
    public func fetchDocument(
        url: URL,
        maxBytes: Int64,
        timeouts: TransportRequest.Timeouts = TransportRequest.Timeouts(),
        method: String = "GET",
        headers: [String: String] = [:],
        body: Data? = nil
    ) async throws -> Data {
        let response = try await fetch(
            TransportRequest(
                url: url,
                method: method,
                headers: headers,
                body: body,
                timeouts: timeouts,
                maxBytes: maxBytes
            )
        )
        try response.requireSuccess()
        return try await response.collect(limit: maxBytes)
    }
}

extension TransportRequest {
    /// A byte range to request, for resuming a download.
    public struct ByteRange: Sendable, Hashable {
        /// The first byte wanted.
        public var start: Int64
        /// The last byte wanted, inclusive; nil for "to the end".
        public var end: Int64?
        /// Creates a range.
        public init(start: Int64, end: Int64? = nil) {
            self.start = start
            self.end = end
        }
        /// The value of an HTTP `Range` header for this range.
        public var headerValue: String { "bytes=\(start)-\(end.map(String.init) ?? "")" }
    }

    /// Time limits of a request.
    public struct Timeouts: Sendable, Hashable {
        /// How long connecting may take.
        public var connect: Duration
        /// A transfer slower than ``lowSpeedBytesPerSecond`` for this long is aborted (stalled-download defence).
        public var lowSpeedWindow: Duration
        /// The speed below which a transfer counts as stalled.
        public var lowSpeedBytesPerSecond: Int
        /// How long the whole request may take, if limited.
        public var total: Duration?

        /// Creates timeouts. The defaults suit a mobile network.
        public init(
            connect: Duration = .seconds(15),
            lowSpeedWindow: Duration = .seconds(30),
            lowSpeedBytesPerSecond: Int = 1,
            total: Duration? = nil
        ) {
            self.connect = connect
            self.lowSpeedWindow = lowSpeedWindow
            self.lowSpeedBytesPerSecond = lowSpeedBytesPerSecond
            self.total = total
        }
    }
}
