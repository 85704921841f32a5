#if canImport(WebKit)
import Foundation
import WebKit

/// Serves installed web modules to a `WKWebView` under a scheme of the app's choosing,
/// through a ``WebResponder``: pages load as `app://m.example.com/home/index.html`, with the
/// origin `app://m.example.com`, so module scripts, `fetch`, `localStorage`, workers and
/// `crossorigin` fonts work as they do online.
///
/// A request the module cannot answer (a file its package lacks, a module not installed or
/// turned off, an address no module covers) is fetched from the online address (the same
/// URL with the module's own scheme, `https`) through the app's `URLSession`, and its
/// answer passed to the page: same-origin for the page, so the module's own server needs no
/// CORS header for it. Requests the page makes to other origins (`https://api.example.com`)
/// do not reach this handler: they are cross-origin requests from `app://m.example.com`,
/// and that server must allow the origin (`Access-Control-Allow-Origin: app://m.example.com`).
/// Cookies set by those answers live in the web view's store; requests forwarded here carry
/// the session's cookies instead.
///
/// ```swift
/// let handler = WebSchemeHandler(scheme: "app", responder: WebResponder(resolver: resolver))
/// let configuration = WKWebViewConfiguration()
/// configuration.setURLSchemeHandler(handler, forURLScheme: "app")
/// let webView = WKWebView(frame: .zero, configuration: configuration)
/// if case .local(let page) = resolver.resolve(url) {
///     webView.load(URLRequest(url: page.url(scheme: "app")))
/// } else {
///     webView.load(URLRequest(url: url))
/// }
/// ```
@MainActor
public final class WebSchemeHandler: NSObject, WKURLSchemeHandler {
    /// The scheme the web view loads modules under.
    public let scheme: String
    /// The scheme of the modules' online addresses.
    public let onlineScheme: String
    /// The responder; replace it after each sync, so pages are served from the new version.
    public var responder: WebResponder
    /// The session requests the module cannot answer are fetched with.
    public let session: URLSession
    /// The tasks started and not yet stopped or finished, with the request forwarded for each.
    private var running: [ObjectIdentifier: (task: any WKURLSchemeTask, forwarded: URLSessionDataTask?)] = [:]

    /// Creates a handler.
    ///
    /// - Parameters:
    ///   - scheme: The scheme registered with `setURLSchemeHandler(_:forURLScheme:)`.
    ///   - onlineScheme: The scheme of the modules' online addresses.
    ///   - responder: The responder over the installed modules.
    ///   - session: The session for requests the modules cannot answer.
    public init(scheme: String, onlineScheme: String = "https", responder: WebResponder, session: URLSession = .shared)
    {
        self.scheme = scheme
        self.onlineScheme = onlineScheme
        self.responder = responder
        self.session = session
    }

    public func webView(_ webView: WKWebView, start task: any WKURLSchemeTask) {
        let key = ObjectIdentifier(task)
        guard let url = task.request.url, var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else {
            task.didFailWithError(URLError(.badURL))
            return
        }
        components.scheme = onlineScheme
        guard let online = components.url else {
            task.didFailWithError(URLError(.badURL))
            return
        }
        running[key] = (task, nil)
        let request = WebRequest(
            method: task.request.httpMethod ?? "GET",
            url: online,
            headers: task.request.allHTTPHeaderFields ?? [:]
        )
        switch responder.respond(to: request) {
        case .response(let response):
            if let answer = HTTPURLResponse(
                url: url,
                statusCode: response.status,
                httpVersion: "HTTP/1.1",
                headerFields: response.headerFields
            ) {
                task.didReceive(answer)
            }
            // The body is read off the main thread, a chunk at a time, each handed over
            // while the task still runs: a stopped task stops the reading.
            let body = response.body
            Task.detached { [weak self] in
                var offset: Int64 = 0
                do {
                    while offset < body.count {
                        let chunk = try body.chunk(at: offset, maxLength: 256 * 1024)
                        offset += Int64(chunk.count)
                        guard await self?.deliver(chunk, to: key) == true else { return }
                    }
                    await self?.finish(key, failure: nil)
                } catch {
                    await self?.finish(key, failure: error)
                }
            }
        case .network(let address, _):
            var forwarded = task.request
            forwarded.url = address
            let dataTask = session.dataTask(with: forwarded) { [weak self] data, response, error in
                Task { @MainActor in
                    guard let self, let task = self.running[key]?.task else { return }
                    if let http = response as? HTTPURLResponse, error == nil {
                        var fields: [String: String] = [:]
                        for (name, value) in http.allHeaderFields {
                            if let name = name as? String, let value = value as? String { fields[name] = value }
                        }
                        if let passed = HTTPURLResponse(
                            url: url,
                            statusCode: http.statusCode,
                            httpVersion: "HTTP/1.1",
                            headerFields: fields
                        ) {
                            task.didReceive(passed)
                        }
                        if let data { task.didReceive(data) }
                    }
                    self.finish(
                        key,
                        failure: error ?? (response is HTTPURLResponse ? nil : URLError(.badServerResponse))
                    )
                }
            }
            running[key] = (task, dataTask)
            dataTask.resume()
        }
    }

    public func webView(_ webView: WKWebView, stop task: any WKURLSchemeTask) {
        // After `stop`, WebKit raises an exception for any call on the task: none is made.
        running.removeValue(forKey: ObjectIdentifier(task))?.forwarded?.cancel()
    }

    /// Hands `chunk` to the task; false when it was stopped.
    private func deliver(_ chunk: Data, to key: ObjectIdentifier) -> Bool {
        guard let task = running[key]?.task else { return false }
        task.didReceive(chunk)
        return true
    }

    /// Ends the task, unless it was stopped.
    private func finish(_ key: ObjectIdentifier, failure: (any Error)?) {
        guard let task = running.removeValue(forKey: key)?.task else { return }
        if let failure { task.didFailWithError(failure) } else { task.didFinish() }
    }
}
#endif
