import Foundation
import HotCore

/// The conformance suite of `Transport`, through its public API.
///
/// The suite fetches a fixed set of files (``fixtures``) from a server the caller names:
/// - ``init(serve:makeTransport:)``: each check writes the fixtures into a fresh directory
///   and asks a ``Serve`` to serve it, then fetches from the base URL returned.
///   ``fileURLs`` serves it as `file://` URLs; HotTestServers' `TransportConformance.nginx`
///   serves it with nginx on 127.0.0.1; any server of yours that serves a directory will do.
/// - ``init(baseURL:makeTransport:)``: a server already serves the fixtures (written once with
///   ``writeFixtures(to:)``, uploaded wherever the transport fetches from) at a base URL.
///
/// The checks, each a ``ConformanceCheck``:
/// - a whole file arrives byte-identical with status 200 (an empty file too), with the
///   announced length, if any, equal to the size;
/// - byte ranges (`start-end`, `start-`, the last byte) answer 206 with exactly those bytes;
/// - a missing file is a 404 status, not a throw, and `TransportResponse.requireSuccess()`
///   then throws `HotUpdateError.Code.httpStatus`;
/// - `TransportRequest.maxBytes` is enforced: more bytes fail with
///   `HotUpdateError.Code.byteLimitExceeded` (from `fetch` or from the body) and no more than
///   the limit is ever delivered, while exactly the limit passes;
/// - a large body arrives in several chunks, never more than its size;
/// - cancelling the body (`ByteStream.cancel()`) or the consuming task ends the iteration
///   before the whole body, and a fetch by a task already cancelled fails or ends.
///
/// ```swift
/// let local = TransportConformance(serve: TransportConformance.fileURLs) { MyTransport() }
/// let remote = TransportConformance(baseURL: URL(string: "https://test.example.com/fixtures/")!) {
///     MyTransport()
/// }
/// ```
public struct TransportConformance: Sendable {
    /// A directory being served, and how to stop serving it.
    public struct Server: Sendable {
        /// The URL of the served directory; fixture `name` is fetched at `baseURL/name`.
        public var baseURL: URL
        /// Stops serving.
        public var stop: @Sendable () async -> Void

        /// Creates a server description.
        public init(baseURL: URL, stop: @escaping @Sendable () async -> Void = {}) {
            self.baseURL = baseURL
            self.stop = stop
        }
    }

    /// Serves a directory the suite has filled.
    public typealias Serve = @Sendable (_ directory: URL) async throws -> Server

    /// Serves the directory as `file://` URLs.
    public static let fileURLs: Serve = { directory in Server(baseURL: directory) }

    /// Makes the transport under test.
    public let makeTransport: @Sendable () -> any Transport
    /// Serves the fixture directory.
    public let serve: Serve
    /// Whether each check writes the fixtures for ``serve`` (false when they are already served).
    private let writesFixtures: Bool

    /// Creates the suite over a server each check starts.
    ///
    /// - Parameters:
    ///   - serve: Serves the fixture directory of a check and returns its URL.
    ///   - makeTransport: Makes the transport under test; called once per check.
    public init(serve: @escaping Serve, makeTransport: @escaping @Sendable () -> any Transport) {
        self.serve = serve
        self.makeTransport = makeTransport
        self.writesFixtures = true
    }

    /// Creates the suite over a server that already serves the ``fixtures``.
    ///
    /// - Parameters:
    ///   - baseURL: Where the server serves them: fixture `name` is fetched at `baseURL/name`,
    ///     and `baseURL/missing.bin` must not exist.
    ///   - makeTransport: Makes the transport under test; called once per check.
    public init(baseURL: URL, makeTransport: @escaping @Sendable () -> any Transport) {
        self.serve = { _ in Server(baseURL: baseURL) }
        self.makeTransport = makeTransport
        self.writesFixtures = false
    }

    static let suite = "Transport"

    /// The fixture files.
    static let small = Conformance.bytes(10_000, seed: 21)
    static let large = Conformance.bytes(6 << 20, seed: 22)

    /// The files the checks fetch, by name: `small.bin` (10,000 bytes), `large.bin` (6 MiB)
    /// and `empty.bin` (no bytes), with contents the same in every run. The checks also fetch
    /// `missing.bin`, which must not exist.
    public static var fixtures: [String: [UInt8]] {
        ["small.bin": small, "large.bin": large, "empty.bin": []]
    }

    /// Writes the ``fixtures`` into `directory`, for a server that ``init(baseURL:makeTransport:)``
    /// then fetches from.
    ///
    /// - Throws: The file system's error when a file cannot be written.
    public static func writeFixtures(to directory: URL) throws {
        for (name, content) in fixtures.sorted(by: { $0.key < $1.key }) {
            try Conformance.write(content, name, under: directory)
        }
    }

    /// Every check of the suite.
    public var checks: [ConformanceCheck] {
        [
            check(
                "whole body byte-identical",
                "a file arrives whole and byte-identical with status 200; an empty file too"
            ) {
                transport,
                base in
                for (name, content) in [("small.bin", Self.small), ("large.bin", Self.large), ("empty.bin", [])] {
                    let response = try await transport.fetch(TransportRequest(url: base.appendingPathComponent(name)))
                    try Conformance.require(
                        response.statusCode == 200,
                        "\(name) answered \(response.statusCode), not 200"
                    )
                    if let length = response.expectedContentLength {
                        try Conformance.require(
                            length == Int64(content.count),
                            "\(name) announces \(length) bytes, not \(content.count)"
                        )
                    }
                    let body = try await Self.read(response.body)
                    try Conformance.require(
                        body.bytes == content,
                        "\(name): \(body.bytes.count) bytes arrived, \(content.count) sent; "
                            + (body.bytes.count == content.count ? "they differ" : "the lengths differ")
                    )
                }
            },
            check("byte ranges", "a range request answers 206 with exactly the bytes asked for") { transport, base in
                let url = base.appendingPathComponent("small.bin")
                let count = Int64(Self.small.count)
                for range in [
                    TransportRequest.ByteRange(start: 100, end: 1099), TransportRequest.ByteRange(start: 4000),
                    TransportRequest.ByteRange(start: count - 1, end: count - 1),
                ] {
                    let response = try await transport.fetch(TransportRequest(url: url, range: range))
                    try Conformance.require(
                        response.statusCode == 206,
                        "range \(range.headerValue) answered \(response.statusCode), not 206"
                    )
                    let expected = Array(Self.small[Int(range.start)...Int(range.end ?? count - 1)])
                    let body = try await Self.read(response.body)
                    try Conformance.require(
                        body.bytes == expected,
                        "range \(range.headerValue) delivered \(body.bytes.count) bytes, expected \(expected.count) from offset \(range.start)"
                    )
                }
            },
            check(
                "missing file is a 404 status",
                "a missing file answers status 404 without throwing; requireSuccess() then throws httpStatus"
            ) {
                transport,
                base in
                let response = try await transport.fetch(
                    TransportRequest(url: base.appendingPathComponent("missing.bin"))
                )
                try Conformance.require(
                    response.statusCode == 404,
                    "a missing file answered \(response.statusCode), not 404"
                )
                try Conformance.require(!response.isSuccess, "a 404 response reports isSuccess")
                try await Conformance.expectError([.httpStatus], "requireSuccess() of a 404") {
                    try response.requireSuccess()
                }
            },
            check(
                "byte limit enforced",
                "a body over maxBytes fails with byteLimitExceeded and never delivers more than the limit; exactly the limit passes"
            ) {
                transport,
                base in
                let url = base.appendingPathComponent("large.bin")
                for limit in [Int64(1000), Int64(Self.large.count - 1)] {
                    var delivered = 0
                    try await Conformance.expectError([.byteLimitExceeded], "a fetch with maxBytes \(limit)") {
                        let response = try await transport.fetch(TransportRequest(url: url, maxBytes: limit))
                        for try await chunk in response.body {
                            delivered += chunk.count
                        }
                        return "status \(response.statusCode), \(delivered) bytes"
                    }
                    try Conformance.require(
                        Int64(delivered) <= limit,
                        "\(delivered) bytes were delivered under a limit of \(limit)"
                    )
                }
                let response = try await transport.fetch(
                    TransportRequest(url: base.appendingPathComponent("small.bin"), maxBytes: Int64(Self.small.count))
                )
                let body = try await Self.read(response.body)
                try Conformance.require(body.bytes == Self.small, "a body of exactly maxBytes did not arrive whole")
            },
            check("body streams in chunks", "a large body arrives as several chunks while it downloads, not as one") {
                transport,
                base in
                let response = try await transport.fetch(
                    TransportRequest(url: base.appendingPathComponent("large.bin"))
                )
                let body = try await Self.read(response.body)
                try Conformance.require(body.bytes == Self.large, "the large file did not arrive byte-identical")
                try Conformance.require(
                    body.chunks > 1,
                    "\(Self.large.count) bytes arrived as \(body.chunks) chunk(s)"
                )
            },
            check("cancelling the body ends it", "after ByteStream.cancel() the iteration ends before the whole body") {
                transport,
                base in
                let response = try await transport.fetch(
                    TransportRequest(url: base.appendingPathComponent("large.bin"))
                )
                let received = try await Conformance.withHangGuard("the body after cancel()") {
                    var received = 0
                    do {
                        for try await chunk in response.body {
                            received += chunk.count
                            if received > 0 { response.body.cancel() }
                        }
                    } catch is CancellationError {
                    } catch let error as HotUpdateError where error.code == .cancelled {
                    }
                    return received
                }
                try Conformance.require(
                    received < Self.large.count,
                    "the whole body (\(received) bytes) arrived after cancel()"
                )
            },
            check(
                "cancelling the task ends the body",
                "cancelling the task that reads the body ends the iteration before the whole body"
            ) {
                transport,
                base in
                let url = base.appendingPathComponent("large.bin")
                let firstChunk = AsyncStream<Void>.makeStream()
                let reader = Task { () -> (Int, (any Error)?) in
                    var received = 0
                    do {
                        let response = try await transport.fetch(TransportRequest(url: url))
                        for try await chunk in response.body {
                            received += chunk.count
                            firstChunk.continuation.yield()
                            while !Task.isCancelled { await Task.yield() }
                        }
                        return (received, nil)
                    } catch {
                        return (received, error)
                    }
                }
                for await _ in firstChunk.stream { break }
                reader.cancel()
                let (received, error) = try await Conformance.withHangGuard("the body after the task was cancelled") {
                    await reader.value
                }
                try Conformance.require(
                    received < Self.large.count,
                    "the whole body (\(received) bytes) arrived to a cancelled task"
                )
                if let error {
                    let typed = error is CancellationError || (error as? HotUpdateError)?.code == .cancelled
                    try Conformance.require(
                        typed,
                        "the cancelled body threw \(error), not CancellationError or cancelled"
                    )
                }
            },
        ]
    }

    private func check(
        _ name: String,
        _ contract: String,
        _ body: @escaping @Sendable (any Transport, URL) async throws -> Void
    ) -> ConformanceCheck {
        let make = makeTransport
        let serve = serve
        let writesFixtures = writesFixtures
        return ConformanceCheck(suite: Self.suite, name: name, contract: contract) {
            try await Conformance.withScratch(Self.suite) { directory in
                if writesFixtures { try Self.writeFixtures(to: directory) }
                let server = try await serve(directory)
                do {
                    try await body(make(), server.baseURL)
                } catch {
                    await server.stop()
                    throw error
                }
                await server.stop()
            }
        }
    }

    /// Reads a whole body, counting its chunks.
    static func read(_ body: ByteStream) async throws -> (bytes: [UInt8], chunks: Int) {
        var bytes: [UInt8] = []
        var chunks = 0
        for try await chunk in body {
            bytes.append(contentsOf: chunk)
            chunks += 1
        }
        return (bytes, chunks)
    }
}
