#if os(Linux) || os(macOS)
import Foundation
import HotTesting

extension TransportConformance {
    /// Serves each check's fixture directory with nginx on 127.0.0.1 (see ``NginxServer``),
    /// stopped when the check ends.
    ///
    /// ```swift
    /// let suite = TransportConformance(serve: TransportConformance.nginx) { MyTransport() }
    /// ```
    public static let nginx: Serve = { directory in
        let server = try await NginxServer.start(root: directory)
        return Server(baseURL: server.baseURL, stop: { await server.stop() })
    }

    /// Serves each check's fixture directory with nginx over HTTPS on 127.0.0.1, under a
    /// certificate of ``TestCertificateAuthority/shared()``: the transport under test must
    /// trust that authority's certificate.
    ///
    /// ```swift
    /// let authority = try TestCertificateAuthority.shared()
    /// let suite = TransportConformance(serve: TransportConformance.nginxTLS) {
    ///     try! CurlTransport(trust: TLSTrust(authorities: .only(bundle: authority.certificate.path)))
    /// }
    /// ```
    public static let nginxTLS: Serve = { directory in
        let certificate = try TestCertificateAuthority.sharedLoopback()
        let server = try await NginxServer.start(root: directory, options: .init(tls: .init(certificate)))
        return Server(baseURL: server.baseURL, stop: { await server.stop() })
    }
}
#endif
