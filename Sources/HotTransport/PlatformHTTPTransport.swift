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
}
