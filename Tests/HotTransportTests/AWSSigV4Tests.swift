import Foundation
import HotCore
import HotTestServers
import HotTesting
import HotTransport
import HotVerify
import Testing

/// Requests signed with AWS SigV4 (`HTTPTransportOptions.awsSigV4`): libcurl's signer checked
/// by botocore's against moto on 127.0.0.1, the redirects a signed request never follows, and
/// the transport that cannot sign refusing to send anything.
@Suite("AWS SigV4 signing")
struct AWSSigV4Tests {
    static func signing(secret: String = MotoServer.secretAccessKey) -> HTTPTransportOptions {
        var options = HTTPTransportOptions()
        options.awsSigV4 = HTTPTransportOptions.AWSSigV4(
            region: "eu-west-1",
            accessKeyID: "hot-test",
            secretAccessKey: secret
        )
        return options
    }

    /// A request to `url` with the payload hash S3 wants.
    static func request(_ method: String, _ url: URL, body: Data? = nil) throws -> TransportRequest {
        let hash = try CryptoVerifier().digest(of: body ?? Data(), using: .sha256).hex
        return TransportRequest(
            url: url,
            method: method,
            headers: ["x-amz-content-sha256": hash, "Content-Type": "text/plain"],
            body: body,
            maxBytes: 1 << 20
        )
    }

    #if Curl && canImport(CHotCurl)
    @Test(
        "CurlTransport signs with libcurl's SigV4: botocore finds each signature valid, and one made with another secret invalid"
    )
    func curlSigns() async throws {
        let moto = try await MotoServer.start()
        defer { moto.stopNow() }
        try await moto.createBucket("bucket")
        let url = moto.baseURL.appendingPathComponent("bucket/dir/a-b.txt")
        let content = Data("signed content\n".utf8)
        let transport = CurlTransport(options: Self.signing())

        let put = try await transport.fetch(try Self.request("PUT", url, body: content))
        #expect(put.statusCode == 200)
        _ = try await put.collect(limit: 1 << 20)
        let get = try await transport.fetch(try Self.request("GET", url))
        #expect(get.statusCode == 200)
        #expect(try await get.collect(limit: 1 << 20) == content)

        let forged = CurlTransport(options: Self.signing(secret: "not-the-secret"))
        let other = try await forged.fetch(try Self.request("GET", url))
        _ = try await other.collect(limit: 1 << 20)

        let logged = moto.requests().filter { $0.path == "/bucket/dir/a-b.txt" }
        #expect(logged.map(\.method) == ["PUT", "GET", "GET"])
        #expect(logged.map(\.signatureValid) == [true, true, false])
        #expect(logged.first?.contentType == "text/plain")
    }

    @Test("a signed request follows no redirect: the 3xx answer comes back and the target is never asked")
    func signedRequestNotRedirected() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try scratch.randomFile("target.bin", count: 100)
        try await withNginx(root: scratch.url, locations: [.redirect(from: "/moved", to: "/target.bin", status: 301)]) {
            server in
            let url = server.baseURL.appendingPathComponent("moved")
            let signed = try await CurlTransport(options: Self.signing()).fetch(try Self.request("GET", url))
            #expect(signed.statusCode == 301)
            #expect(signed.headers["location"]?.hasSuffix("/target.bin") == true)
            _ = try await signed.collect(limit: 1 << 20)
            // The same transport unsigned follows it: the redirect is there to follow.
            let unsigned = try await CurlTransport().fetch(TransportRequest(url: url))
            #expect(unsigned.statusCode == 200)
            #expect(try await unsigned.collect(limit: 1 << 20).count == 100)
            #expect(await server.waitForRequests(path: "/moved", count: 2).count == 2)
            #expect(await server.waitForRequests(path: "/target.bin", count: 1).count == 1)
        }
    }
    #endif

    @Test("URLSessionTransport cannot sign: it refuses with unsupported and sends nothing")
    func urlSessionRefuses() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try scratch.randomFile("a.bin", count: 10)
        try await withNginx(root: scratch.url) { server in
            let url = server.baseURL.appendingPathComponent("a.bin")
            let transport = URLSessionTransport(options: Self.signing())
            await #expect(throws: HotUpdateError(.unsupported, "")) {
                _ = try await transport.fetch(try Self.request("GET", url))
            }
            // A request the server answers afterwards shows the log is written: the refused one is not in it.
            let plain = try await URLSessionTransport().fetch(TransportRequest(url: url))
            _ = try await plain.collect(limit: 1 << 20)
            let logged = await server.waitForRequests(path: "/a.bin", count: 1)
            #expect(logged.count == 1)
        }
    }

    @Test("the signing options never show the secret key")
    func descriptionHidesSecret() {
        let signing = HTTPTransportOptions.AWSSigV4(
            region: "eu-west-1",
            accessKeyID: "AKIDEXAMPLE",
            secretAccessKey: "wJalrXUtnFEMI",
            sessionToken: "token-value"
        )
        #expect(signing.provider == "aws:amz:eu-west-1:s3")
        #expect(!"\(signing)".contains("wJalrXUtnFEMI"))
        #expect(!"\(signing)".contains("token-value"))
        #expect("\(signing)".contains("AKIDEXAMPLE"))
    }
}
