import Foundation
import HotCore

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A `Transport` over `URLSession`: the system's HTTP stack on Apple platforms,
/// FoundationNetworking on Linux.
///
/// Each request gets an ephemeral session (so its timeouts are its own). Its data
/// delegate counts every chunk against the byte limit as it arrives and hands it to a
/// thread that feeds the body's `ByteStream`, waiting while the consumer is behind.
/// Memory while the consumer is behind:
/// - on Apple platforms, the task is suspended once ``HTTPTransportOptions/bufferLimit`` bytes wait,
///   and resumed when the consumer has caught up, so the transfer is held back;
/// - FoundationNetworking (Linux) cannot pause a transfer (suspending a running task
///   there restarts it), so the bytes that arrive wait in memory, never more than the
///   request's `TransportRequest.maxBytes`. Prefer ``CurlTransport`` on Linux, which
///   holds the transfer back.
///
/// - Statuses are returned, not thrown; redirects are followed (at most
///   ``HTTPTransportOptions/maxRedirects``) and only the final response is reported.
/// - `Accept-Encoding: identity` is sent unless the request sets the header, so the
///   bytes are the server's file, as digests expect; the options' `User-Agent` likewise.
/// - TLS: the ``trust`` given at creation. On Apple platforms its session delegate answers
///   the server-trust challenge of every connection (redirects included): the chain is
///   evaluated by the Security framework against the system's CAs or the bundle's (SecTrust
///   anchors), then the leaf's key is compared with the pins; TLS 1.2 is the floor.
///   FoundationNetworking (Linux) has no server-trust hook: there a trust other than
///   ``TLSTrust/system`` is refused at creation with `HotUpdateError.Code.unsupported`, and the
///   floor is the system OpenSSL's (TLS 1.2 on Debian and Ubuntu).
/// - A redirect from `https` to `http` fails with `HotUpdateError.Code.insecureRedirect`.
/// - Timeouts: a transfer that moves fewer than
///   `TransportRequest.Timeouts.lowSpeedBytesPerSecond` over a `TransportRequest.Timeouts.lowSpeedWindow`
///   (waiting for the response included) or that outlives `TransportRequest.Timeouts.total` fails with
///   `HotUpdateError.Code.timedOut`. `URLSession` has no separate connect timeout; the
///   connect phase falls under the low-speed window.
/// - A body shorter than its `Content-Length` fails with `HotUpdateError.Code.truncated`;
///   more than `TransportRequest.maxBytes` with `HotUpdateError.Code.byteLimitExceeded`.
///
/// ```swift
/// let transport = URLSessionTransport()
/// let response = try await transport.fetch(TransportRequest(url: manifestURL, maxBytes: 1 << 20))
/// try response.requireSuccess()
/// let manifest = try await response.collect(limit: 1 << 20)
/// ```
public struct URLSessionTransport: Transport {
    /// Settings shared by every request of a transport, the same for `CurlTransport`.
    public typealias Options = HTTPTransportOptions

    /// The settings of this transport.
    public var options: HTTPTransportOptions

    /// Makes the configuration of each request's session; timeouts and caching are then set
    /// from the request.
    public var makeConfiguration: @Sendable () -> URLSessionConfiguration

    /// Whom TLS trusts, fixed at creation.
    public let trust: TLSTrust

    /// The DER certificates of the trust's CA bundle, the anchors of each evaluation.
    private let anchors: [[UInt8]]

    /// Creates a transport trusting the system's certificate authorities.
    ///
    /// - Parameters:
    ///   - options: Redirects, user agent and buffering.
    ///   - makeConfiguration: Makes each session's configuration; `.ephemeral` by default.
    public init(
        options: HTTPTransportOptions = HTTPTransportOptions(),
        makeConfiguration: @escaping @Sendable () -> URLSessionConfiguration = { .ephemeral }
    ) {
        self.options = options
        self.makeConfiguration = makeConfiguration
        self.trust = .system
        self.anchors = []
    }

    /// Creates a transport with its own trust: a private CA's bundle, pinned keys.
    ///
    /// ```swift
    /// let transport = try URLSessionTransport(trust: TLSTrust(pins: [current, next]))
    /// ```
    ///
    /// - Parameters:
    ///   - options: Redirects, user agent and buffering.
    ///   - trust: The certificate authorities, pins and TLS floor of every connection.
    ///   - makeConfiguration: Makes each session's configuration; `.ephemeral` by default.
    /// - Throws: `HotUpdateError.Code.unsupported` over FoundationNetworking (Linux) for any
    ///   trust but ``TLSTrust/system``, which it has no hook to honour;
    ///   `HotUpdateError.Code.invalidArgument` for a CA bundle that cannot be read or holds no
    ///   certificate.
    public init(
        options: HTTPTransportOptions = HTTPTransportOptions(),
        trust: TLSTrust,
        makeConfiguration: @escaping @Sendable () -> URLSessionConfiguration = { .ephemeral }
    ) throws {
        #if canImport(Security)
        try trust.validateBundle()
        self.anchors = try trust.authorities.bundlePath.map { try PEMCertificates.read(path: $0) } ?? []
        #else
        guard trust.isSystem else { throw Self.unsupported(trust) }
        self.anchors = []
        #endif
        self.options = options
        self.makeConfiguration = makeConfiguration
        self.trust = trust
    }

    /// Why this platform's URLSession cannot honour `trust`.
    static func unsupported(_ trust: TLSTrust) -> HotUpdateError {
        HotUpdateError(
            .unsupported,
            "URLSessionTransport cannot honour \(trust) here: FoundationNetworking has no server-trust hook "
                + "for a CA bundle, pins or a TLS floor; use CurlTransport"
        )
    }

    /// Starts the request and returns once the final response's headers are complete.
    ///
    /// - Parameter request: What to fetch, with its range, limits and timeouts.
    /// - Returns: The status, headers and streaming body of the final response.
    /// - Throws: `HotUpdateError` with `HotUpdateError.Code.invalidArgument` for a URL that
    ///   is not `http` or `https`, `HotUpdateError.Code.timedOut`,
    ///   `HotUpdateError.Code.byteLimitExceeded` (announced length over the limit),
    ///   `HotUpdateError.Code.transportFailed` or `HotUpdateError.Code.cancelled`; the
    ///   certificate codes, `HotUpdateError.Code.pinMismatch` and
    ///   `HotUpdateError.Code.insecureRedirect` when TLS refuses the server;
    ///   `HotUpdateError.Code.unsupported` when the options ask for AWS SigV4
    ///   (``HTTPTransportOptions/awsSigV4``), which only `CurlTransport` signs.
    public func fetch(_ request: TransportRequest) async throws -> TransportResponse {
        try request.requireHTTP("URLSessionTransport")
        if let signing = options.awsSigV4 {
            throw HotUpdateError(
                .unsupported,
                "URLSessionTransport cannot sign requests with \(signing): use CurlTransport",
                subject: request.url.absoluteString
            )
        }
        try Task.checkCancellation()

        let configuration = makeConfiguration()
        // The transfer's own watchdog enforces the low-speed window; these only back it up.
        let total = request.timeouts.total?.timeInterval ?? 7 * 24 * 3600
        configuration.timeoutIntervalForRequest = total
        configuration.timeoutIntervalForResource = total
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        #if canImport(Security)
        configuration.tlsMinimumSupportedProtocolVersion = trust.minimumVersion == .tls13 ? .TLSv13 : .TLSv12
        #endif

        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.timeoutInterval = total
        urlRequest.cachePolicy = .reloadIgnoringLocalCacheData
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        let names = Set(request.headers.keys.map { $0.lowercased() })
        if !names.contains("accept-encoding") {
            urlRequest.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        }
        if !names.contains("user-agent") {
            urlRequest.setValue(options.userAgent, forHTTPHeaderField: "User-Agent")
        }
        if let range = request.range { urlRequest.setValue(range.headerValue, forHTTPHeaderField: "Range") }
        urlRequest.httpBody = request.body

        let transfer = SessionTransfer(request: request, options: options, trust: trust, anchors: anchors)
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.name = "URLSessionTransport"
        let session = URLSession(configuration: configuration, delegate: transfer, delegateQueue: queue)
        let task = session.dataTask(with: urlRequest)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.start(task, continuation: continuation)
                session.finishTasksAndInvalidate()
            }
        } onCancel: {
            transfer.fail(.cancelled)
        }
    }
}

/// One request: the session's delegate, the thread that feeds the body stream (the
/// pump), and the state they share, guarded by `lock`.
final class SessionTransfer: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    let request: TransportRequest
    let options: HTTPTransportOptions
    let trust: TLSTrust
    let anchors: [[UInt8]]
    private let writer: ByteStream.Writer

    private let lock = NSCondition()
    private var continuation: CheckedContinuation<TransportResponse, any Error>?
    /// Chunks received and not yet handed to the stream, from `pendingHead` on.
    private var pending: [Data] = []
    private var pendingHead = 0
    private var pendingBytes = 0
    /// Whether the task is suspended because too many bytes wait.
    private var backPressure: BackPressure
    /// The transfer's outcome once the task has completed, for the pump to pass on.
    private var outcome: HotUpdateError?
    /// Whether the pump has stopped because the consumer went away.
    private var pumpStopped = false
    private var stream: ByteStream?
    private var task: URLSessionDataTask?
    private var abort: HTTPFailure?
    private var watchdog: (any DispatchSourceTimer)?
    private var bytesThisWindow: Int64 = 0
    private var received: Int64 = 0
    private var expectedLength: Int64?
    private var redirects = 0
    private var finished = false

    init(request: TransportRequest, options: HTTPTransportOptions, trust: TLSTrust, anchors: [[UInt8]]) {
        self.request = request
        self.options = options
        self.trust = trust
        self.anchors = anchors
        self.backPressure = BackPressure(limit: options.bufferLimit)
        let (stream, writer) = ByteStream.makeStream(capacity: options.streamCapacity)
        self.stream = stream
        self.writer = writer
        super.init()
    }

    private var subject: String { request.url.absoluteString }

    // MARK: - Control

    func start(_ task: URLSessionDataTask, continuation: CheckedContinuation<TransportResponse, any Error>) {
        lock.lock()
        if abort != nil {
            stream = nil
            lock.unlock()
            task.cancel()
            continuation.resume(throwing: HTTPFailure.cancelledBeforeStart(subject: subject))
            return
        }
        self.task = task
        self.continuation = continuation
        lock.unlock()
        writer.onCancel { [weak self] in self?.fail(.cancelled) }
        let pump = Thread { [self] in runPump() }
        pump.name = "URLSessionTransport"
        pump.start()
        startWatchdog()
        task.resume()
    }

    /// Hands received chunks to the stream, waiting while the consumer is behind, then ends
    /// the stream with the transfer's outcome.
    private func runPump() {
        while true {
            lock.lock()
            while pendingHead == pending.count && !finished && !pumpStopped { lock.wait() }
            if pumpStopped {
                lock.unlock()
                return
            }
            if pendingHead == pending.count {
                let failure = outcome
                lock.unlock()
                writer.finish(throwing: failure)
                return
            }
            // Small chunks are joined, up to the options' buffer size, so the consumer does less
            // work per byte.
            var chunk = pending[pendingHead]
            pendingHead += 1
            while pendingHead < pending.count, chunk.count + pending[pendingHead].count <= options.bufferSize {
                chunk.append(pending[pendingHead])
                pendingHead += 1
            }
            if pendingHead == pending.count || pendingHead > 1024 {
                pending.removeFirst(pendingHead)
                pendingHead = 0
            }
            pendingBytes -= chunk.count
            var resuming: URLSessionDataTask?
            if backPressure.shouldResume(pendingBytes: pendingBytes) {
                resuming = task
            }
            lock.unlock()
            resuming?.resume()
            do {
                try writer.writeBlocking(chunk)
            } catch {
                lock.lock()
                pumpStopped = true
                pending = []
                pendingHead = 0
                pendingBytes = 0
                lock.unlock()
                fail(.cancelled)
                return
            }
        }
    }

    /// Stops the transfer for `reason`; the first reason wins.
    ///
    /// - Parameter cancelTask: Whether to cancel the task; false when the caller ends it
    ///   another way (FoundationNetworking traps when a redirect's completion handler runs
    ///   after a cancellation).
    func fail(_ reason: HTTPFailure, cancelTask: Bool = true) {
        lock.lock()
        if abort == nil, !finished { abort = reason }
        let task = self.task
        lock.unlock()
        if cancelTask { task?.cancel() }
    }

    private func startWatchdog() {
        let window = request.timeouts.lowSpeedWindow
        let interval = max(0.05, window.timeInterval)
        let minimum = Int64(Double(max(1, request.timeouts.lowSpeedBytesPerSecond)) * interval)
        let deadline = request.timeouts.total.map { ContinuousClock.now.advanced(by: $0) }
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global())
        let tick = min(interval, request.timeouts.total?.timeInterval ?? interval)
        timer.schedule(deadline: .now() + tick, repeating: tick)
        let started = ContinuousClock.now
        timer.setEventHandler { [weak self] in
            guard let self else { return }
            if let deadline, ContinuousClock.now >= deadline, let total = self.request.timeouts.total {
                self.fail(.totalTimeout(total))
                return
            }
            guard ContinuousClock.now - started >= window else { return }
            self.lock.lock()
            let moved = self.bytesThisWindow
            self.bytesThisWindow = 0
            let total = self.received
            let paused = self.backPressure.suspended
            self.lock.unlock()
            // A transfer held back for a slow consumer is not a slow network.
            if moved < minimum, !paused {
                self.fail(
                    .tooSlow(
                        received: total,
                        window: window,
                        bytesPerSecond: self.request.timeouts.lowSpeedBytesPerSecond
                    )
                )
            }
        }
        lock.lock()
        watchdog = timer
        lock.unlock()
        timer.resume()
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

    private var currentAbort: HTTPFailure? {
        lock.lock()
        defer { lock.unlock() }
        return abort
    }

    // MARK: - Delegate

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        lock.lock()
        redirects += 1
        let count = redirects
        lock.unlock()
        let from = task.currentRequest?.url ?? response.url ?? request.url
        if let target = newRequest.url, from.isDowngrade(to: target) {
            fail(.insecureRedirect(target.absoluteString), cancelTask: false)
            completionHandler(nil)
        } else if count > options.maxRedirects {
            // Not following ends the task with the redirect as its response, which is then refused.
            fail(.tooManyRedirects(count, limit: options.maxRedirects), cancelTask: false)
            completionHandler(nil)
        } else {
            completionHandler(newRequest)
        }
    }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        guard currentAbort == nil else {
            completionHandler(.cancel)
            return
        }
        let http = response as? HTTPURLResponse
        var headers: [String: String] = [:]
        for (key, value) in http?.allHeaderFields ?? [:] {
            guard let name = key as? String else { continue }
            headers[name.lowercased()] = "\(value)"
        }
        let length =
            request.isHead
            ? nil
            : (request.announcedLength(headers)
                ?? (response.expectedContentLength >= 0 ? response.expectedContentLength : nil))
        if let failure = request.announcedFailure(length) {
            fail(failure)
            completionHandler(.cancel)
            return
        }
        lock.lock()
        expectedLength = length
        lock.unlock()
        guard let (continuation, stream) = takeContinuation(), let stream else {
            completionHandler(.cancel)
            return
        }
        continuation.resume(
            returning: TransportResponse(
                url: response.url ?? request.url,
                statusCode: http?.statusCode ?? 200,
                headers: headers,
                expectedContentLength: length,
                body: stream
            )
        )
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.lock()
        guard abort == nil, continuation == nil, !pumpStopped else {
            lock.unlock()
            return
        }
        received += Int64(data.count)
        bytesThisWindow += Int64(data.count)
        if let failure = request.receivedFailure(received) {
            lock.unlock()
            fail(failure)
            return
        }
        pending.append(data)
        pendingBytes += data.count
        var suspending: URLSessionDataTask?
        if backPressure.shouldSuspend(pendingBytes: pendingBytes) {
            suspending = task
        }
        lock.broadcast()
        lock.unlock()
        suspending?.suspend()
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        lock.lock()
        let reason = abort
        let timer = watchdog
        watchdog = nil
        let got = received
        let expected = expectedLength
        self.task = nil
        lock.unlock()
        timer?.cancel()

        let failure = map(error, reason: reason, received: got, expected: expected)
        lock.lock()
        finished = true
        outcome = failure
        lock.broadcast()
        lock.unlock()
        if let (continuation, stream) = takeContinuation() {
            if let failure {
                continuation.resume(throwing: failure)
            } else if let stream, let response = task.response {
                // A response without a body, delivered without a response callback.
                let http = response as? HTTPURLResponse
                var headers: [String: String] = [:]
                for (key, value) in http?.allHeaderFields ?? [:] {
                    if let name = key as? String { headers[name.lowercased()] = "\(value)" }
                }
                continuation.resume(
                    returning: TransportResponse(
                        url: response.url ?? request.url,
                        statusCode: http?.statusCode ?? 200,
                        headers: headers,
                        expectedContentLength: expected,
                        body: stream
                    )
                )
            } else {
                continuation.resume(
                    throwing: HotUpdateError(.transportFailed, "the request ended without a response", subject: subject)
                )
            }
        }
    }

    private func map(
        _ error: (any Error)?,
        reason: HTTPFailure?,
        received: Int64,
        expected: Int64?
    ) -> HotUpdateError? {
        if let reason { return reason.error(subject: subject) }
        let short = expected.map { received < $0 } ?? false
        guard let error else {
            guard short else { return nil }
            return HTTPFailure.truncated(received: received, expected: expected, reason: nil).error(subject: subject)
        }
        let urlError = error as? URLError
        let failure: HTTPFailure
        switch urlError?.code {
        case .timedOut?:
            failure = .timedOut(error.localizedDescription)
        case .cancelled?:
            return HTTPFailure.cancelled.error(subject: subject)
        default:
            if short {
                failure = .truncated(received: received, expected: expected, reason: error.localizedDescription)
            } else {
                let code = urlError.map { " (URLError \($0.code.rawValue))" } ?? ""
                failure = .failed("the request failed: \(error.localizedDescription)\(code)")
            }
        }
        return failure.error(subject: subject, cause: error)
    }
}
