import Foundation
import HotCore

/// Reads one repository from several places — a CDN first, the origin second — and moves
/// each request on to the next mirror when one fails.
///
/// A request whose URL lies under one of the ``mirrors`` is sent there first, then to each
/// other mirror in order, the same path under each base. It moves on when a mirror:
/// - cannot be reached, or stalls before answering (`HotUpdateError.Code.transportFailed`,
///   `HotUpdateError.Code.timedOut`);
/// - answers 404 or 5xx (the last mirror's answer is returned as it is);
/// - stalls or breaks off in the middle of the body (the request's low-speed window): the
///   body goes on from the next mirror with a byte range from where it stopped, so the
///   consumer sees one uninterrupted body.
///
/// URLs under no mirror go to the wrapped transport unchanged. No mirror is trusted: the
/// engine checks every package's size and digest against the signed manifest, and a mirror
/// serving an older manifest is refused as a rollback, so a stale or hostile mirror can
/// delay an update but never change what is installed.
///
/// ```swift
/// let transport = MirroredTransport(
///     mirrors: [URL(string: "https://cdn.example.com/repo/")!, URL(string: "https://origin.example.com/repo/")!],
///     transport: CurlTransport())
/// let source = SignedManifestSource(
///     url: URL(string: "https://cdn.example.com/repo/manifest.json")!, transport: transport, …)
/// ```
public struct MirroredTransport: Transport {
    /// The base URLs, in the order they are tried (each ends with `/`).
    public let mirrors: [URL]
    /// The transport every request goes through.
    public let transport: any Transport

    /// Creates a transport over mirrors.
    ///
    /// - Parameters:
    ///   - mirrors: Base URLs of the same repository, preferred first. A base without a
    ///     trailing `/` gets one.
    ///   - transport: The transport that fetches from each, `CurlTransport()` usually.
    public init(mirrors: [URL], transport: any Transport) {
        self.mirrors = mirrors.map { base in
            base.absoluteString.hasSuffix("/") ? base : URL(string: base.absoluteString + "/") ?? base
        }
        self.transport = transport
    }

    /// The URLs `url` is tried at, in order: itself first, then the same path under every
    /// other mirror. A URL under no mirror is tried as it is.
    ///
    /// - Parameter url: A request's URL.
    /// - Returns: One URL per mirror when `url` is under one, else `[url]`.
    public func candidates(for url: URL) -> [URL] {
        let text = url.absoluteString
        guard let index = mirrors.firstIndex(where: { text.hasPrefix($0.absoluteString) }) else { return [url] }
        let relative = String(text.dropFirst(mirrors[index].absoluteString.count))
        let order = [index] + mirrors.indices.filter { $0 != index }
        return order.compactMap { URL(string: mirrors[$0].absoluteString + relative) }
    }

    /// Fetches from the first mirror that answers, moving on as described above.
    ///
    /// - Parameter request: The request; its URL is rewritten for each mirror.
    /// - Returns: The first usable response; its body continues from the next mirror if
    ///   the one serving it fails midway.
    /// - Throws: The last mirror's error when none could be reached.
    public func fetch(_ request: TransportRequest) async throws -> TransportResponse {
        let urls = candidates(for: request.url)
        let (response, index) = try await firstResponse(request, urls: urls, from: 0)
        guard index + 1 < urls.count, request.method.uppercased() == "GET", response.isSuccess else {
            return response
        }
        // The body may still fail: carry it on from the remaining mirrors.
        let (stream, writer) = ByteStream.makeStream()
        let relay = Task {
            await relayBody(request, urls: urls, first: response, firstIndex: index, into: writer)
        }
        writer.onCancel { relay.cancel() }
        var relayed = response
        relayed.body = stream
        return relayed
    }

    /// Tries `urls[start...]` in order and returns the first answer that is not a reason to
    /// move on, with its index.
    private func firstResponse(
        _ request: TransportRequest,
        urls: [URL],
        from start: Int,
        range: TransportRequest.ByteRange? = nil
    ) async throws -> (TransportResponse, Int) {
        var lastError: (any Error)?
        for index in urls.indices.dropFirst(start) {
            try Task.checkCancellation()
            var attempt = request
            attempt.url = urls[index]
            if let range { attempt.range = range }
            let isLast = index == urls.count - 1
            do {
                let response = try await transport.fetch(attempt)
                if !isLast, Self.movesOn(status: response.statusCode) {
                    response.body.cancel()
                    lastError = HotUpdateError(
                        .httpStatus,
                        "the mirror answered HTTP \(response.statusCode)",
                        subject: urls[index].absoluteString
                    )
                    continue
                }
                return (response, index)
            } catch let error as HotUpdateError where !isLast && Self.movesOn(error) {
                lastError = error
            }
        }
        throw lastError
            ?? HotUpdateError(.invalidArgument, "no mirror to fetch from", subject: request.url.absoluteString)
    }

    /// Copies the body into `writer`, resuming from the next mirror when a read fails.
    private func relayBody(
        _ request: TransportRequest,
        urls: [URL],
        first: TransportResponse,
        firstIndex: Int,
        into writer: ByteStream.Writer
    ) async {
        var response = first
        var index = firstIndex
        let start = request.range?.start ?? 0
        var delivered: Int64 = 0
        while true {
            do {
                for try await chunk in response.body {
                    try await writer.write(chunk)
                    delivered += Int64(chunk.count)
                }
                writer.finish()
                return
            } catch let error as HotUpdateError where index + 1 < urls.count && Self.movesOn(error) {
                // The mirror stalled or broke off: go on from the next one, from where it stopped.
                do {
                    let range = TransportRequest.ByteRange(start: start + delivered, end: request.range?.end)
                    let next = try await firstResponse(request, urls: urls, from: index + 1, range: range)
                    guard next.0.statusCode == 206 || (delivered == 0 && start == 0 && next.0.isSuccess) else {
                        next.0.body.cancel()
                        writer.finish(throwing: error)
                        return
                    }
                    (response, index) = next
                } catch {
                    writer.finish(throwing: error)
                    return
                }
            } catch {
                writer.finish(throwing: error)
                return
            }
        }
    }

    /// Whether an answer with this status sends the request to the next mirror.
    static func movesOn(status: Int) -> Bool { status == 404 || (500..<600).contains(status) }

    /// Whether this failure sends the request to the next mirror: the mirror could not be
    /// reached or stalled, never a cancellation or a limit the caller set.
    static func movesOn(_ error: HotUpdateError) -> Bool {
        error.code == .transportFailed || error.code == .timedOut || error.code == .truncated
    }
}
