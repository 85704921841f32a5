import Foundation
import HotCore
import HotTransport
import Testing

@Suite("FileTransport")
struct FileTransportTests {
    @Test("a whole file streams in chunks of the chosen size")
    func wholeFile() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let content = try scratch.randomFile("package.zip", count: 1_000_000)
        let transport = FileTransport(chunkSize: 256 << 10)
        let response = try await transport.fetch(
            TransportRequest(url: scratch.url.appendingPathComponent("package.zip"))
        )
        #expect(response.statusCode == 200)
        #expect(response.expectedContentLength == 1_000_000)
        #expect(response.headers["content-length"] == "1000000")
        var sizes: [Int] = []
        var data = Data()
        for try await chunk in response.body {
            sizes.append(chunk.count)
            data.append(chunk)
        }
        #expect(data == content)
        #expect(sizes == [262_144, 262_144, 262_144, 213_568])
    }

    @Test("a range returns 206 with the right bytes; past the end 416")
    func range() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let content = try scratch.randomFile("file.bin", count: 10_000)
        let url = scratch.url.appendingPathComponent("file.bin")
        let transport = FileTransport()

        let (tail, tailBytes) = try await fetchAll(
            transport,
            TransportRequest(url: url, range: TransportRequest.ByteRange(start: 7_000))
        )
        #expect(tail.statusCode == 206)
        #expect(tail.headers["content-range"] == "bytes 7000-9999/10000")
        #expect(tailBytes == content.subdata(in: 7_000..<10_000))

        let (middle, middleBytes) = try await fetchAll(
            transport,
            TransportRequest(url: url, range: TransportRequest.ByteRange(start: 10, end: 19))
        )
        #expect(middle.statusCode == 206)
        #expect(middle.expectedContentLength == 10)
        #expect(middleBytes == content.subdata(in: 10..<20))

        let (past, pastBytes) = try await fetchAll(
            transport,
            TransportRequest(url: url, range: TransportRequest.ByteRange(start: 10_000))
        )
        #expect(past.statusCode == 416)
        #expect(past.headers["content-range"] == "bytes */10000")
        #expect(pastBytes.isEmpty)
    }

    @Test("a missing file or a directory answers 404, like a web server")
    func missing() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let transport = FileTransport()
        let missing = try await transport.fetch(TransportRequest(url: scratch.url.appendingPathComponent("nope.zip")))
        #expect(missing.statusCode == 404)
        #expect(await hotError { try missing.requireSuccess() }?.code == .httpStatus)
        let directory = try await transport.fetch(TransportRequest(url: scratch.url))
        #expect(directory.statusCode == 404)
    }

    @Test("a file larger than the byte limit is refused")
    func byteLimit() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try scratch.randomFile("big.bin", count: 5000)
        let url = scratch.url.appendingPathComponent("big.bin")
        let error = await hotError { _ = try await FileTransport().fetch(TransportRequest(url: url, maxBytes: 4999)) }
        #expect(error?.code == .byteLimitExceeded)
        #expect(error?.subject == url.absoluteString)
        let (_, exact) = try await fetchAll(FileTransport(), TransportRequest(url: url, maxBytes: 5000))
        #expect(exact.count == 5000)
        // The limit applies to the bytes sent: a range within it passes.
        let (_, part) = try await fetchAll(
            FileTransport(),
            TransportRequest(url: url, range: TransportRequest.ByteRange(start: 4000), maxBytes: 1000)
        )
        #expect(part.count == 1000)
    }

    @Test("an http URL is refused with invalidArgument")
    func wrongScheme() async throws {
        let url = try #require(URL(string: "http://127.0.0.1/file.bin"))
        let error = await hotError { _ = try await FileTransport().fetch(TransportRequest(url: url)) }
        #expect(error?.code == .invalidArgument)
        let bundleURL = try #require(URL(string: "bundle:///file.bin"))
        let noRoot = await hotError { _ = try await FileTransport().fetch(TransportRequest(url: bundleURL)) }
        #expect(noRoot?.code == .invalidArgument)
    }

    @Test("bundle: URLs resolve inside the bundle root and never outside it")
    func bundleURLs() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let content = try scratch.randomFile("Bundle/packages/ui.zip", count: 3000)
        try scratch.randomFile("secret.txt", count: 10)
        let transport = FileTransport(bundleRoot: scratch.url.appendingPathComponent("Bundle"))
        let (response, data) = try await fetchAll(
            transport,
            TransportRequest(url: try #require(URL(string: "bundle:///packages/ui.zip")))
        )
        #expect(response.statusCode == 200)
        #expect(data == content)
        let escape = try #require(URL(string: "bundle:///../secret.txt"))
        let error = await hotError { _ = try await transport.fetch(TransportRequest(url: escape)) }
        #expect(error?.code == .invalidArgument)
        let missing = try await transport.fetch(TransportRequest(url: try #require(URL(string: "bundle:///nope.zip"))))
        #expect(missing.statusCode == 404)
    }

    @Test("cancelling the body stops the reader")
    func cancel() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try scratch.randomFile("big.bin", count: 4 << 20)
        let response = try await FileTransport(chunkSize: 4096).fetch(
            TransportRequest(url: scratch.url.appendingPathComponent("big.bin"))
        )
        var iterator = response.body.makeAsyncIterator()
        #expect(try await iterator.next()?.count == 4096)
        response.body.cancel()
        #expect(await hotError { _ = try await iterator.next() }?.code == .cancelled)
    }
}
