import HotCore

extension SchemeRoutingTransport {
    /// The HTTP transport this platform builds best: ``CurlTransport`` where libcurl is
    /// linked (Linux, macOS), ``URLSessionTransport`` elsewhere (iOS, tvOS, watchOS, visionOS).
    ///
    /// ```swift
    /// let transport = SchemeRoutingTransport(http: SchemeRoutingTransport.platformHTTP())
    /// ```
    public static func platformHTTP() -> any Transport {
        #if canImport(CHotCurl)
            return CurlTransport()
        #else
            return URLSessionTransport()
        #endif
    }
}
