import Foundation
import HotCore
import HotTestServers
import HotTesting
import HotTransport
import Testing

/// The HTTP transports every HTTP test runs against.
enum HTTPTransportKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    #if Curl && canImport(CHotCurl)
    case curl
    #endif
    case urlSession

    var testDescription: String { rawValue }

    func make(options: HTTPTransportOptions = HTTPTransportOptions()) -> any Transport {
        switch self {
        #if Curl && canImport(CHotCurl)
        case .curl: CurlTransport(options: options)
        #endif
        case .urlSession: URLSessionTransport(options: options)
        }
    }

    /// FoundationNetworking (Linux) reads a body as fast as the network allows whatever
    /// the delegate does, so a transport over it cannot hold a transfer back.
    var holdsTransfersBack: Bool {
        #if canImport(FoundationNetworking)
        return self != .urlSession
        #else
        return true
        #endif
    }
}

/// A fresh directory for one test, removed by ``remove()``.
struct Scratch {
    let url: URL

    init() throws {
        url = try ScratchDirectory.make("HotTransportTests")
    }

    /// Writes `count` random bytes to `name` (subdirectories created) and returns them.
    @discardableResult
    func randomFile(_ name: String, count: Int) throws -> Data {
        let data = try randomBytes(count)
        let file = url.appendingPathComponent(name)
        try FileManager.default.createDirectory(
            at: file.deletingLastPathComponent(),
            withIntermediateDirectories: true
        )
        try data.write(to: file)
        return data
    }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

func randomBytes(_ count: Int) throws -> Data {
    let source = try #require(FileHandle(forReadingAtPath: "/dev/urandom"))
    defer { try? source.close() }
    var data = Data()
    while data.count < count {
        data.append(try #require(try source.read(upToCount: count - data.count)))
    }
    return data
}

/// Runs `body` against a real nginx serving `root`, and stops nginx afterwards.
func withNginx<T>(
    root: URL,
    locations: [NginxServer.Location] = [],
    _ body: (NginxServer) async throws -> T
) async throws -> T {
    let server: NginxServer
    do {
        server = try await NginxServer.start(root: root, options: .init(locations: locations))
    } catch let error as HotUpdateError where error.code == .notFound {
        Issue.record("\(error.message)")
        throw error
    }
    do {
        let result = try await body(server)
        await server.stop()
        return result
    } catch {
        await server.stop()
        throw error
    }
}

/// Runs `body` against a misbehaving server, and stops it afterwards.
func withRawServer<T>(
    _ behavior: RawHTTPServer.Behavior,
    _ body: (RawHTTPServer) async throws -> T
) async throws -> T {
    let server = try RawHTTPServer.start(behavior)
    defer { server.stop() }
    return try await body(server)
}

/// The error `operation` throws as a ``HotUpdateError`` (`CancellationError` as `.cancelled`),
/// or nil when it does not throw.
func hotError(_ operation: () async throws -> Void) async -> HotUpdateError? {
    do {
        try await operation()
        return nil
    } catch let error as HotUpdateError {
        return error
    } catch {
        // CancellationError becomes .cancelled; anything else shows up as a wrong code.
        return HotUpdateError.wrap(error, as: .internalInconsistency, "not a HotUpdateError")
    }
}

/// Reads a whole body, checking each chunk against `expected` as it arrives.
/// Returns the number of bytes and of chunks.
func drain(_ body: ByteStream, comparingTo expected: Data? = nil) async throws -> (bytes: Int, chunks: Int) {
    var offset = 0
    var chunks = 0
    for try await chunk in body {
        if let expected {
            let end = offset + chunk.count
            try #require(end <= expected.count, "the body is longer than \(expected.count) bytes")
            let matches = expected[(expected.startIndex + offset)..<(expected.startIndex + end)].elementsEqual(chunk)
            try #require(matches, "bytes \(offset)..<\(end) differ")
        }
        offset += chunk.count
        chunks += 1
    }
    return (offset, chunks)
}

/// Fetches and reads the whole body: the way an engine would, so errors surface wherever
/// the transport raises them (before the headers or while streaming).
func fetchAll(_ transport: any Transport, _ request: TransportRequest) async throws -> (TransportResponse, Data) {
    let response = try await transport.fetch(request)
    var data = Data()
    for try await chunk in response.body { data.append(chunk) }
    return (response, data)
}

/// Short timeouts for the stall scenarios: one-second windows.
let stallTimeouts = TransportRequest.Timeouts(
    connect: .seconds(5),
    lowSpeedWindow: .seconds(1),
    lowSpeedBytesPerSecond: 1000,
    total: .seconds(60)
)

/// How fast the endless server sends: fast enough for every scenario, slow enough that a
/// transport that reads ahead regardless of its consumer (FoundationNetworking) does not
/// flood a shared machine before a cancellation takes effect.
let endlessRate = 32 << 20

/// The byte limit of requests to an endless body: a transport that cannot hold a transfer
/// back (FoundationNetworking) buffers what arrives, and this bounds it.
let endlessLimit: Int64 = 256 << 20
