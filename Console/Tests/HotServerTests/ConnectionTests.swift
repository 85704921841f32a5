import Foundation
import HotCore
import HotServerKit
import HotTestServers
import HotTesting
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP connection to 127.0.0.1 from a chosen loopback address, on a blocking socket.
final class RawConnection {
    let socket: Int32

    init(port: Int, from source: String = "127.0.0.1") throws {
        #if canImport(Glibc)
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        socket = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        let size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, size) == 0 }
        }
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, size) == 0 }
        }
        guard socket >= 0, bound, connected else {
            close(socket)
            throw HotUpdateError(.transportFailed, "cannot connect from \(source) to port \(port): errno \(errno)")
        }
        // Every read gives up after 60 seconds: the deadline of each wait below.
        var timeout = timeval(tv_sec: 60, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(socket) }

    func write(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// What the server sends until it closes the connection; nil when it has not closed it
    /// within the 60-second deadline.
    func readToClose() -> String? {
        var received = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(socket, &buffer, buffer.count, 0)
            if count == 0 { return String(decoding: received, as: UTF8.self) }
            if count < 0 {
                // A reset closes it too; a timeout is the deadline passing.
                return errno == ECONNRESET ? String(decoding: received, as: UTF8.self) : nil
            }
            received += buffer[0..<count]
        }
    }

    /// The first line the server answers, within the deadline.
    func readStatusLine() -> String? {
        var received = [UInt8]()
        var byte: UInt8 = 0
        while recv(socket, &byte, 1, 0) == 1 {
            if byte == 0x0A {
                return String(decoding: received, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            }
            received.append(byte)
        }
        return nil
    }
}

/// Connections that send slowly, or nothing, against the real collector.
@Suite("The collector's connections")
struct ConnectionTests {
    static func start(_ extra: [String]) async throws -> (ServerProcess, Int) {
        let directory = try scratch("connections")
        let database = "sqlite:" + directory.appendingPathComponent("telemetry.db").path
        let collector = try await ServerProcess.start(["collect", "--db", database] + extra)
        return (collector, collector.url.port ?? 0)
    }

    @Test("a half-sent request head, and a body that stops coming, are closed by the server")
    func halfSent() async throws {
        let (collector, port) = try await Self.start(["--idle-timeout", "1", "--read-timeout", "1"])
        defer { collector.stop() }
        let head = try RawConnection(port: port)
        head.write("POST /collect HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        let body = try RawConnection(port: port)
        body.write(
            "POST /collect HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{\"batch\":"
        )
        #expect(head.readToClose() != nil, "a half-sent head kept its connection open")
        #expect(body.readToClose() != nil, "a body that stopped kept its connection open")
    }

    @Test("a Content-Length over the limit is answered 413 at once, not waited for")
    func hugeContentLength() async throws {
        let (collector, port) = try await Self.start([])
        defer { collector.stop() }
        let connection = try RawConnection(port: port)
        connection.write(
            "POST /collect HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10737418240\r\n\r\n{"
        )
        #expect(connection.readStatusLine()?.hasPrefix("HTTP/1.1 413") == true)
    }

    @Test(
        "one network's connections are capped: past the cap it is closed at once, and another network's batch is taken"
    )
    func connectionCap() async throws {
        let (collector, port) = try await Self.start(["--max-connections-per-network", "20"])
        defer { collector.stop() }
        var held: [RawConnection] = []
        for _ in 0..<20 {
            // Answered once (so surely counted), then kept open, half a request sent.
            let connection = try RawConnection(port: port, from: "127.0.3.1")
            connection.write("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
            #expect(connection.readStatusLine() == "HTTP/1.1 200 OK")
            connection.write("POST /collect HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            held.append(connection)
        }
        let extra = try RawConnection(port: port, from: "127.0.3.1")
        #expect(extra.readToClose() == "", "a connection over the cap was kept open")
        let body = batchBody(client: newClient(), events: [event("confirm", "app", "2")])
        #expect(try await send(body, to: collector.url.appendingPathComponent("collect")).status == 204)
        #expect(held.count == 20)
    }

    @Test("each network stores at most its budget a day: past it, 429 with Retry-After; other networks are still taken")
    func storageBudget() async throws {
        let (collector, _) = try await Self.start(["--network-budget", "2000"])
        defer { collector.stop() }
        let collect = collector.url.appendingPathComponent("collect")
        var statuses: [Int] = []
        var retryAfter: String?
        for _ in 0..<20 {
            let answer = try await send(
                batchBody(client: newClient(), events: [event("confirm", "app", "2")]),
                to: collect,
                from: "127.0.4.1"
            )
            statuses.append(answer.status)
            if answer.status == 429 {
                retryAfter = answer.headers["retry-after"]
                break
            }
        }
        #expect(statuses.last == 429, "\(statuses)")
        #expect(statuses.dropLast().allSatisfy { $0 == 204 } && statuses.count > 1, "\(statuses)")
        #expect(Int(retryAfter ?? "") ?? 0 > 0)
        let body = batchBody(client: newClient(), events: [event("confirm", "app", "2")])
        #expect(try await send(body, to: collect).status == 204)
    }
}
