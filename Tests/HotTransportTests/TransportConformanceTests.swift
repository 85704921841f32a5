import Foundation
import HotCore
import HotTesting
import HotTransport
import Testing

/// Every transport passes the public Transport conformance suite: the HTTP ones against a
/// real nginx on 127.0.0.1, FileTransport over `file://` URLs.
@Suite struct TransportConformanceTests {
    static let file = TransportConformance(serve: TransportConformance.fileURLs) { FileTransport(chunkSize: 64 << 10) }

    @Test(arguments: file.checks)
    func fileTransportConforms(_ check: ConformanceCheck) async throws {
        try await check.run()
    }

    #if Curl && canImport(CHotCurl)
    static let curl = TransportConformance(serve: TransportConformance.nginx) { CurlTransport() }

    @Test(arguments: curl.checks)
    func curlTransportConforms(_ check: ConformanceCheck) async throws {
        try await check.run()
    }
    #endif

    static let urlSession = TransportConformance(serve: TransportConformance.nginx) { URLSessionTransport() }

    @Test(arguments: urlSession.checks)
    func urlSessionTransportConforms(_ check: ConformanceCheck) async throws {
        try await check.run()
    }
}
