import HotCore

extension SchemeRoutingTransport {
    /// The HTTP transport this platform builds best: `CurlTransport` where libcurl is
    /// linked (Linux, macOS, with the package's `Curl` trait, on by default),
    /// ``URLSessionTransport`` elsewhere (iOS, tvOS, watchOS, visionOS, or without the trait).
    ///
    /// ```swift
    /// let transport = SchemeRoutingTransport(http: SchemeRoutingTransport.platformHTTP())
    /// ```
    ///
    /// - Parameter options: The settings of its requests, the same for either transport.
    public static func platformHTTP(options: HTTPTransportOptions = HTTPTransportOptions()) -> any Transport {
        #if Curl && canImport(CHotCurl)
        return CurlTransport(options: options)
        #else
        return URLSessionTransport(options: options)
        #endif
    }

    /// The HTTP transport this platform builds best, with its own TLS trust.
    ///
    /// ```swift
    /// let trust = try TLSTrust(authorities: .only(bundle: caPath), pins: [currentKey, nextKey])
    /// let http = try SchemeRoutingTransport.platformHTTP(trust: trust)
    /// ```
    ///
    /// - Parameters:
    ///   - options: The settings of its requests, the same for either transport.
    ///   - trust: The certificate authorities, pins and TLS floor of every connection.
    /// - Throws: What the transport's initialiser throws when it cannot honour `trust`
    ///   (`HotUpdateError.Code.unsupported`), or the CA bundle cannot be read
    ///   (`HotUpdateError.Code.invalidArgument`).
    public static func platformHTTP(
        options: HTTPTransportOptions = HTTPTransportOptions(),
        trust: TLSTrust
    ) throws -> any Transport {
        #if Curl && canImport(CHotCurl)
        return try CurlTransport(options: options, trust: trust)
        #else
        return try URLSessionTransport(options: options, trust: trust)
        #endif
    }
}
