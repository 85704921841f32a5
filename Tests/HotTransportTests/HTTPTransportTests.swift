import Foundation
import HotCore
import HotTestServers
import HotTesting
import HotTransport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Both HTTP transports against a real nginx on 127.0.0.1 and against a misbehaving server.
@Suite("HTTP transports")
struct HTTPTransportTests {
    @Test("a 20 MB body streams in chunks, byte for byte", arguments: HTTPTransportKind.allCases)
    func largeBody(kind: HTTPTransportKind) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let size = 20 << 20
        let content = try scratch.randomFile("packages/big.bin", count: size)
        try await withNginx(root: scratch.url) { server in
            let url = server.baseURL.appendingPathComponent("packages/big.bin")
            let response = try await kind.make().fetch(TransportRequest(url: url, maxBytes: Int64(size)))
            #expect(response.statusCode == 200)
            #expect(response.isSuccess)
            #expect(response.expectedContentLength == Int64(size))
            #expect(response.headers["content-length"] == String(size))
            #expect(response.headers["content-type"] == "application/octet-stream")
            #expect(response.headers["server"]?.hasPrefix("nginx") == true)
            #expect(response.url.path == "/packages/big.bin")
            let (bytes, chunks) = try await drain(response.body, comparingTo: content)
            #expect(bytes == size)
            #expect(chunks > 1)
            let logged = await server.waitForRequests(path: "/packages/big.bin", count: 1)
            #expect(logged.count == 1)
            #expect(logged.first?.bodyBytesSent == Int64(size))
        }
    }

    @Test(
        "a kept-alive connection the server has closed is not handed out again: the next request succeeds on a new one",
        .enabled(if: FileManager.default.fileExists(atPath: "/proc/net/tcp"), "reads the kernel's TCP table"),
        arguments: HTTPTransportKind.allCases
    )
    func closedConnectionNotReused(kind: HTTPTransportKind) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let content = try scratch.randomFile("a.bin", count: 200_000)
        let server = try await NginxServer.start(root: scratch.url, options: .init(keepAliveSeconds: 1))
        defer { server.stopNow() }
        let url = server.baseURL.appendingPathComponent("a.bin")
        let transport = kind.make()
        for round in 0..<3 {
            let response = try await transport.fetch(TransportRequest(url: url))
            #expect(response.statusCode == 200, "round \(round)")
            let (bytes, _) = try await drain(response.body, comparingTo: content)
            #expect(bytes == content.count, "round \(round)")
            // nginx closes the idle connection after its keep-alive second: the client's end
            // of it is then half closed (CLOSE_WAIT) in the kernel's table, or gone.
            try await waitUntil("nginx to close the idle connection of round \(round)") {
                connectionStates(toPort: server.port)["01", default: 0] == 0
            }
        }
        let requests = await server.waitForRequests(path: "/a.bin", count: 3)
        #expect(requests.map(\.status) == [200, 200, 200])
        #expect(Set(requests.map(\.connection)).count == 3, "\(requests)")
    }

    @Test("an error status is returned, and requireSuccess throws httpStatus", arguments: HTTPTransportKind.allCases)
    func errorStatus(kind: HTTPTransportKind) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try scratch.randomFile("gone.zip", count: 100)
        try await withNginx(root: scratch.url, locations: [.status(410, at: "/gone.zip")]) { server in
            let transport = kind.make()
            let missing = try await transport.fetch(
                TransportRequest(url: server.baseURL.appendingPathComponent("missing.zip"))
            )
            #expect(missing.statusCode == 404)
            #expect(!missing.isSuccess)
            let error = await hotError { try missing.requireSuccess() }
            #expect(error?.code == .httpStatus)
            #expect(error?.message.contains("404") == true)

            let gone = try await transport.fetch(
                TransportRequest(url: server.baseURL.appendingPathComponent("gone.zip"))
            )
            #expect(gone.statusCode == 410)
        }
    }

    @Test("a range resumes from an offset with 206 and the right bytes", arguments: HTTPTransportKind.allCases)
    func rangeResume(kind: HTTPTransportKind) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let content = try scratch.randomFile("file.bin", count: 3 << 20)
        try await withNginx(root: scratch.url) { server in
            let url = server.baseURL.appendingPathComponent("file.bin")
            let transport = kind.make()
            let start = 1_234_567
            let tail = try await transport.fetch(
                TransportRequest(url: url, range: TransportRequest.ByteRange(start: Int64(start)))
            )
            #expect(tail.statusCode == 206)
            #expect(tail.headers["content-range"] == "bytes \(start)-\(content.count - 1)/\(content.count)")
            #expect(tail.expectedContentLength == Int64(content.count - start))
            let (bytes, _) = try await drain(tail.body, comparingTo: content.subdata(in: start..<content.count))
            #expect(bytes == content.count - start)

            let middle = try await transport.fetch(
                TransportRequest(url: url, range: TransportRequest.ByteRange(start: 100, end: 199))
            )
            #expect(middle.statusCode == 206)
            let (middleBytes, _) = try await drain(middle.body, comparingTo: content.subdata(in: 100..<200))
            #expect(middleBytes == 100)
        }
    }

    @Test("a redirect is followed and only the final response is reported", arguments: HTTPTransportKind.allCases)
    func redirects(kind: HTTPTransportKind) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let content = try scratch.randomFile("new.bin", count: 10_000)
        let locations: [NginxServer.Location] = [
            .redirect(from: "/old.bin", to: "/hop.bin", status: 301),
            .redirect(from: "/hop.bin", to: "/new.bin", status: 302),
            .redirect(from: "/loop", to: "/loop"),
        ]
        try await withNginx(root: scratch.url, locations: locations) { server in
            let transport = kind.make()
            let response = try await transport.fetch(
                TransportRequest(url: server.baseURL.appendingPathComponent("old.bin"))
            )
            #expect(response.statusCode == 200)
            #expect(response.url.path == "/new.bin")
            #expect(response.headers["location"] == nil)
            let (bytes, _) = try await drain(response.body, comparingTo: content)
            #expect(bytes == content.count)

            let error = await hotError {
                _ = try await fetchAll(transport, TransportRequest(url: server.baseURL.appendingPathComponent("loop")))
            }
            #expect(error?.code == .transportFailed, "\(error?.detailedDescription() ?? "no error")")
            #expect(error?.message.contains("at most 10 allowed") == true, "\(error?.detailedDescription() ?? "")")
            #expect(server.requestCount(for: "/loop") <= 12)

            // The options' limit, reported alike by every transport.
            let twice = kind.make(options: HTTPTransportOptions(maxRedirects: 2))
            let tooMany = await hotError {
                _ = try await fetchAll(twice, TransportRequest(url: server.baseURL.appendingPathComponent("loop")))
            }
            #expect(tooMany?.code == .transportFailed)
            #expect(tooMany?.message == "too many redirects (3, at most 2 allowed)", "\(tooMany?.message ?? "")")
            let (followed, _) = try await fetchAll(
                twice,
                TransportRequest(url: server.baseURL.appendingPathComponent("old.bin"))
            )
            #expect(followed.statusCode == 200)
        }
    }

    @Test("the options' User-Agent is sent unless the request sets its own", arguments: HTTPTransportKind.allCases)
    func userAgent(kind: HTTPTransportKind) async throws {
        let server = try RawHTTPServer.start(.file(quirk: .none))
        defer { server.stop() }
        server.setBody(Data("agent".utf8))
        _ = try await fetchAll(kind.make(), TransportRequest(url: server.url))
        _ = try await fetchAll(
            kind.make(options: HTTPTransportOptions(userAgent: "Tester/1.0")),
            TransportRequest(url: server.url)
        )
        _ = try await fetchAll(
            kind.make(options: HTTPTransportOptions(userAgent: "Tester/1.0")),
            TransportRequest(url: server.url, headers: ["User-Agent": "Mine/2.0"])
        )
        let agents = server.snapshot.requestHeaders.map { $0["user-agent"] }
        #expect(agents == ["HotUpdate", "Tester/1.0", "Mine/2.0"])
    }

    @Test("the method is sent: HEAD has no body, POST to a static file is 405", arguments: HTTPTransportKind.allCases)
    func methods(kind: HTTPTransportKind) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try scratch.randomFile("file.bin", count: 5000)
        try await withNginx(root: scratch.url) { server in
            let url = server.baseURL.appendingPathComponent("file.bin")
            let transport = kind.make()
            let (head, headBody) = try await fetchAll(transport, TransportRequest(url: url, method: "HEAD"))
            #expect(head.statusCode == 200)
            #expect(head.headers["content-length"] == "5000")
            #expect(headBody.isEmpty)

            let (post, _) = try await fetchAll(
                transport,
                TransportRequest(
                    url: url,
                    method: "POST",
                    headers: ["Content-Type": "application/json"],
                    body: Data("{}".utf8)
                )
            )
            #expect(post.statusCode == 405)
            let methods = await server.waitForRequests(path: "/file.bin", count: 2).map(\.method)
            #expect(methods == ["HEAD", "POST"])
        }
    }

    @Test("a body announced longer than the byte limit is refused", arguments: HTTPTransportKind.allCases)
    func byteLimitAnnounced(kind: HTTPTransportKind) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try scratch.randomFile("file.bin", count: 1 << 20)
        try await withNginx(root: scratch.url) { server in
            let url = server.baseURL.appendingPathComponent("file.bin")
            let error = await hotError {
                _ = try await fetchAll(kind.make(), TransportRequest(url: url, maxBytes: 1000))
            }
            #expect(error?.code == .byteLimitExceeded, "\(error?.detailedDescription() ?? "no error")")
            #expect(error?.message.contains("\(1 << 20)") == true)
        }
    }

    @Test("an endless body without Content-Length stops at the byte limit", arguments: HTTPTransportKind.allCases)
    func byteLimitEndless(kind: HTTPTransportKind) async throws {
        try await withRawServer(.endless(bytesPerSecond: endlessRate)) { server in
            let limit: Int64 = 3 << 20
            var delivered: Int64 = 0
            let error = await hotError {
                let response = try await kind.make().fetch(TransportRequest(url: server.url, maxBytes: limit))
                #expect(response.statusCode == 200)
                #expect(response.expectedContentLength == nil)
                for try await chunk in response.body {
                    #expect(chunk == RawHTTPServer.pattern(offset: delivered, count: chunk.count))
                    delivered += Int64(chunk.count)
                }
            }
            #expect(error?.code == .byteLimitExceeded, "\(error?.detailedDescription() ?? "no error")")
            #expect(delivered <= limit)
            #expect(await server.wait { $0.clientsGone == 1 })
        }
    }

    @Test("a refused connection fails with transportFailed", arguments: HTTPTransportKind.allCases)
    func connectionRefused(kind: HTTPTransportKind) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await NginxServer.start(root: scratch.url)
        let url = server.baseURL.appendingPathComponent("file.bin")
        await server.stop()
        #expect(!server.isRunning)
        let error = await hotError { _ = try await fetchAll(kind.make(), TransportRequest(url: url)) }
        #expect(error?.code == .transportFailed, "\(error?.detailedDescription() ?? "no error")")
        #expect(error?.subject == url.absoluteString)
    }

    @Test("a server that stalls after the headers times out", arguments: HTTPTransportKind.allCases)
    func stallAfterHeaders(kind: HTTPTransportKind) async throws {
        try await withRawServer(.stallAfterHeaders(contentLength: 100_000)) { server in
            let error = await hotError {
                _ = try await fetchAll(kind.make(), TransportRequest(url: server.url, timeouts: stallTimeouts))
            }
            #expect(error?.code == .timedOut, "\(error?.detailedDescription() ?? "no error")")
            #expect(await server.wait { $0.clientsGone == 1 })
        }
    }

    @Test("a server that never answers times out", arguments: HTTPTransportKind.allCases)
    func neverResponds(kind: HTTPTransportKind) async throws {
        try await withRawServer(.neverRespond) { server in
            let error = await hotError {
                _ = try await kind.make().fetch(TransportRequest(url: server.url, timeouts: stallTimeouts))
            }
            #expect(error?.code == .timedOut, "\(error?.detailedDescription() ?? "no error")")
        }
    }

    @Test("a trickle below the low-speed limit times out", arguments: HTTPTransportKind.allCases)
    func slowTrickle(kind: HTTPTransportKind) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try scratch.randomFile("slow/file.bin", count: 1 << 20)
        try await withNginx(root: scratch.url, locations: [.rateLimited(prefix: "/slow/", bytesPerSecond: 200)]) {
            server in
            let url = server.baseURL.appendingPathComponent("slow/file.bin")
            var delivered = 0
            let error = await hotError {
                let response = try await kind.make().fetch(TransportRequest(url: url, timeouts: stallTimeouts))
                for try await chunk in response.body { delivered += chunk.count }
            }
            #expect(error?.code == .timedOut, "\(error?.detailedDescription() ?? "no error")")
            #expect(delivered < 1 << 20)
        }
    }

    @Test("a body shorter than its Content-Length fails with truncated", arguments: HTTPTransportKind.allCases)
    func truncated(kind: HTTPTransportKind) async throws {
        try await withRawServer(.truncated(announced: 100_000, sent: 40_000)) { server in
            var received = Data()
            let error = await hotError {
                let response = try await kind.make().fetch(TransportRequest(url: server.url))
                #expect(response.expectedContentLength == 100_000)
                for try await chunk in response.body { received.append(chunk) }
            }
            #expect(error?.code == .truncated, "\(error?.detailedDescription() ?? "no error")")
            #expect(received == RawHTTPServer.pattern(offset: 0, count: received.count))
            #expect(received.count <= 40_000)
        }
    }

    @Test("cancelling the body stops the transfer at the server", arguments: HTTPTransportKind.allCases)
    func consumerCancels(kind: HTTPTransportKind) async throws {
        try await withRawServer(.endless(bytesPerSecond: endlessRate)) { server in
            let response = try await kind.make().fetch(TransportRequest(url: server.url, maxBytes: endlessLimit))
            var iterator = response.body.makeAsyncIterator()
            for _ in 0..<3 { _ = try await iterator.next() }
            response.body.cancel()
            #expect(await server.wait { $0.clientsGone == 1 })
            let error = await hotError { _ = try await iterator.next() }
            #expect(error?.code == .cancelled)
        }
    }

    @Test("cancelling the consuming task stops the transfer", arguments: HTTPTransportKind.allCases)
    func taskCancels(kind: HTTPTransportKind) async throws {
        try await withRawServer(.endless(bytesPerSecond: endlessRate)) { server in
            let transport = kind.make()
            let started = AsyncStream<Void>.makeStream()
            let consumer = Task {
                let response = try await transport.fetch(TransportRequest(url: server.url, maxBytes: endlessLimit))
                var count = 0
                for try await chunk in response.body {
                    count += chunk.count
                    if count > 0 { started.continuation.yield() }
                }
                return count
            }
            var signals = started.stream.makeAsyncIterator()
            _ = await signals.next()
            consumer.cancel()
            let result = await consumer.result
            #expect(throws: (any Error).self) { try result.get() }
            #expect(await server.wait { $0.clientsGone == 1 })
        }
    }

    @Test("cancelling before the headers arrive ends fetch with cancelled", arguments: HTTPTransportKind.allCases)
    func cancelBeforeHeaders(kind: HTTPTransportKind) async throws {
        try await withRawServer(.neverRespond) { server in
            let transport = kind.make()
            // Generous limits: this test is about cancellation, and a loaded machine may be slow
            // to send the request; no timeout may fire first.
            let patient = TransportRequest.Timeouts(connect: .seconds(600), lowSpeedWindow: .seconds(600))
            let fetching = Task { try await transport.fetch(TransportRequest(url: server.url, timeouts: patient)) }
            #expect(await server.wait(timeout: .seconds(300)) { $0.requestLines.count == 1 })
            fetching.cancel()
            let error = await hotError { _ = try await fetching.value }
            #expect(error?.code == .cancelled, "\(error?.detailedDescription() ?? "no error")")
            #expect(await server.wait { $0.clientsGone == 1 })
        }
    }

    @Test(
        "a consumer that stops reading holds the server back, and the stream stays in order",
        arguments: HTTPTransportKind.allCases.filter(\.holdsTransfersBack)
    )
    func backpressure(kind: HTTPTransportKind) async throws {
        try await withRawServer(.endless(bytesPerSecond: endlessRate)) { server in
            let response = try await kind.make().fetch(TransportRequest(url: server.url, maxBytes: endlessLimit))
            var iterator = response.body.makeAsyncIterator()
            var offset: Int64 = 0
            let first = try #require(try await iterator.next())
            #expect(first == RawHTTPServer.pattern(offset: 0, count: first.count))
            offset += Int64(first.count)

            // The consumer now reads nothing: the server must end up unable to write.
            #expect(await server.wait { $0.writerBlocked })
            let sentWhileBlocked = server.snapshot.bodyBytesSent
            #expect(sentWhileBlocked < 256 << 20)

            // Reading again resumes the transfer where it stopped.
            while offset < sentWhileBlocked + (4 << 20) {
                let chunk = try #require(try await iterator.next())
                #expect(chunk == RawHTTPServer.pattern(offset: offset, count: chunk.count))
                offset += Int64(chunk.count)
            }
            response.body.cancel()
            #expect(await server.wait { $0.clientsGone == 1 })
        }
    }

    @Test("a URL that is not http(s) is refused with invalidArgument", arguments: HTTPTransportKind.allCases)
    func wrongScheme(kind: HTTPTransportKind) async throws {
        let url = try #require(URL(string: "ftp://127.0.0.1/file.bin"))
        let error = await hotError { _ = try await kind.make().fetch(TransportRequest(url: url)) }
        #expect(error?.code == .invalidArgument)
    }
}

/// The TCP connections of this machine to 127.0.0.1:`port`, counted by state as the kernel's
/// table writes it: `01` ESTABLISHED, `08` CLOSE_WAIT (the server closed its end).
///
/// The transports open one connection at a time here, so an established one is the one kept
/// alive for the next request.
private func connectionStates(toPort port: Int) -> [String: Int] {
    // Read to the end: procfs files report no size, and a read sized by it stops at a page.
    let descriptor = open("/proc/net/tcp", O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return [:] }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { break }
        bytes += buffer[0..<count]
    }
    let table = String(decoding: bytes, as: UTF8.self)
    let remote = String(format: "0100007F:%04X", port)
    var states: [String: Int] = [:]
    // "sl local_address rem_address st …"
    for line in table.split(separator: "\n").dropFirst() {
        let fields = line.split(separator: " ")
        if fields.count > 3, fields[2] == remote { states[String(fields[3]), default: 0] += 1 }
    }
    return states
}
