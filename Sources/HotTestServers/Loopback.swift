import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP connection to 127.0.0.1, for clients that speak HTTP byte by byte: requests a
/// higher-level client would normalise (`..`, a NUL byte), or a kept-alive connection timed
/// request by request.
public enum Loopback {
    /// Connects to 127.0.0.1:`port`, with Nagle's algorithm off and reads that give up after
    /// `timeout` seconds; the caller closes the descriptor.
    ///
    /// - Throws: `HotUpdateError.Code.transportFailed` when the socket cannot be made or connected.
    public static func connect(port: Int, timeout: Int = 20) throws -> Int32 {
        #if canImport(Glibc)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw HotUpdateError(.transportFailed, "no socket") }
        var one: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                systemConnect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            throw HotUpdateError(.transportFailed, "cannot connect to 127.0.0.1:\(port)")
        }
        return descriptor
    }

    /// Sends `request` on a new connection to 127.0.0.1:`port` and reads until the server
    /// closes it (or the read gives up after 20 s): the whole answer, as text.
    ///
    /// - Throws: `HotUpdateError.Code.transportFailed` when the connection or the write fails.
    public static func exchange(_ request: String, port: Int) throws -> String {
        let descriptor = try connect(port: port)
        defer { close(descriptor) }
        let bytes = Array(request.utf8)
        guard bytes.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) == bytes.count else {
            throw HotUpdateError(.transportFailed, "the request was not sent")
        }
        var answer = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            answer.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: answer, as: UTF8.self)
    }
}

/// The C library's `connect`, which ``Loopback/connect(port:timeout:)`` would otherwise hide.
private func systemConnect(_ descriptor: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    connect(descriptor, address, length)
}
