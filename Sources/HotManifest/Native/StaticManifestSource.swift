import Foundation
import HotCore
import Logging

/// Reads an unsigned schema-1 manifest (``ManifestDocument``) from a URL through a `Transport`.
///
/// Unsigned: anyone who can change the file or the network can change what the app
/// installs, so every fetch logs a warning. For development repositories and tests;
/// apps read signed manifests with ``SignedManifestSource``.
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
    public var timeouts: TransportRequest.Timeouts
    /// Where the warning about the missing signature goes.
    public var logger: Logger

    /// Creates a source.
    public init(
        url: URL,
        transport: any Transport,
        maxBytes: Int64 = 4 << 20,
        timeouts: TransportRequest.Timeouts = TransportRequest.Timeouts(),
        logger: Logger = Logger(label: "HotUpdate")
    ) {
        self.url = url
        self.transport = transport
        self.maxBytes = maxBytes
        self.timeouts = timeouts
        self.logger = logger
    }

    public func fetchManifest() async throws -> Manifest {
        let data = try await transport.fetchDocument(url: url, maxBytes: maxBytes, timeouts: timeouts)
        if SignedEnvelope.isEnvelope(data) {
            throw HotUpdateError(
                .manifestInvalid,
                "the manifest is signed: read it with SignedManifestSource",
                subject: url.absoluteString
            )
        }
        logger.warning("reading an unsigned manifest from \(url.absoluteString): nothing proves who published it")
        return try ManifestDocument.decode(data).manifest(relativeTo: url)
    }
}
