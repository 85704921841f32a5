import Foundation
import HotCore

/// Sends each request to the transport for its URL's scheme, so one `Updater` can install
/// packages from anywhere: a zip shipped inside the app (`file://`, `bundle:///`) and packages
/// on a server (`http://`, `https://`) in the same manifest.
///
/// Schemes are matched case-insensitively. A URL whose scheme has no route fails with
/// `HotUpdateError.Code.invalidArgument` before anything is fetched. Redirects stay with
/// the transport that started the request, and neither HTTP transport follows a redirect
/// to a local file.
///
/// ```swift
/// let transport = SchemeRoutingTransport(
///     http: CurlTransport(), file: FileTransport(bundleRoot: Bundle.main.resourceURL))
/// let updater = Updater(configuration: UpdaterConfiguration(
///     root: root, transport: transport, unarchiver: ZipUnarchiver(),
///     verifier: CryptoVerifier(), store: FileMetadataStore(root: root)))
/// ```
public struct SchemeRoutingTransport: Transport {
    /// The transport for each scheme, keys in lowercase.
    public let routes: [String: any Transport]

    /// Creates a router from a table of schemes.
    ///
    /// - Parameter routes: The transport for each scheme (`"https"`, `"file"`, …), in any case.
    public init(routes: [String: any Transport]) {
        var lowered: [String: any Transport] = [:]
        for (scheme, transport) in routes { lowered[scheme.lowercased()] = transport }
        self.routes = lowered
    }

    /// Creates the usual router: `http` and `https` to `http`, `file` and `bundle` to `file`.
    ///
    /// - Parameters:
    ///   - http: The HTTP transport, `CurlTransport()` or `URLSessionTransport()`.
    ///   - file: The transport for `file://` URLs and, when it has a bundle root, `bundle:///` URLs.
    public init(http: any Transport, file: FileTransport = FileTransport()) {
        self.init(routes: [
            "http": http, "https": http, "file": file, FileTransport.bundleScheme: file,
        ])
    }

    /// The transport that would fetch `url`, if any.
    public func transport(for url: URL) -> (any Transport)? {
        url.scheme.flatMap { routes[$0.lowercased()] }
    }

    /// Fetches `request` with the transport for its URL's scheme.
    ///
    /// - Parameter request: The request; passed on unchanged.
    /// - Returns: What the chosen transport returns.
    /// - Throws: `HotUpdateError.Code.invalidArgument` for a scheme without a route; otherwise
    ///   whatever the chosen transport throws.
    public func fetch(_ request: TransportRequest) async throws -> TransportResponse {
        guard let transport = transport(for: request.url) else {
            let known = routes.keys.sorted().joined(separator: ", ")
            throw HotUpdateError(
                .invalidArgument,
                "no transport handles \(request.url.scheme.map { "\($0):" } ?? "URLs without a scheme") "
                    + "(routed schemes: \(known))",
                subject: request.url.absoluteString
            )
        }
        return try await transport.fetch(request)
    }
}
