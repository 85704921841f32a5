import Foundation

/// Reads the native JSON manifest (``ManifestDocument``) from a URL through a ``Transport``.
///
/// ```swift
/// let source = StaticManifestSource(url: URL(string: "https://cdn.example.com/app/manifest.json")!,
///                                   transport: CurlTransport())
/// let manifest = try await source.fetchManifest()
/// ```
public struct StaticManifestSource: ManifestSource {
    /// Where the manifest is.
    public var url: URL
    /// How to fetch it.
    public var transport: any Transport
    /// The largest manifest accepted.
    public var maxBytes: Int64
    /// Time limits for the request.
    public var timeouts: TransportTimeouts

    /// Creates a source.
    public init(
        url: URL, transport: any Transport, maxBytes: Int64 = 4 << 20,
        timeouts: TransportTimeouts = TransportTimeouts()
    ) {
        self.url = url
        self.transport = transport
        self.maxBytes = maxBytes
        self.timeouts = timeouts
    }

    public func fetchManifest() async throws -> Manifest {
        let data = try await transport.fetchDocument(url: url, maxBytes: maxBytes, timeouts: timeouts)
        return try ManifestDocument.decode(data).manifest(relativeTo: url)
    }
}

extension Transport {
    /// Fetches a small document whole: checks the status and the size limit.
    ///
    /// - Throws: ``HotUpdateError`` with the transport's codes, ``HotUpdateError/Code/httpStatus``
    ///   or ``HotUpdateError/Code/byteLimitExceeded``.
    public func fetchDocument(
        url: URL, maxBytes: Int64, timeouts: TransportTimeouts = TransportTimeouts(),
        method: String = "GET", headers: [String: String] = [:], body: Data? = nil
    ) async throws -> Data {
        let response = try await fetch(
            TransportRequest(
                url: url, method: method, headers: headers, body: body, timeouts: timeouts, maxBytes: maxBytes))
        try response.requireSuccess()
        return try await response.collect(limit: maxBytes)
    }
}
