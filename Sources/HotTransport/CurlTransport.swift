#if Curl && canImport(CHotCurl)
import CHotCurl
import Foundation
import HotCore

/// A `Transport` over libcurl: HTTP and HTTPS with streaming bodies, backpressure,
/// resumable ranges, and the limits a downloader needs against bad networks and
/// bad servers.
///
/// Each request runs `curl_easy_perform` on a thread of its own. The body is handed
/// to the consumer in chunks through a `ByteStream`; when the consumer falls
/// behind, the curl thread waits, so memory stays bounded whatever the file's size.
///
/// - Statuses are returned, not thrown (`CURLOPT_FAILONERROR` is off); redirects are
///   followed (at most ``HTTPTransportOptions/maxRedirects``) and only the final response's status
///   and headers are reported, with its URL.
/// - Bodies are never decoded: no `Accept-Encoding` is sent, so the bytes are the
///   server's file, as digests expect.
/// - Errors: connect, low-speed and total timeouts throw `HotUpdateError.Code.timedOut`;
///   a body shorter than its `Content-Length` `HotUpdateError.Code.truncated`; more bytes
///   than `TransportRequest.maxBytes` (announced or received)
///   `HotUpdateError.Code.byteLimitExceeded`; anything else
///   `HotUpdateError.Code.transportFailed` with curl's message. They surface from
///   ``fetch(_:)`` before the headers are complete, and from iterating the body after.
/// - A slow consumer slows the transfer down; the low-speed limit counts that time too.
/// - TLS: the ``trust`` given at creation (a private CA's bundle, pinned keys, TLS 1.2 at
///   least), applied to every connection, redirects included. A certificate from an unknown
///   CA fails with `HotUpdateError.Code.certificateUntrusted`, one for another host with
///   `HotUpdateError.Code.certificateHostMismatch`, an expired one with
///   `HotUpdateError.Code.certificateExpired`, a key not pinned with
///   `HotUpdateError.Code.pinMismatch`; a redirect from `https` to `http` with
///   `HotUpdateError.Code.insecureRedirect`.
/// - Connections are reused: a finished request's handle, with its open connection and TLS
///   session, serves the next request of the same transport (and its copies).
/// - Given ``HTTPTransportOptions/awsSigV4``, every request is signed by libcurl's own AWS
///   SigV4 signer and follows no redirect (see ``HTTPTransportOptions/AWSSigV4``).
///
/// ```swift
/// let transport = CurlTransport()
/// let response = try await transport.fetch(TransportRequest(url: packageURL, maxBytes: 50 << 20))
/// try response.requireSuccess()
/// for try await chunk in response.body { try file.write(contentsOf: chunk) }
/// ```
public struct CurlTransport: Transport {
    /// Settings shared by every request of a transport, the same for ``URLSessionTransport``.
    public typealias Options = HTTPTransportOptions

    /// The settings of this transport.
    public var options: HTTPTransportOptions

    /// Whom TLS trusts, fixed at creation.
    public var trust: TLSTrust { tls.trust }

    private let tls: CurlTLS
    private let pool = CurlHandlePool()

    /// Creates a transport trusting the system's certificate authorities (TLS 1.2 or later).
    ///
    /// - Parameter options: Redirects, user agent and buffering.
    public init(options: HTTPTransportOptions = HTTPTransportOptions()) {
        self.options = options
        self.tls = .system
    }

    /// Creates a transport with its own trust: a private CA's bundle, pinned keys.
    ///
    /// ```swift
    /// let transport = try CurlTransport(trust: TLSTrust(authorities: .only(bundle: caPath), pins: [pin]))
    /// ```
    ///
    /// - Parameters:
    ///   - options: Redirects, user agent and buffering.
    ///   - trust: The certificate authorities, pins and TLS floor of every connection.
    /// - Throws: `HotUpdateError.Code.invalidArgument` for a CA bundle that cannot be read or
    ///   holds no certificate; `HotUpdateError.Code.unsupported` when this libcurl cannot honour
    ///   a setting (its TLS backend cannot pin, say), rather than skip it.
    public init(options: HTTPTransportOptions = HTTPTransportOptions(), trust: TLSTrust) throws {
        self.options = options
        self.tls = trust.isSystem ? .system : try CurlTLS(trust: trust)
    }

    /// libcurl's process-wide initialisation, run once, the first time a request starts.
    private static let globalInit: CURLcode = hot_curl_global_init_all()

    /// Starts the request and returns once the final response's headers are complete.
    ///
    /// - Parameter request: What to fetch, with its range, limits and timeouts.
    /// - Returns: The status, headers and streaming body of the final response.
    /// - Throws: `HotUpdateError` with `HotUpdateError.Code.invalidArgument` for a URL that
    ///   is not `http` or `https`, `HotUpdateError.Code.timedOut`,
    ///   `HotUpdateError.Code.byteLimitExceeded` (announced length over the limit),
    ///   `HotUpdateError.Code.transportFailed` or `HotUpdateError.Code.cancelled`.
    public func fetch(_ request: TransportRequest) async throws -> TransportResponse {
        try request.requireHTTP("CurlTransport")
        let initialised = Self.globalInit
        guard initialised == CURLE_OK else {
            throw HotUpdateError(
                .transportFailed,
                "libcurl could not initialise: \(String(cString: curl_easy_strerror(initialised)))"
            )
        }
        try Task.checkCancellation()
        let transfer = CurlTransfer(request: request, options: options, tls: tls, pool: pool)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.start(continuation)
            }
        } onCancel: {
            transfer.cancel()
        }
    }
}

/// One request: its curl handle, the thread that runs it, and the state its callbacks share.
///
/// The fields after `lock` are guarded by it; the others belong to the curl thread.
private final class CurlTransfer: @unchecked Sendable {
    let request: TransportRequest
    let options: HTTPTransportOptions
    private let tls: CurlTLS
    private let pool: CurlHandlePool
    private let writer: ByteStream.Writer

    private let lock = NSLock()
    private var continuation: CheckedContinuation<TransportResponse, any Error>?
    private var stream: ByteStream?
    private var cancelRequested = false

    // The curl thread's own state.
    private var handle: UnsafeMutableRawPointer?
    private var status = 0
    private var headers: [String: String] = [:]
    private var lastHeaderName: String?
    private var redirects = 0
    private var delivered = false
    private var received: Int64 = 0
    private var abort: HTTPFailure?

    init(request: TransportRequest, options: HTTPTransportOptions, tls: CurlTLS, pool: CurlHandlePool) {
        self.request = request
        self.options = options
        self.tls = tls
        self.pool = pool
        let (stream, writer) = ByteStream.makeStream(capacity: options.streamCapacity)
        self.stream = stream
        self.writer = writer
    }

    private var subject: String { request.url.absoluteString }

    /// Whether libcurl follows redirects: not for a signed request, whose signature names
    /// one host and path.
    private var followsRedirects: Bool { options.awsSigV4 == nil }

    // MARK: - Control (any thread)

    func start(_ continuation: CheckedContinuation<TransportResponse, any Error>) {
        lock.lock()
        if cancelRequested {
            stream = nil
            lock.unlock()
            continuation.resume(throwing: HTTPFailure.cancelledBeforeStart(subject: subject))
            return
        }
        self.continuation = continuation
        lock.unlock()
        writer.onCancel { [weak self] in self?.cancel() }
        let thread = Thread { [self] in run() }
        thread.name = "CurlTransport"
        thread.start()
    }

    func cancel() {
        lock.lock()
        cancelRequested = true
        lock.unlock()
    }

    private var isCancelRequested: Bool {
        lock.lock()
        defer { lock.unlock() }
        return cancelRequested
    }

    private func takeContinuation() -> (CheckedContinuation<TransportResponse, any Error>, ByteStream?)? {
        lock.lock()
        defer { lock.unlock() }
        guard let continuation else { return nil }
        self.continuation = nil
        let pending = stream
        stream = nil
        return (continuation, pending)
    }

    // MARK: - The curl thread

    private func run() {
        guard let handle = pool.take() else {
            finish(error: HotUpdateError(.transportFailed, "libcurl could not create a handle", subject: subject))
            return
        }
        self.handle = handle
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        var headerList: UnsafeMutablePointer<curl_slist>?
        defer {
            // Back to the pool, reset but with its connection and TLS session, for the next request.
            pool.give(handle)
            curl_slist_free_all(headerList)
            errorBuffer.deallocate()
            self.handle = nil
        }
        do {
            headerList = try configure(handle, errorBuffer: errorBuffer)
        } catch {
            finish(error: HotUpdateError.wrap(error, as: .transportFailed, "cannot configure libcurl"))
            return
        }
        let code = curl_easy_perform(handle)
        if code == CURLE_OK {
            finish(error: nil)
        } else {
            finish(error: map(code, detail: String(cString: errorBuffer)))
        }
    }

    private func finish(error: HotUpdateError?) {
        if let (continuation, stream) = takeContinuation() {
            if let error {
                continuation.resume(throwing: error)
            } else if let stream {
                // The transfer ended without a header block this transport saw as final.
                continuation.resume(returning: response(body: stream))
            } else {
                continuation.resume(
                    throwing: HotUpdateError(
                        .internalInconsistency,
                        "the response body was handed out twice",
                        subject: subject
                    )
                )
            }
        }
        writer.finish(throwing: error)
    }

    private func configure(
        _ handle: UnsafeMutableRawPointer,
        errorBuffer: UnsafeMutablePointer<CChar>
    ) throws -> UnsafeMutablePointer<curl_slist>? {
        func check(_ code: CURLcode, _ what: String) throws {
            guard code == CURLE_OK else {
                throw HotUpdateError(
                    .transportFailed,
                    "libcurl refused \(what): \(String(cString: curl_easy_strerror(code)))",
                    subject: subject
                )
            }
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        try check(hot_curl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer), "the error buffer")
        try check(hot_curl_setopt_string(handle, CURLOPT_URL, request.url.absoluteString), "the URL")
        try check(hot_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1), "CURLOPT_NOSIGNAL")
        try check(hot_curl_setopt_long(handle, CURLOPT_FAILONERROR, 0), "CURLOPT_FAILONERROR")
        try check(
            hot_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, followsRedirects ? 1 : 0),
            "CURLOPT_FOLLOWLOCATION"
        )
        try check(hot_curl_setopt_long(handle, CURLOPT_MAXREDIRS, max(0, options.maxRedirects)), "CURLOPT_MAXREDIRS")
        try check(hot_curl_setopt_long(handle, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1), "CURLOPT_SUPPRESS_CONNECT_HEADERS")
        // Older libcurl lacks the string forms; it then allows its default protocols.
        _ = hot_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = hot_curl_setopt_long(handle, CURLOPT_BUFFERSIZE, max(1024, options.bufferSize))
        try tls.configure(handle, url: request.url, check: check)
        if let signing = options.awsSigV4 {
            try check(
                hot_curl_setopt_string(handle, CURLOPT_AWS_SIGV4, signing.provider),
                "CURLOPT_AWS_SIGV4 (libcurl 7.75 or later)"
            )
            try check(hot_curl_setopt_string(handle, CURLOPT_USERNAME, signing.accessKeyID), "the access key")
            try check(hot_curl_setopt_string(handle, CURLOPT_PASSWORD, signing.secretAccessKey), "the secret key")
            // A large body is sent after "100 Continue", or after this long without one.
            _ = hot_curl_setopt_long(handle, CURLOPT_EXPECT_100_TIMEOUT_MS, 300)
        }

        let timeouts = request.timeouts
        try check(
            hot_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, max(1, timeouts.connect.clampedMilliseconds)),
            "the connect timeout"
        )
        try check(
            hot_curl_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, max(1, timeouts.lowSpeedBytesPerSecond)),
            "the low-speed limit"
        )
        let windowMilliseconds = timeouts.lowSpeedWindow.clampedMilliseconds
        let window = windowMilliseconds / 1000 + (windowMilliseconds % 1000 == 0 ? 0 : 1)  // whole seconds, rounded up
        try check(hot_curl_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, max(1, window)), "the low-speed window")
        if let total = timeouts.total {
            try check(
                hot_curl_setopt_long(handle, CURLOPT_TIMEOUT_MS, max(1, total.clampedMilliseconds)),
                "the timeout"
            )
        }
        if let range = request.range {
            let value = "\(range.start)-\(range.end.map(String.init) ?? "")"
            try check(hot_curl_setopt_string(handle, CURLOPT_RANGE, value), "the range")
        }

        let method = request.method.uppercased()
        switch method {
        case "GET":
            try check(hot_curl_setopt_long(handle, CURLOPT_HTTPGET, 1), "GET")
        case "HEAD":
            try check(hot_curl_setopt_long(handle, CURLOPT_NOBODY, 1), "HEAD")
        case "POST":
            try check(hot_curl_setopt_long(handle, CURLOPT_POST, 1), "POST")
        default:
            try check(hot_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, request.method), "the method")
        }
        if let body = request.body ?? (method == "POST" ? Data() : nil) {
            try check(hot_curl_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)), "the body size")
            var bytes = [UInt8](body)
            bytes.append(0)
            try bytes.withUnsafeMutableBytes { raw in
                try check(hot_curl_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, raw.baseAddress), "the body")
            }
        }

        var list: UnsafeMutablePointer<curl_slist>?
        var names = Set<String>()
        var requestHeaders = request.headers
        if let token = options.awsSigV4?.sessionToken { requestHeaders["x-amz-security-token"] = token }
        for (name, value) in requestHeaders.sorted(by: { $0.key < $1.key }) {
            names.insert(name.lowercased())
            let line = value.isEmpty ? "\(name);" : "\(name): \(value)"
            guard let appended = curl_slist_append(list, line) else {
                curl_slist_free_all(list)
                throw HotUpdateError(.transportFailed, "libcurl could not store the header \(name)", subject: subject)
            }
            list = appended
        }
        if !names.contains("user-agent") {
            // libcurl's own option, not a header line: a signed request does not sign it (AWS's
            // SDKs never do: a proxy may rewrite it).
            try check(hot_curl_setopt_string(handle, CURLOPT_USERAGENT, options.userAgent), "the user agent")
        }
        if request.body != nil, !names.contains("expect"), options.awsSigV4 == nil {
            // No "Expect: 100-continue" round trip for large bodies. Not when signing: libcurl
            // would sign the suppressed header without sending it.
            list = curl_slist_append(list, "Expect:") ?? list
        }
        if let list {
            try check(hot_curl_setopt_slist(handle, CURLOPT_HTTPHEADER, list), "the headers")
        }

        try check(
            hot_curl_setopt_data_callback(handle, CURLOPT_HEADERFUNCTION, curlHeaderCallback),
            "the header callback"
        )
        try check(hot_curl_setopt_pointer(handle, CURLOPT_HEADERDATA, context), "the header context")
        try check(hot_curl_setopt_data_callback(handle, CURLOPT_WRITEFUNCTION, curlWriteCallback), "the write callback")
        try check(hot_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, context), "the write context")
        try check(hot_curl_setopt_progress_callback(handle, curlProgressCallback), "the progress callback")
        try check(hot_curl_setopt_pointer(handle, CURLOPT_XFERINFODATA, context), "the progress context")
        try check(hot_curl_setopt_long(handle, CURLOPT_NOPROGRESS, 0), "progress reporting")
        return list
    }

    // MARK: Callbacks

    /// One header line; libcurl passes whole lines, for every response including redirects.
    fileprivate func onHeader(_ bytes: UnsafeRawBufferPointer) -> Int {
        if isCancelRequested {
            abort = .cancelled
            return 0
        }
        guard !delivered else { return bytes.count }  // trailers
        let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: CharacterSet(charactersIn: "\r\n"))
        if line.hasPrefix("HTTP/") {
            let parts = line.split(separator: " ", maxSplits: 2)
            status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            headers = [:]
            lastHeaderName = nil
        } else if line.isEmpty {
            return endOfHeaders() ? bytes.count : 0
        } else if line.first == " " || line.first == "\t", let name = lastHeaderName {
            headers[name, default: ""] += " " + line.trimmingCharacters(in: .whitespaces)
        } else if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if let existing = headers[name] {
                headers[name] = existing + ", " + value
            } else {
                headers[name] = value
            }
            lastHeaderName = name
        }
        return bytes.count
    }

    /// A header block ended: decides whether it is the final response and hands it out.
    /// Returns false to abort the transfer.
    private func endOfHeaders() -> Bool {
        if (100..<200).contains(status) { return true }  // 100 Continue, 103 Early Hints: another block follows
        let followed = followsRedirects && [301, 302, 303, 307, 308].contains(status) && headers["location"] != nil
        if followed {
            // Never from https down to http, whatever libcurl's protocol list allows.
            if let location = headers["location"], let target = redirectTarget(location),
                currentURL.isDowngrade(to: target)
            {
                abort = .insecureRedirect(target.absoluteString)
                return false
            }
            // libcurl follows it, or fails with too many redirects; either way it is not the answer.
            redirects += 1
            return true
        }
        if let failure = request.announcedFailure(request.announcedLength(headers)) {
            abort = failure
            return false
        }
        guard let (continuation, stream) = takeContinuation(), let stream else { return false }
        delivered = true
        continuation.resume(returning: response(body: stream))
        return true
    }

    /// The URL of the response being read: the request's, or where redirects have led.
    private var currentURL: URL {
        if let handle {
            var pointer: UnsafePointer<CChar>?
            if hot_curl_getinfo_string(handle, CURLINFO_EFFECTIVE_URL, &pointer) == CURLE_OK, let pointer,
                let effective = URL(string: String(cString: pointer))
            {
                return effective
            }
        }
        return request.url
    }

    /// Where a `Location` header leads from the current URL.
    private func redirectTarget(_ location: String) -> URL? {
        URL(string: location, relativeTo: currentURL)?.absoluteURL
    }

    private func response(body: ByteStream) -> TransportResponse {
        let url = currentURL
        var code = status
        if code == 0, let handle {
            var value = 0
            if hot_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &value) == CURLE_OK { code = value }
        }
        return TransportResponse(
            url: url,
            statusCode: code,
            headers: headers,
            expectedContentLength: request.announcedLength(headers),
            body: body
        )
    }

    /// Body bytes. Returning fewer than given aborts the transfer.
    fileprivate func onBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        if isCancelRequested {
            abort = .cancelled
            return 0
        }
        guard delivered else { return bytes.count }  // the body of a response that is not the final one
        received += Int64(bytes.count)
        if let failure = request.receivedFailure(received) {
            abort = failure
            return 0
        }
        do {
            try writer.writeBlocking(Data(bytes))
        } catch {
            abort = .cancelled
            return 0
        }
        return bytes.count
    }

    /// Called often, also while nothing arrives: the moment to notice a cancellation.
    fileprivate func onProgress() -> Int32 {
        if isCancelRequested {
            abort = .cancelled
            return 1
        }
        return 0
    }

    private func map(_ code: CURLcode, detail: String) -> HotUpdateError {
        if let abort { return abort.error(subject: subject) }
        let reason = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        if let refused = tls.failure(code, handle: handle, reason: reason, host: currentURL.host ?? subject) {
            return refused.error(subject: currentURL.absoluteString)
        }
        let failure: HTTPFailure
        switch code {
        case CURLE_UNSUPPORTED_PROTOCOL where redirects > 0 && request.url.scheme?.lowercased() == "https":
            // libcurl's protocol list refused where a redirect led: plain http.
            failure = .insecureRedirect(reason)
        case CURLE_OPERATION_TIMEDOUT:
            failure = .timedOut(reason)
        case CURLE_PARTIAL_FILE:
            failure = .truncated(received: received, expected: request.announcedLength(headers), reason: reason)
        case CURLE_TOO_MANY_REDIRECTS:
            failure = .tooManyRedirects(redirects, limit: options.maxRedirects)
        case CURLE_URL_MALFORMAT:
            failure = .badURL("libcurl cannot fetch this URL: \(reason)")
        default:
            failure = .failed("libcurl error \(code.rawValue): \(reason)")
        }
        return failure.error(subject: subject)
    }
}

private func curlHeaderCallback(
    _ data: UnsafeMutablePointer<CChar>?,
    _ size: Int,
    _ count: Int,
    _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.onHeader(UnsafeRawBufferPointer(start: data, count: size * count))
}

private func curlWriteCallback(
    _ data: UnsafeMutablePointer<CChar>?,
    _ size: Int,
    _ count: Int,
    _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.onBody(UnsafeRawBufferPointer(start: data, count: size * count))
}

private func curlProgressCallback(
    _ context: UnsafeMutableRawPointer?,
    _ downloadTotal: curl_off_t,
    _ downloaded: curl_off_t,
    _ uploadTotal: curl_off_t,
    _ uploaded: curl_off_t
) -> Int32 {
    guard let context else { return 1 }
    return Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue().onProgress()
}
#endif
