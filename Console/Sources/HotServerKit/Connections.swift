import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTPTypes

/// The network a connection comes from, as the collector's per-network bounds count it:
/// an IPv4 address's /24 (`203.0.113.0/24`), an IPv6 address's /48 (`2001:db8:1::/48`).
public enum SourceNetwork {
    /// The network of `address`; `unknown` for a Unix socket or no address.
    public static func of(_ address: SocketAddress?) -> String {
        switch address {
        case .v4(let v4):
            return ipv4(withUnsafeBytes(of: v4.address.sin_addr) { Array($0) })
        case .v6(let v6):
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            // An IPv4 address mapped into IPv6 (::ffff:a.b.c.d) is that IPv4 address.
            if bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
                return ipv4(Array(bytes[12..<16]))
            }
            guard bytes.count == 16 else { return "unknown" }
            let groups = (0..<3).map { String(UInt16(bytes[$0 * 2]) << 8 | UInt16(bytes[$0 * 2 + 1]), radix: 16) }
            return groups.joined(separator: ":") + "::/48"
        default:
            return "unknown"
        }
    }

    private static func ipv4(_ bytes: [UInt8]) -> String {
        guard bytes.count == 4 else { return "unknown" }
        return "\(bytes[0]).\(bytes[1]).\(bytes[2]).0/24"
    }
}

/// The bounds every connection to `hot-server` is held to, so that connections that send
/// slowly, or not at all, cannot keep a real batch out.
public struct ConnectionLimits: Sendable, Hashable {
    /// The most connections open at once; past it a new one is closed at once.
    public var maxConnections = 1024
    /// The most connections open at once from one source network (``SourceNetwork``).
    public var maxConnectionsPerNetwork = 128
    /// Seconds a connection may wait for a request's head (after it opens, or after a
    /// response) before it is closed.
    public var idleTimeout: Double = 30
    /// Seconds a request may go without a byte of its body arriving.
    public var readTimeout: Double = 10
    /// Seconds a request has, from its head to the end of its body.
    public var requestDeadline: Double = 30

    /// The defaults: 1024 connections, 128 a network, 30 s idle, 10 s between reads, 30 s a
    /// request.
    public init() {}
}

/// The connections open now, in all and per source network.
final class ConnectionTable: Sendable {
    let limits: ConnectionLimits
    private let counts = Guarded((total: 0, perNetwork: [String: Int]()))

    init(limits: ConnectionLimits) { self.limits = limits }

    /// Counts a new connection from `network`, unless it is one too many.
    func open(_ network: String) -> Bool {
        counts.with { counts in
            guard counts.total < limits.maxConnections,
                counts.perNetwork[network, default: 0] < limits.maxConnectionsPerNetwork
            else { return false }
            counts.total += 1
            counts.perNetwork[network, default: 0] += 1
            return true
        }
    }

    /// Forgets a connection counted by ``open(_:)``.
    func close(_ network: String) {
        counts.with { counts in
            counts.total -= 1
            let left = counts.perNetwork[network, default: 1] - 1
            counts.perNetwork[network] = left > 0 ? left : nil
        }
    }
}

/// Holds each connection to ``ConnectionLimits``: closes one over the caps at once, one idle
/// too long, one whose request stops sending or takes too long; and tells the handlers the
/// source network of each request (``network(of:)``).
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The header that carries the source network to the routes: set here on every request,
    /// whatever the client sent, with a value only this process knows as its prefix.
    static let networkField = HTTPField.Name("X-Hot-Source-Network") ?? .via
    private static let secret = UUID().uuidString

    /// The source network the guard saw for `request`; `unknown` when it did not see it.
    static func network(of request: Request) -> String {
        guard let value = request.headers[networkField], value.hasPrefix(secret + " ") else { return "unknown" }
        return String(value.dropFirst(secret.count + 1))
    }

    private let table: ConnectionTable
    private var network = "unknown"
    private var counted = false
    private var timer: Scheduled<Void>?
    private var deadline: Scheduled<Void>?

    init(table: ConnectionTable) { self.table = table }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    private func start(_ context: ChannelHandlerContext) {
        guard !counted else { return }
        network = SourceNetwork.of(context.channel.remoteAddress)
        guard table.open(network) else {
            context.close(promise: nil)
            return
        }
        counted = true
        arm(context, after: table.limits.idleTimeout)
    }

    func channelInactive(context: ChannelHandlerContext) {
        stop()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { stop() }

    private func stop() {
        timer?.cancel()
        deadline?.cancel()
        timer = nil
        deadline = nil
        if counted {
            counted = false
            table.close(network)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(var head):
            head.headerFields[Self.networkField] = Self.secret + " " + network
            arm(context, after: table.limits.readTimeout)
            deadline?.cancel()
            let loop = context.eventLoop.assumeIsolated()
            deadline = loop.scheduleTask(in: Self.amount(table.limits.requestDeadline)) { context.close(promise: nil) }
            context.fireChannelRead(wrapInboundOut(.head(head)))
        case .body(let part):
            arm(context, after: table.limits.readTimeout)
            context.fireChannelRead(wrapInboundOut(.body(part)))
        case .end(let trailers):
            timer?.cancel()
            timer = nil
            deadline?.cancel()
            deadline = nil
            context.fireChannelRead(wrapInboundOut(.end(trailers)))
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { arm(context, after: table.limits.idleTimeout) }
        context.write(data, promise: promise)
    }

    /// Closes the connection unless something arrives within `seconds`.
    private func arm(_ context: ChannelHandlerContext, after seconds: Double) {
        timer?.cancel()
        let loop = context.eventLoop.assumeIsolated()
        timer = loop.scheduleTask(in: Self.amount(seconds)) { context.close(promise: nil) }
    }

    private static func amount(_ seconds: Double) -> TimeAmount {
        .milliseconds(Int64(max(0.001, seconds) * 1000))
    }
}
