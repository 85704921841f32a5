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
}
#endif
