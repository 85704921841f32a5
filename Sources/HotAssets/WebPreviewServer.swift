import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A small HTTP/1.1 server on 127.0.0.1 over a ``WebResponder``: the installed web modules at
/// their online paths (`http://127.0.0.1:PORT/home/` for `https://m.example.com/home/`), for a
/// developer's browser (`hot serve-web`) or a host whose web view has no scheme handler. A
/// thread per connection, keep-alive, GET and HEAD, a request's headers at most 16 KiB, a
/// connection idle for 30 s closed. Not a web server for the internet: it binds the loopback
/// address alone.
///
/// ```swift
/// let server = try WebPreviewServer(responder: WebResponder(resolver: resolver), port: 0)
/// print("serving at http://127.0.0.1:\(server.port)/")
/// server.run()   // until stop()
/// ```
public final class WebPreviewServer: Sendable {
    /// The responder every request goes to.
    public let responder: WebResponder
    /// The port it listens on, on 127.0.0.1.
    public let port: Int
    /// Called with a line per request, when given.
    let log: (@Sendable (String) -> Void)?
    private let listener: Int32
    private let stopped = Locked(false)

    /// Listens on 127.0.0.1:`port` (0: a free port, then read ``port``).
    ///
    /// - Parameters:
    ///   - responder: What answers each request.
    ///   - port: The TCP port; 0 picks a free one.
    ///   - log: Called with a line per request (`GET /home/ 200`), when given.
    /// - Throws: `HotUpdateError.Code.transportFailed` when the port cannot be bound.
    public init(responder: WebResponder, port: Int, log: (@Sendable (String) -> Void)? = nil) throws {
        self.responder = responder
        self.log = log
        #if canImport(Glibc) || canImport(Musl)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else {
            throw HotUpdateError(.transportFailed, "no socket: \(String(cString: strerror(errno)))")
        }
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(descriptor, 128) == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            throw HotUpdateError(.transportFailed, "127.0.0.1:\(port) cannot be served: \(reason)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        self.port = Int(UInt16(bigEndian: address.sin_port))
        self.listener = descriptor
        self.origins = responder.resolver.modules.compactMap { module in
            guard var components = URLComponents(url: module.onlineBase, resolvingAgainstBaseURL: false),
                let scheme = components.scheme?.lowercased(), let host = components.host?.lowercased()
            else {
                return nil
            }
            let prefix = components.percentEncodedPath.split(separator: "/")
            let port = components.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : nil)
            components.percentEncodedPath = ""
            components.percentEncodedQuery = nil
            components.fragment = nil
            return components.string.map { Origin(prefix: prefix, text: $0, scheme: scheme, host: host, port: port) }
        }
    }

    /// Accepts connections until ``stop()``, each served on a thread of its own: a thread
    /// whose connection closed waits a minute for the next one before it ends, so a browser
    /// that opens connection after connection gets threads the scheduler already placed, not a
    /// new thread each time.
    public func run() {
        while !stopped.withLock({ $0 }) {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE {
                    if errno == EMFILE || errno == ENFILE { usleep(10_000) }
                    continue
                }
                return
            }
            #if canImport(Darwin)
            var one: Int32 = 1
            setsockopt(connection, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
            #endif
            if idle.handOff(connection) { continue }
            let thread = Thread { [self] in
                var next: Int32? = connection
                while let connection = next {
                    serve(connection)
                    next = idle.next(within: 60)
                }
            }
            thread.stackSize = 512 * 1024
            thread.start()
        }
    }

    /// Stops accepting connections: ``run()`` returns; connections being served finish.
    public func stop() {
        guard
            !stopped.withLock({ (value: inout Bool) -> Bool in
                defer { value = true }
                return value
            })
        else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    /// The threads waiting for a connection.
    private let idle = IdleThreads()

    /// Serves the requests of one connection until it closes, idles or errs.
    private func serve(_ connection: Int32) {
        defer { close(connection) }
        var one: Int32 = 1
        setsockopt(connection, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            // The head of the next request: up to the blank line.
            var headEnd: Int?
            while true {
                if let end = Self.blankLine(in: pending) {
                    headEnd = end
                    break
                }
                guard pending.count < Self.maxHead else {
                    _ = send(
                        connection,
                        Self.simple(431, "Request Header Fields Too Large", "the request's headers pass 16 KiB")
                    )
                    return
                }
                let read = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
                if read < 0 && errno == EINTR { continue }
                guard read > 0 else { return }
                pending.append(contentsOf: buffer[0..<read])
            }
            guard let end = headEnd else { return }
            let parsed = Self.parse(pending[0..<end])
            pending.removeFirst(end + 4)
            guard let parsed else {
                _ = send(connection, Self.simple(400, "Bad Request", "the request line or a header cannot be read"))
                return
            }
            // GET and HEAD carry no body: one that says it has one is answered, then closed.
            let hasBody =
                parsed.headers["transfer-encoding"] != nil
                || (parsed.headers["content-length"].flatMap { Int($0) } ?? 0) > 0
            let keepAlive = !hasBody && parsed.keepAlive
            guard answer(parsed, on: connection, keepAlive: keepAlive), keepAlive else { return }
        }
    }

    /// Answers one request; false when the connection failed.
    private func answer(_ request: Parsed, on connection: Int32, keepAlive: Bool) -> Bool {
        guard let (origin, rawPath) = online(request.target) else {
            return send(
                connection,
                Self.simple(400, "Bad Request", "the request's target is not a path", keepAlive: keepAlive)
            )
        }
        // The parts the responder matches, with no URL built; the URL only for the answers
        // that name one (the target's bytes were checked to make one).
        let target = request.target
        let address = WebModuleResolver.Address(
            scheme: origin.scheme,
            host: origin.host,
            port: origin.port,
            rawPath: rawPath
        )
        let answer = responder.respond(method: request.method, headers: request.headers, address: address) {
            URL(string: origin.text + target) ?? URL(fileURLWithPath: "/")
        }
        switch answer {
        case .network(let online, let reason):
            log?("\(request.method) \(request.target) 404 (\(reason): the app loads \(online.absoluteString))")
            return send(
                connection,
                Self.simple(
                    404,
                    "Not Found",
                    "not answered from the installed package (\(reason)): the app loads \(online.absoluteString) from the network",
                    extra: "X-Hot-Fallback: \(reason)\r\n",
                    keepAlive: keepAlive,
                    head: request.method == "HEAD"
                )
            )
        case .response(let response):
            log?("\(request.method) \(request.target) \(response.status)")
            // The head as bytes, appended in place: no string is built per header.
            var bytes: [UInt8] = []
            bytes.reserveCapacity(512 + Int(min(response.body.count, 64 * 1024)))
            bytes += "HTTP/1.1 ".utf8
            bytes += String(response.status).utf8
            bytes.append(32)
            bytes += response.reason.utf8
            bytes += [13, 10]
            for header in response.headers {
                bytes += header.name.utf8
                bytes += [58, 32]
                bytes += header.value.utf8
                bytes += [13, 10]
            }
            bytes += (keepAlive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n").utf8
            // A small body goes out with the head, in one write.
            if response.body.count <= 64 * 1024 {
                do {
                    try response.body.stream { bytes.append(contentsOf: $0) }
                } catch {
                    return false
                }
                return send(connection, bytes)
            }
            guard send(connection, bytes) else { return false }
            do {
                try response.body.stream { chunk in
                    guard Self.sendAll(connection, chunk) else {
                        throw HotUpdateError(.transportFailed, "the connection closed")
                    }
                }
                return true
            } catch {
                return false
            }
        }
    }

    /// The origin a request's target is under, and the target's raw path: the module whose
    /// base path is the longest prefix of the target's path (whole segments); the first
    /// module's for a path none covers (the responder then says so). Nil for a target that is
    /// not an absolute path, or holds a byte no URL may (a space, a control character, a
    /// non-ASCII byte: a URL could not be made of it).
    private func online(_ target: String) -> (Origin, String)? {
        guard target.hasPrefix("/"), !target.hasPrefix("//"),
            target.utf8.allSatisfy(Self.mayStandInURL)
        else { return nil }
        // Bytes, not characters: the target is ASCII (checked above).
        let path = target.utf8.firstIndex(of: UInt8(ascii: "?")).map { target[..<$0] } ?? target[...]
        guard origins.count > 1 else { return origins.first.map { ($0, String(path)) } }
        let segments = path.utf8.split(separator: UInt8(ascii: "/")).map { Substring($0) }
        guard
            let origin = origins.first(where: {
                segments.count >= $0.prefix.count && segments.starts(with: $0.prefix)
            }) ?? origins.first
        else { return nil }
        return (origin, String(path))
    }

    /// Whether a URL may hold `byte` as it is: printable ASCII but for the ones RFC 3986 leaves
    /// out (the double quote, angle brackets, backslash, caret, grave accent, braces and bar).
    private static func mayStandInURL(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x22, 0x3C, 0x3E, 0x5C, 0x5E, 0x60, 0x7B, 0x7C, 0x7D: false
        default: byte > 0x20 && byte < 0x7F
        }
    }

    /// A module's base: its path segments, its origin as text (`https://m.example.com`), and
    /// that origin's parts as the responder matches them.
    struct Origin: Sendable {
        var prefix: [Substring]
        var text: String
        var scheme: String
        var host: String
        var port: Int?
    }

    /// Each module's base, longest base first.
    private let origins: [Origin]

    private static let maxHead = 16 * 1024

    /// A request's method, target and headers (lowercase names; repeated ones joined with a comma).
    struct Parsed {
        var method: String
        var target: String
        var headers: [String: String]
        var keepAlive: Bool
    }

    /// Parses a request head (without its blank line); nil when it is not HTTP/1.x. Works on
    /// the bytes, a line at a time: a request costs no Foundation string call and no generic
    /// search.
    static func parse(_ head: ArraySlice<UInt8>) -> Parsed? {
        guard !head.contains(0) else { return nil }
        // The request line: METHOD SP TARGET SP VERSION.
        let lineEnd = lineBreak(in: head, from: head.startIndex) ?? head.endIndex
        let requestLine = head[head.startIndex..<lineEnd]
        guard let firstSpace = requestLine.firstIndex(of: 32),
            let secondSpace = requestLine[(firstSpace + 1)...].firstIndex(of: 32),
            !requestLine[(secondSpace + 1)...].contains(32)
        else { return nil }
        let methodBytes = requestLine[requestLine.startIndex..<firstSpace]
        guard !methodBytes.isEmpty,
            methodBytes.allSatisfy({ ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) })
        else { return nil }
        let versionBytes = requestLine[(secondSpace + 1)...]
        let isHTTP11: Bool
        if versionBytes.elementsEqual("HTTP/1.1".utf8) {
            isHTTP11 = true
        } else if versionBytes.elementsEqual("HTTP/1.0".utf8) {
            isHTTP11 = false
        } else {
            return nil
        }
        guard let target = text(requestLine[(firstSpace + 1)..<secondSpace]) else { return nil }
        var headers: [String: String] = [:]
        var keepAliveAsked = false
        var closeAsked = false
        var start = lineEnd == head.endIndex ? head.endIndex : lineEnd + 2
        while start < head.endIndex {
            let end = lineBreak(in: head, from: start) ?? head.endIndex
            let line = head[start..<end]
            start = end == head.endIndex ? head.endIndex : end + 2
            guard let colon = line.firstIndex(of: 58), colon > line.startIndex else { return nil }
            let nameBytes = line[line.startIndex..<colon]
            guard !nameBytes.contains(32), !nameBytes.contains(9) else { return nil }
            var valueStart = colon + 1
            var valueEnd = line.endIndex
            while valueStart < valueEnd, line[valueStart] == 32 || line[valueStart] == 9 { valueStart += 1 }
            while valueEnd > valueStart, line[valueEnd - 1] == 32 || line[valueEnd - 1] == 9 { valueEnd -= 1 }
            let valueBytes = line[valueStart..<valueEnd]
            guard let value = text(valueBytes) else { return nil }
            if equalsIgnoringCase(nameBytes, "connection") {
                keepAliveAsked = keepAliveAsked || contains(valueBytes, lowercased: "keep-alive")
                closeAsked = closeAsked || contains(valueBytes, lowercased: "close")
            }
            let name =
                nameBytes.contains(where: { $0 >= 65 && $0 <= 90 })
                ? String(decoding: nameBytes.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }, as: UTF8.self)
                : String(decoding: nameBytes, as: UTF8.self)
            headers[name] = headers[name].map { $0 + ", " + value } ?? value
        }
        return Parsed(
            method: String(decoding: methodBytes, as: UTF8.self),
            target: target,
            headers: headers,
            keepAlive: isHTTP11 ? !closeAsked : keepAliveAsked
        )
    }

    /// `bytes` as text, nil when they are not UTF-8 (ASCII, the usual case, is taken as it is).
    private static func text(_ bytes: ArraySlice<UInt8>) -> String? {
        bytes.allSatisfy({ $0 < 0x80 })
            ? String(decoding: bytes, as: UTF8.self) : String(validating: bytes, as: UTF8.self)
    }

    /// Where the next CR LF at or after `start` begins.
    private static func lineBreak(in bytes: ArraySlice<UInt8>, from start: Int) -> Int? {
        var index = start
        while index + 1 < bytes.endIndex {
            if bytes[index] == 13 && bytes[index + 1] == 10 { return index }
            index += 1
        }
        return nil
    }

    /// Whether `bytes` spell `word` (lowercase ASCII), letters compared case-insensitively.
    private static func equalsIgnoringCase(_ bytes: ArraySlice<UInt8>, _ word: StaticString) -> Bool {
        word.withUTF8Buffer { equalsIgnoringCase(bytes, $0) }
    }

    /// Whether `bytes` hold `word` (lowercase ASCII), letters compared case-insensitively.
    private static func contains(_ bytes: ArraySlice<UInt8>, lowercased word: StaticString) -> Bool {
        let length = word.utf8CodeUnitCount
        guard bytes.count >= length else { return false }
        return word.withUTF8Buffer { lowered in
            for start in bytes.startIndex...(bytes.endIndex - length)
            where equalsIgnoringCase(bytes[start..<(start + length)], lowered) {
                return true
            }
            return false
        }
    }

    private static func equalsIgnoringCase(_ bytes: ArraySlice<UInt8>, _ lowered: UnsafeBufferPointer<UInt8>) -> Bool {
        bytes.count == lowered.count
            && zip(bytes, lowered).allSatisfy { ($0 >= 65 && $0 <= 90 ? $0 + 32 : $0) == $1 }
    }

    /// Where the head's blank line starts, if it has arrived.
    static func blankLine(in bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }

    /// A complete short text response.
    static func simple(
        _ status: Int,
        _ reason: String,
        _ text: String,
        extra: String = "",
        keepAlive: Bool = false,
        head: Bool = false
    ) -> [UInt8] {
        let body = text + "\n"
        let response =
            "HTTP/1.1 \(status) \(reason)\r\nContent-Type: text/plain; charset=utf-8\r\n"
            + "Content-Length: \(body.utf8.count)\r\nCache-Control: no-store\r\n\(extra)"
            + "Connection: \(keepAlive ? "keep-alive" : "close")\r\n\r\n" + (head ? "" : body)
        return Array(response.utf8)
    }

    private func send(_ connection: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { Self.sendAll(connection, $0) }
    }

    /// Writes every byte; false when the connection failed or timed out.
    static func sendAll(_ connection: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            // MSG_NOSIGNAL: a peer that closed is an error here, not a SIGPIPE for the process
            // (SO_NOSIGPIPE on Darwin, set on each connection).
            let start = bytes.baseAddress.map { $0 + offset }
            #if canImport(Glibc)
            let sent = Glibc.send(connection, start, bytes.count - offset, Int32(MSG_NOSIGNAL))
            #elseif canImport(Musl)
            let sent = Musl.send(connection, start, bytes.count - offset, Int32(MSG_NOSIGNAL))
            #else
            let sent = Darwin.send(connection, start, bytes.count - offset, 0)
            #endif
            if sent < 0 && errno == EINTR { continue }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }
}

/// Threads of ``PreviewServer`` that wait for their next connection.
final class IdleThreads: @unchecked Sendable {
    private let condition = NSCondition()
    private var waiting = 0
    private var handed: [Int32] = []

    /// Gives `connection` to a waiting thread; false when none waits.
    func handOff(_ connection: Int32) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard waiting > handed.count else { return false }
        handed.append(connection)
        condition.signal()
        return true
    }

    /// The next connection handed to this thread, or nil when none came within `seconds`.
    func next(within seconds: TimeInterval) -> Int32? {
        condition.lock()
        defer { condition.unlock() }
        waiting += 1
        defer { waiting -= 1 }
        let deadline = Date().addingTimeInterval(seconds)
        while handed.isEmpty {
            if !condition.wait(until: deadline), handed.isEmpty { return nil }
        }
        return handed.removeFirst()
    }
}
