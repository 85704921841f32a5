#if os(Linux) || os(macOS)
import Foundation
import HotCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A tiny HTTP/1.1 server on `127.0.0.1` that misbehaves on purpose, for the
/// scenarios nginx cannot produce: a body shorter than its `Content-Length`, a body
/// that never ends, a server that stalls after the headers or never answers.
///
/// It runs on threads of the test process, so it never outlives it. Every
/// connection gets the same ``Behavior``; bodies are a fixed pattern
/// (``patternByte(at:)``) so a client can check the bytes it got.
///
/// ```swift
/// let server = try RawHTTPServer.start(.truncated(announced: 1000, sent: 400))
/// defer { server.stop() }
/// let response = try await transport.fetch(TransportRequest(url: server.url))
/// // iterating response.body throws .truncated
/// ```
public final class RawHTTPServer: @unchecked Sendable {
    /// What the server does with every connection once it has read the request.
    public enum Behavior: Sendable, Hashable {
        /// Announces `announced` bytes, sends the first `sent` of them, and closes the connection.
        case truncated(announced: Int, sent: Int)
        /// Sends `200 OK` without `Content-Length` and a body that never ends, until the client
        /// goes; at most `bytesPerSecond` when given, else as fast as the client reads.
        case endless(bytesPerSecond: Int? = nil)
        /// Sends `200 OK` (with `Content-Length` when given) and then nothing, until the client goes.
        case stallAfterHeaders(contentLength: Int?)
        /// Accepts the connection, reads the request, and never answers.
        case neverRespond
        /// Serves the body set with ``setBody(_:)`` (empty at first) with a strong `ETag` that
        /// changes with every new body, honouring `Range`, `If-Range` and `If-Match` except
        /// where `quirk` says otherwise; ``cutNextResponse(after:)`` cuts the next body short.
        case file(quirk: FileQuirk)
    }

    /// How a ``Behavior/file(quirk:)`` server departs from HTTP's rules for ranges.
    public enum FileQuirk: Sendable, Hashable {
        /// Follows them: a range of the current version is a `206`, `If-Range` with another
        /// tag sends the whole file, `If-Match` with another tag is a `412`.
        case none
        /// Answers every request with `200` and the whole file, ranges included.
        case ignoresRange
        /// Sends the range asked for whatever `If-Range` says (as S3 does); still honours `If-Match`.
        case ignoresIfRange
    }

    /// What the server has seen so far.
    public struct Snapshot: Sendable, Hashable {
        /// Connections accepted.
        public var connections: Int
        /// Connections that ended because the client closed or reset them.
        public var clientsGone: Int
        /// Body bytes written to sockets, over all connections.
        public var bodyBytesSent: Int64
        /// Whether a write has waited, at least once, because the client stopped reading
        /// (the socket's buffers stayed full for a quarter of a second).
        public var writerBlocked: Bool
        /// The request lines received, such as `GET /body HTTP/1.1`.
        public var requestLines: [String]
        /// The headers of each request, names in lowercase, in the order received.
        public var requestHeaders: [[String: String]] = []
        /// The status of each response a ``Behavior/file(quirk:)`` server sent.
        public var statuses: [Int] = []
    }

    /// The address the server listens on, such as `http://127.0.0.1:40123/`.
    public let baseURL: URL
    /// A URL on the server; every path gets the same behaviour.
    public var url: URL { baseURL.appendingPathComponent("body") }
    /// What every connection gets.
    public let behavior: Behavior

    private let listener: Int32
    private let lock = NSLock()
    private var state = Snapshot(
        connections: 0,
        clientsGone: 0,
        bodyBytesSent: 0,
        writerBlocked: false,
        requestLines: []
    )
    private var stopped = false
    private var fileBody = Data()
    private var fileVersion = 1
    private var cutAfter: Int?

    private init(listener: Int32, port: Int, behavior: Behavior) {
        self.listener = listener
        self.behavior = behavior
        self.baseURL = URL(string: "http://127.0.0.1:\(port)/") ?? URL(fileURLWithPath: "/")
    }

    deinit { stop() }

    /// Starts a server on a free port of `127.0.0.1`; it accepts connections when this returns.
    ///
    /// - Parameter behavior: What every connection gets.
    /// - Returns: The running server.
    /// - Throws: `HotUpdateError.Code.transportFailed` when no socket can be bound.
    public static func start(_ behavior: Behavior) throws -> RawHTTPServer {
        let fd = socket(AF_INET, LoopbackSocketType.streamCloseOnExec, 0)
        guard fd >= 0 else { throw HotUpdateError(.transportFailed, "cannot create a socket: \(errnoText())") }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        var address = NginxServer.loopbackAddress(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard ok else {
            let reason = errnoText()
            close(fd)
            throw HotUpdateError(.transportFailed, "cannot listen on 127.0.0.1: \(reason)")
        }
        let server = RawHTTPServer(listener: fd, port: Int(UInt16(bigEndian: address.sin_port)), behavior: behavior)
        let thread = Thread { [server] in server.acceptLoop() }
        thread.name = "RawHTTPServer accept"
        thread.start()
        return server
    }

    /// Stops accepting and ends every connection within a fraction of a second. Safe to call more than once.
    public func stop() {
        lock.lock()
        stopped = true
        lock.unlock()
    }

    /// What the server has seen so far.
    public var snapshot: Snapshot {
        lock.lock()
        defer { lock.unlock() }
        return state
    }

    /// Waits until `condition` holds for the server's ``snapshot``, or `timeout` passes.
    ///
    /// - Parameters:
    ///   - timeout: The longest wait.
    ///   - condition: What to wait for.
    /// - Returns: Whether the condition held.
    public func wait(
        timeout: Duration = .seconds(20),
        until condition: @Sendable (Snapshot) -> Bool
    ) async -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while !condition(snapshot) {
            if clock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// Replaces the file a ``Behavior/file(quirk:)`` server serves; its `ETag` changes.
    public func setBody(_ data: Data) {
        lock.lock()
        fileBody = data
        fileVersion += 1
        lock.unlock()
    }

    /// The `ETag` of the file a ``Behavior/file(quirk:)`` server serves now.
    public var entityTag: String {
        lock.lock()
        defer { lock.unlock() }
        return "\"v\(fileVersion)-\(fileBody.count)\""
    }

    /// Makes the next response of a ``Behavior/file(quirk:)`` server close its connection after
    /// `bytes` bytes of its body, as a network that drops does.
    public func cutNextResponse(after bytes: Int) {
        lock.lock()
        cutAfter = bytes
        lock.unlock()
    }

    /// The byte at `offset` of every body this server sends.
    public static func patternByte(at offset: Int64) -> UInt8 {
        UInt8(truncatingIfNeeded: (offset % 251) &+ (offset / 251) % 7)
    }

    /// One period of the pattern: it repeats every 251 × 7 bytes.
    private static let patternPeriod: [UInt8] = (0..<Int64(251 * 7)).map { patternByte(at: $0) }

    /// `count` bytes of the body pattern, starting at `offset`.
    public static func pattern(offset: Int64, count: Int) -> Data {
        var data = Data(capacity: count)
        var position = Int(offset % Int64(patternPeriod.count))
        while data.count < count {
            let take = min(count - data.count, patternPeriod.count - position)
            data.append(contentsOf: patternPeriod[position..<position + take])
            position = 0
        }
        return data
    }

    // MARK: - Serving

    private var isStopped: Bool {
        lock.lock()
        defer { lock.unlock() }
        return stopped
    }

    private func record(_ change: (inout Snapshot) -> Void) {
        lock.lock()
        change(&state)
        lock.unlock()
    }

    private func acceptLoop() {
        defer { close(listener) }
        while !isStopped {
            var entry = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
            #if canImport(Darwin)
            var one: Int32 = 1
            _ = setsockopt(client, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
            #endif
            record { $0.connections += 1 }
            let thread = Thread { [self] in
                serve(client)
                close(client)
            }
            thread.name = "RawHTTPServer connection"
            thread.start()
        }
    }

    private enum Outcome {
        case ok
        case clientGone
        case stopped
    }

    private func serve(_ fd: Int32) {
        guard case .ok = readRequest(fd) else { return finish(.clientGone) }
        switch behavior {
        case .file(let quirk):
            serveFile(fd, quirk: quirk)
        case .truncated(let announced, let sent):
            let head =
                "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                + "Content-Length: \(announced)\r\nConnection: close\r\n\r\n"
            guard case .ok = send(fd, Data(head.utf8), body: false) else { return finish(.clientGone) }
            let outcome = send(fd, Self.pattern(offset: 0, count: min(sent, announced)), body: true)
            shutdown(fd, Int32(SHUT_WR))
            finish(outcome)
        case .endless(let bytesPerSecond):
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n"
            guard case .ok = send(fd, Data(head.utf8), body: false) else { return finish(.clientGone) }
            var offset: Int64 = 0
            let chunk = 64 << 10
            let started = ContinuousClock.now
            while true {
                let outcome = send(fd, Self.pattern(offset: offset, count: chunk), body: true)
                guard case .ok = outcome else { return finish(outcome) }
                offset += Int64(chunk)
                if let bytesPerSecond, bytesPerSecond > 0 {
                    // Sleep until the average rate is back under the limit.
                    let due = Duration.seconds(Double(offset) / Double(bytesPerSecond))
                    let ahead = due - (ContinuousClock.now - started)
                    if ahead > .zero {
                        let (seconds, attoseconds) = ahead.components
                        usleep(UInt32(min(Int64(seconds) * 1_000_000 + attoseconds / 1_000_000_000_000, 1_000_000)))
                    }
                }
            }
        case .stallAfterHeaders(let contentLength):
            var head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
            if let contentLength { head += "Content-Length: \(contentLength)\r\n" }
            head += "Connection: close\r\n\r\n"
            guard case .ok = send(fd, Data(head.utf8), body: false) else { return finish(.clientGone) }
            finish(holdUntilClientGoes(fd))
        case .neverRespond:
            finish(holdUntilClientGoes(fd))
        }
    }

    /// Answers the last request recorded with the file, as `quirk` allows.
    private func serveFile(_ fd: Int32, quirk: FileQuirk) {
        lock.lock()
        let body = fileBody
        let etag = "\"v\(fileVersion)-\(fileBody.count)\""
        let cut = cutAfter
        cutAfter = nil
        let request = state.requestHeaders.last ?? [:]
        lock.unlock()

        var status = 200
        var slice = 0..<body.count
        var extra = ""
        if quirk != .ignoresRange, let condition = request["if-match"], condition != "*", condition != etag {
            status = 412
            slice = 0..<0
        } else if quirk != .ignoresRange, let range = request["range"], let start = Self.rangeStart(range),
            quirk == .ignoresIfRange || request["if-range"] == nil || request["if-range"] == etag
        {
            if start >= body.count {
                status = 416
                slice = 0..<0
                extra = "Content-Range: bytes */\(body.count)\r\n"
            } else {
                status = 206
                slice = start..<body.count
                extra = "Content-Range: bytes \(start)-\(body.count - 1)/\(body.count)\r\n"
            }
        }
        record { $0.statuses.append(status) }
        let reason = [200: "OK", 206: "Partial Content", 412: "Precondition Failed", 416: "Range Not Satisfiable"]
        let head =
            "HTTP/1.1 \(status) \(reason[status] ?? "OK")\r\nContent-Type: application/octet-stream\r\n"
            + "Content-Length: \(slice.count)\r\nETag: \(etag)\r\nAccept-Ranges: bytes\r\n\(extra)"
            + "Connection: close\r\n\r\n"
        guard case .ok = send(fd, Data(head.utf8), body: false) else { return finish(.clientGone) }
        let sent = cut.map { slice.lowerBound..<min(slice.upperBound, slice.lowerBound + $0) } ?? slice
        let outcome = send(fd, body.subdata(in: sent), body: true)
        shutdown(fd, Int32(SHUT_WR))
        finish(outcome)
    }

    /// The first byte of a `bytes=START-` or `bytes=START-END` range.
    private static func rangeStart(_ value: String) -> Int? {
        let text = value.trimmingCharacters(in: .whitespaces)
        guard text.hasPrefix("bytes=") else { return nil }
        return text.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false).first.flatMap { Int($0) }
    }

    private func finish(_ outcome: Outcome) {
        if case .clientGone = outcome { record { $0.clientsGone += 1 } }
    }

    /// Reads the request head (up to the blank line) and records its first line.
    private func readRequest(_ fd: Int32) -> Outcome {
        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        let terminator = Data("\r\n\r\n".utf8)
        while received.range(of: terminator) == nil {
            guard received.count < 64 << 10 else { return .clientGone }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if isStopped { return .stopped }
            guard poll(&entry, 1, 100) > 0 else { continue }
            let count = recv(fd, &buffer, buffer.count, 0)
            if count > 0 {
                received.append(contentsOf: buffer[0..<count])
            } else if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return .clientGone
            }
        }
        let lines = String(decoding: received, as: UTF8.self).components(separatedBy: "\r\n")
        let line = lines.first ?? ""
        var headers: [String: String] = [:]
        for header in lines.dropFirst() {
            guard let colon = header.firstIndex(of: ":") else { continue }
            headers[header[..<colon].lowercased()] = header[header.index(after: colon)...]
                .trimmingCharacters(in: .whitespaces)
        }
        record {
            $0.requestLines.append(line)
            $0.requestHeaders.append(headers)
        }
        return .ok
    }

    /// Writes all of `data`, waiting while the client does not read.
    private func send(_ fd: Int32, _ data: Data, body: Bool) -> Outcome {
        var offset = 0
        while offset < data.count {
            if isStopped { return .stopped }
            let written = data.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                #if canImport(Glibc)
                return Glibc.send(fd, base + offset, data.count - offset, Int32(MSG_NOSIGNAL))
                #else
                return Darwin.send(fd, base + offset, data.count - offset, 0)
                #endif
            }
            if written > 0 {
                offset += written
                if body { record { $0.bodyBytesSent += Int64(written) } }
                continue
            }
            guard written < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else { return .clientGone }
            var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let ready = poll(&entry, 1, 250)
            if ready == 0 {
                record { $0.writerBlocked = true }
            } else if ready > 0, entry.revents & Int16(POLLERR | POLLHUP) != 0 {
                return .clientGone
            }
        }
        return .ok
    }

    /// Keeps the connection open, reading and discarding, until the client closes it.
    private func holdUntilClientGoes(_ fd: Int32) -> Outcome {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !isStopped {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) > 0 else { continue }
            let count = recv(fd, &buffer, buffer.count, 0)
            if count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return .clientGone
            }
        }
        return .stopped
    }

    private static func errnoText() -> String { String(cString: strerror(errno)) }
}
#endif
