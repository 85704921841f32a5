import Foundation
import HotCore

/// Settings shared by every request of an HTTP transport, the same for `CurlTransport` and
/// ``URLSessionTransport``: what `SchemeRoutingTransport.platformHTTP(options:)` builds is
/// configured alike whichever transport the platform gets.
///
/// Timeouts, the byte limit, the range and headers are set per request, in HotCore's
/// `TransportRequest`; whom TLS trusts (CA bundle, pins) is a ``TLSTrust`` given when a
/// transport is created, so that a transport that cannot honour it refuses to exist.
///
/// ```swift
/// var options = HTTPTransportOptions()
/// options.userAgent = "MyApp/2.1 HotUpdate"
/// options.maxRedirects = 3
/// let transport = SchemeRoutingTransport.platformHTTP(options: options)
/// ```
public struct HTTPTransportOptions: Sendable, Hashable {
    /// The most redirects followed; one more fails with `HotUpdateError.Code.transportFailed`.
    public var maxRedirects: Int
    /// The `User-Agent` header, unless a request sets its own.
    public var userAgent: String
    /// How many chunks may wait unread in the body stream before the transfer waits for the
    /// consumer.
    public var streamCapacity: Int
    /// The largest chunk of the body, in bytes: libcurl's receive buffer for `CurlTransport`;
    /// ``URLSessionTransport`` joins the smaller pieces its session delivers up to this size.
    public var bufferSize: Int
    /// How many bytes may wait behind the body stream before ``URLSessionTransport`` suspends
    /// its task, on Apple platforms (FoundationNetworking cannot). `CurlTransport` holds the
    /// transfer back as soon as ``streamCapacity`` chunks wait.
    public var bufferLimit: Int
    /// Signs every request with AWS Signature Version 4, for S3 and the stores that speak its
    /// API; nil, the default, signs nothing. Only `CurlTransport` signs, with libcurl's own
    /// signer; ``URLSessionTransport`` refuses every request with
    /// `HotUpdateError.Code.unsupported` rather than send it unsigned. See ``AWSSigV4`` for
    /// what is signed and what a signed request does differently.
    public var awsSigV4: AWSSigV4?

    /// Creates options.
    ///
    /// - Parameters:
    ///   - maxRedirects: The most redirects followed, 10 by default.
    ///   - userAgent: The `User-Agent` header, unless a request sets its own.
    ///   - streamCapacity: How many chunks may wait unread in the body stream.
    ///   - bufferSize: The largest chunk of the body in bytes, 64 KiB by default.
    ///   - bufferLimit: How many bytes may wait before ``URLSessionTransport`` suspends its
    ///     task (Apple platforms), 4 MiB by default.
    public init(
        maxRedirects: Int = 10,
        userAgent: String = "HotUpdate",
        streamCapacity: Int = 8,
        bufferSize: Int = 64 << 10,
        bufferLimit: Int = 4 << 20
    ) {
        self.maxRedirects = maxRedirects
        self.userAgent = userAgent
        self.streamCapacity = streamCapacity
        self.bufferSize = bufferSize
        self.bufferLimit = bufferLimit
    }
}

extension HTTPTransportOptions {
    /// Credentials and scope of AWS Signature Version 4, for S3 and the stores that speak its
    /// API (``HTTPTransportOptions/awsSigV4``).
    ///
    /// `CurlTransport` hands them to libcurl (`CURLOPT_AWS_SIGV4`, libcurl 7.75 or later),
    /// which signs the method, the path and the query exactly as the URL gives them (it
    /// neither sorts nor re-encodes the query: the caller writes them canonical, as SigV4
    /// wants), `host`, `x-amz-date` and every header the request sets (not the options'
    /// `User-Agent`, which AWS's own SDKs never sign either). The payload's hash is
    /// the request's `x-amz-content-sha256` header, which S3 requires: the caller sets it
    /// to the body's SHA-256, hex. A signed request
    ///
    /// - carries ``sessionToken``, when there is one, as `x-amz-security-token`;
    /// - follows no redirect (the signature names one host and path): a 3xx answer is
    ///   returned as it is;
    /// - suppresses no header: libcurl would sign a header set to nothing without sending it,
    ///   so a large body may wait briefly for `100 Continue` instead.
    ///
    /// Its `description` never shows the secret key.
    public struct AWSSigV4: Sendable, Hashable, CustomStringConvertible {
        /// The region of the signing scope, such as `eu-west-1`.
        public var region: String
        /// The service of the signing scope: `s3`.
        public var service: String
        /// The access key id.
        public var accessKeyID: String
        /// The secret access key.
        public var secretAccessKey: String
        /// The session token of temporary credentials, if any.
        public var sessionToken: String?

        /// Creates signing credentials.
        ///
        /// - Parameters:
        ///   - region: The region of the signing scope.
        ///   - service: The service of the signing scope, `s3` by default.
        ///   - accessKeyID: The access key id.
        ///   - secretAccessKey: The secret access key.
        ///   - sessionToken: The session token of temporary credentials, if any.
        public init(
            region: String,
            service: String = "s3",
            accessKeyID: String,
            secretAccessKey: String,
            sessionToken: String? = nil
        ) {
            self.region = region
            self.service = service
            self.accessKeyID = accessKeyID
            self.secretAccessKey = secretAccessKey
            self.sessionToken = sessionToken
        }

        /// The provider and scope as libcurl reads them: `aws:amz:REGION:SERVICE`.
        public var provider: String { "aws:amz:\(region):\(service)" }

        /// The scope and the access key id; never the secret key or the session token.
        public var description: String { "AWS SigV4 (\(service) in \(region), access key \(accessKeyID))" }
    }
}

/// Why an HTTP transfer failed, in the terms both HTTP transports share, and the
/// `HotUpdateError` each failure becomes: one mapping, so the same failure has the same code
/// and message whichever transport met it.
enum HTTPFailure: Sendable {
    /// The calling task, or the body's consumer, cancelled the transfer.
    case cancelled
    /// The response announced more bytes than the request allows.
    case announcedTooLong(Int64, limit: Int64)
    /// More bytes arrived than the request allows.
    case tooLong(limit: Int64)
    /// Fewer than `bytesPerSecond` moved over a low-speed window.
    case tooSlow(received: Int64, window: Duration, bytesPerSecond: Int)
    /// The request outlived its total timeout.
    case totalTimeout(Duration)
    /// The HTTP stack's own timeout, in its words.
    case timedOut(String)
    /// One redirect more than the options allow.
    case tooManyRedirects(Int, limit: Int)
    /// The body ended before its announced length (`expected`, when known).
    case truncated(received: Int64, expected: Int64?, reason: String?)
    /// The HTTP stack cannot fetch the URL: the message says why.
    case badURL(String)
    /// The server's certificate or key was refused: `code` is one of the certificate codes
    /// or `HotUpdateError.Code.pinMismatch`; the message says why.
    case tls(HotUpdateError.Code, String)
    /// An `https` request was redirected to this `http` URL.
    case insecureRedirect(String)
    /// Any other failure: the message, in the HTTP stack's words.
    case failed(String)

    /// The error a transport throws for this failure of the request for `subject`.
    ///
    /// - Parameters:
    ///   - subject: The request's URL.
    ///   - cause: The HTTP stack's own error, if any, kept as the error's cause.
    func error(subject: String, cause: (any Error)? = nil) -> HotUpdateError {
        let box = cause.map { SendableErrorBox($0) }
        switch self {
        case .cancelled:
            return HotUpdateError(.cancelled, "the transfer was cancelled", subject: subject)
        case .announcedTooLong(let length, let limit):
            return HotUpdateError(
                .byteLimitExceeded,
                "the server announces \(length) bytes, more than the \(limit) allowed",
                subject: subject
            )
        case .tooLong(let limit):
            return HotUpdateError(
                .byteLimitExceeded,
                "the body is longer than the \(limit) bytes allowed",
                subject: subject
            )
        case .tooSlow(let received, let window, let bytesPerSecond):
            return HotUpdateError(
                .timedOut,
                "timed out: fewer than \(bytesPerSecond) bytes per second over \(window) (\(received) bytes received)",
                subject: subject
            )
        case .totalTimeout(let total):
            return HotUpdateError(.timedOut, "timed out: the request took longer than \(total)", subject: subject)
        case .timedOut(let reason):
            return HotUpdateError(.timedOut, "timed out: \(reason)", subject: subject, cause: box)
        case .tooManyRedirects(let count, let limit):
            return HotUpdateError(
                .transportFailed,
                "too many redirects (\(count), at most \(limit) allowed)",
                subject: subject
            )
        case .truncated(let received, let expected, let reason):
            let ended =
                expected.map { "the body ended after \(received) of \($0) bytes" }
                ?? "the body ended after \(received) bytes, before its announced length"
            return HotUpdateError(
                .truncated,
                reason.map { "\(ended): \($0)" } ?? ended,
                subject: subject,
                cause: box
            )
        case .badURL(let message):
            return HotUpdateError(.invalidArgument, message, subject: subject, cause: box)
        case .tls(let code, let message):
            return HotUpdateError(code, message, subject: subject, cause: box)
        case .insecureRedirect(let target):
            return HotUpdateError(
                .insecureRedirect,
                "refused a redirect from https to plain http (\(target))",
                subject: subject
            )
        case .failed(let message):
            return HotUpdateError(.transportFailed, message, subject: subject, cause: box)
        }
    }

    /// The error for a request cancelled before its transfer started.
    static func cancelledBeforeStart(subject: String) -> HotUpdateError {
        HotUpdateError(.cancelled, "the request was cancelled", subject: subject)
    }
}

extension TransportRequest {
    /// Refuses a URL that is neither `http` nor `https`.
    ///
    /// - Parameter transport: The transport's name, for the message.
    /// - Throws: `HotUpdateError.Code.invalidArgument`.
    func requireHTTP(_ transport: String) throws {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw HotUpdateError(
                .invalidArgument,
                "\(transport) fetches http: and https: URLs only",
                subject: url.absoluteString
            )
        }
    }

    /// Whether the request is a `HEAD`, whose response announces a length it never sends.
    var isHead: Bool { method.uppercased() == "HEAD" }

    /// The length a response with these (lowercased) headers announces for its body: nil for
    /// a `HEAD` request or without a valid `Content-Length`.
    func announcedLength(_ headers: [String: String]) -> Int64? {
        isHead ? nil : headers["content-length"].flatMap { Int64($0) }
    }

    /// The failure when a response announces `length` bytes, more than ``maxBytes``.
    func announcedFailure(_ length: Int64?) -> HTTPFailure? {
        guard let limit = maxBytes, let length, length > limit else { return nil }
        return .announcedTooLong(length, limit: limit)
    }

    /// The failure once `received` body bytes have arrived, more than ``maxBytes``.
    func receivedFailure(_ received: Int64) -> HTTPFailure? {
        guard let limit = maxBytes, received > limit else { return nil }
        return .tooLong(limit: limit)
    }
}

extension Duration {
    /// The duration in whole milliseconds, `Int.max` when it does not fit.
    var clampedMilliseconds: Int {
        let (seconds, attoseconds) = components
        let total = seconds.multipliedReportingOverflow(by: 1000)
        guard !total.overflow else { return Int.max }
        return Int(clamping: total.partialValue + attoseconds / 1_000_000_000_000_000)
    }
}

extension URL {
    /// Whether a redirect from this URL to `target` leaves `https` for plain `http`: a
    /// downgrade both HTTP transports refuse with `HotUpdateError.Code.insecureRedirect`.
    package func isDowngrade(to target: URL) -> Bool {
        scheme?.lowercased() == "https" && target.scheme?.lowercased() == "http"
    }
}
