import HotCore

extension SchemeRoutingTransport {
    /// The HTTP transport this platform builds best: `CurlTransport` where libcurl is
    /// linked (Linux, macOS, with the package's `Curl` trait, on by default),
    /// ``URLSessionTransport`` elsewhere (iOS, tvOS, watchOS, visionOS, or without the trait).
    ///
    /// ```swift
    /// let transport = SchemeRoutingTransport(http: SchemeRoutingTransport.platformHTTP())
    /// ```
    public static func platformHTTP() -> any Transport {
        #if Curl && canImport(CHotCurl)
        return CurlTransport()
        #else
        return URLSessionTransport()
        #endif
    }
}
