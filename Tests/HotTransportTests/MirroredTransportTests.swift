#if Curl && canImport(CHotCurl)
import Foundation
import HotCore
import HotTestServers
import HotTesting
import HotTransport
import Testing

@Suite("mirrored transport")
struct MirroredTransportTests {
    @Test("a request under any mirror is tried there first, then under the others in order")
    func candidates() throws {
        let cdn = try #require(URL(string: "https://cdn.example.com/repo"))
        let origin = try #require(URL(string: "https://origin.example.com/a/repo/"))
        let transport = MirroredTransport(mirrors: [cdn, origin], transport: CurlTransport())
        let file = try #require(URL(string: "https://cdn.example.com/repo/packages/x.zip"))
        #expect(
            transport.candidates(for: file).map(\.absoluteString) == [
                "https://cdn.example.com/repo/packages/x.zip", "https://origin.example.com/a/repo/packages/x.zip",
            ]
        )
        let fromOrigin = try #require(URL(string: "https://origin.example.com/a/repo/manifest.json"))
        #expect(transport.candidates(for: fromOrigin).first == fromOrigin)
        let elsewhere = try #require(URL(string: "https://other.example.com/repo/x.zip"))
        #expect(transport.candidates(for: elsewhere) == [elsewhere])
    }

    @Test("a stopped mirror and one answering 404 or 500 pass the request on; the last mirror's answer stands")
    func fallsBack() async throws {
        let scratch = try Scratch()
        let payload = Data((0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try FileManager.default.createDirectory(
            at: scratch.url.appendingPathComponent("packages"),
            withIntermediateDirectories: true
        )
        try payload.write(to: scratch.url.appendingPathComponent("packages/p.bin"))
        let stopped = try await NginxServer.start(root: scratch.url)
        await stopped.stop()
        let missing = try await NginxServer.start(
            root: scratch.url,
            options: .init(locations: [.status(404, at: "/packages/p.bin")])
        )
        let failing = try await NginxServer.start(
            root: scratch.url,
            options: .init(locations: [.status(500, at: "/packages/p.bin")])
        )
        let serving = try await NginxServer.start(root: scratch.url)
        let transport = MirroredTransport(
            mirrors: [stopped.baseURL, missing.baseURL, failing.baseURL, serving.baseURL],
            transport: CurlTransport()
        )

        let response = try await transport.fetch(
            TransportRequest(url: stopped.baseURL.appendingPathComponent("packages/p.bin"))
        )
        #expect(try await response.collect(limit: 1 << 20) == payload)
        #expect(missing.requestCount(for: "/packages/p.bin") == 1)
        _ = await failing.waitForRequests(path: "/packages/p.bin", count: 1)
        #expect(failing.requests().filter { $0.path == "/packages/p.bin" }.allSatisfy { $0.status == 500 })
        _ = await serving.waitForRequests(path: "/packages/p.bin", count: 1)

        // A file no mirror has: the last mirror's 404 comes back to the caller.
        let absent = try await transport.fetch(TransportRequest(url: stopped.baseURL.appendingPathComponent("nothing")))
        #expect(absent.statusCode == 404)
        absent.body.cancel()
        for server in [missing, failing, serving] { await server.stop() }
        scratch.remove()
    }

    @Test("a mirror that breaks off or stalls mid-body: the body goes on from the next mirror with a range")
    func resumesMidBody() async throws {
        let length = 200_000
        let scratch = try Scratch()
        try RawHTTPServer.pattern(offset: 0, count: length).write(to: scratch.url.appendingPathComponent("body"))
        let serving = try await NginxServer.start(root: scratch.url)
        let broken = try RawHTTPServer.start(.truncated(announced: length, sent: 70_000))
        let stalled = try RawHTTPServer.start(.stallAfterHeaders(contentLength: length))
        let timeouts = TransportRequest.Timeouts(lowSpeedWindow: .seconds(1))
        for first in [broken, stalled] {
            let transport = MirroredTransport(mirrors: [first.baseURL, serving.baseURL], transport: CurlTransport())
            let response = try await transport.fetch(TransportRequest(url: first.url, timeouts: timeouts))
            #expect(response.statusCode == 200)
            #expect(try await response.collect(limit: 1 << 20) == RawHTTPServer.pattern(offset: 0, count: length))
        }
        let requests = await serving.waitForRequests(path: "/body", count: 2)
        // The broken mirror's 70,000 bytes were kept: the next mirror sent only the rest.
        #expect(requests.contains { $0.status == 206 && $0.bodyBytesSent == Int64(length - 70_000) })
        broken.stop()
        stalled.stop()
        await serving.stop()
        scratch.remove()
    }
}
#endif
