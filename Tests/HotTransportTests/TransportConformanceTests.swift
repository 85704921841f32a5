import Foundation
import HotCore
import HotTestServers
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

    /// Over HTTPS, under a private CA's certificate, trusting only that CA.
    static let curlTLS = TransportConformance(serve: TransportConformance.nginxTLS) {
        let bundle = (try? TestCertificateAuthority.shared().certificate.path) ?? "/nonexistent/ca.pem"
        // A bundle that cannot be read fails the check that uses the transport, naming it.
        return (try? CurlTransport(trust: TLSTrust(authorities: .only(bundle: bundle)))) ?? CurlTransport()
    }

    @Test(arguments: curlTLS.checks)
    func curlTransportConformsOverTLS(_ check: ConformanceCheck) async throws {
        try await check.run()
    }
    #endif

    static let urlSession = TransportConformance(serve: TransportConformance.nginx) { URLSessionTransport() }

    @Test(arguments: urlSession.checks)
    func urlSessionTransportConforms(_ check: ConformanceCheck) async throws {
        try await check.run()
    }

    #if canImport(Security)
    /// Over HTTPS on Apple platforms, where the session's delegate evaluates the private CA.
    static let urlSessionTLS = TransportConformance(serve: TransportConformance.nginxTLS) {
        let bundle = (try? TestCertificateAuthority.shared().certificate.path) ?? "/nonexistent/ca.pem"
        return (try? URLSessionTransport(trust: TLSTrust(authorities: .only(bundle: bundle)))) ?? URLSessionTransport()
    }

    @Test(arguments: urlSessionTLS.checks)
    func urlSessionTransportConformsOverTLS(_ check: ConformanceCheck) async throws {
        try await check.run()
    }
    #endif

    /// A server that already serves the fixtures, written once: the suite fetches them from its URL.
    @Test func conformsAgainstAServerAlreadyServingTheFixtures() async throws {
        let directory = try ScratchDirectory.make("TransportFixtures")
        try TransportConformance.writeFixtures(to: directory)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(names == ["empty.bin", "large.bin", "small.bin"])
        let server = try await NginxServer.start(root: directory)
        let suite = TransportConformance(baseURL: server.baseURL) { SchemeRoutingTransport.platformHTTP() }
        do {
            for check in suite.checks { try await check.run() }
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }
}
