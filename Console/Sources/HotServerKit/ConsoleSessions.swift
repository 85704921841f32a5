import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The console's sessions: each opened by the token, with its CSRF token, and ended by an
/// absolute lifetime (from login) and an idle lifetime (from its last use), whichever comes
/// first. An ended session is forgotten; its cookie then opens nothing.
///
/// A value type: the console keeps one behind a lock, and every call takes the time, so a
/// test can give any clock.
///
/// ```swift
/// var sessions = ConsoleSessions(lifetime: 12 * 3600, idleLifetime: 30 * 60)
/// let (session, csrf) = sessions.open(now: Date())
/// sessions.csrfToken(of: session, now: Date())  // csrf, and the session's idle time restarts
/// ```
public struct ConsoleSessions: Sendable {
    /// How long a session lasts after login, in seconds, however busy.
    public let lifetime: TimeInterval
    /// How long a session lasts after its last use, in seconds.
    public let idleLifetime: TimeInterval

    private struct Session: Sendable {
        var csrf: String
        var opened: Date
        var used: Date
    }

    private var sessions: [String: Session] = [:]

    /// The defaults: twelve hours after login, thirty minutes after the last use.
    public static let defaultLifetime: TimeInterval = 12 * 3600
    /// The default idle lifetime: thirty minutes.
    public static let defaultIdleLifetime: TimeInterval = 30 * 60

    /// Creates an empty table; lifetimes below one second are taken as one second.
    public init(
        lifetime: TimeInterval = ConsoleSessions.defaultLifetime,
        idleLifetime: TimeInterval = ConsoleSessions.defaultIdleLifetime
    ) {
        self.lifetime = max(1, lifetime)
        self.idleLifetime = max(1, idleLifetime)
    }

    /// How many sessions are open (ended ones are dropped by every call).
    public var count: Int { sessions.count }

    /// Opens a session at `now`.
    ///
    /// - Returns: The session id (the cookie's value) and its CSRF token.
    public mutating func open(now: Date) -> (session: String, csrf: String) {
        dropEnded(now: now)
        let session = ReleaseConsole.randomToken()
        let csrf = ReleaseConsole.randomToken()
        sessions[session] = Session(csrf: csrf, opened: now, used: now)
        return (session, csrf)
    }

    /// The CSRF token of `session` when it is open at `now`, which counts as a use; nil for
    /// an unknown or ended session (which is forgotten).
    public mutating func csrfToken(of session: String, now: Date) -> String? {
        dropEnded(now: now)
        guard var found = sessions[session] else { return nil }
        found.used = max(found.used, now)
        sessions[session] = found
        return found.csrf
    }

    /// Forgets every session ended at `now`.
    private mutating func dropEnded(now: Date) {
        sessions = sessions.filter { _, session in
            now.timeIntervalSince(session.opened) < lifetime && now.timeIntervalSince(session.used) < idleLifetime
        }
    }
}

/// The names a request's `Host` may carry to reach the console: a page from another name
/// that resolves to the console's address (DNS rebinding) is refused before any route.
///
/// A name is compared without its port, case-insensitively and without a trailing dot.
/// IP address literals are allowed only when the console listens on every address
/// (`0.0.0.0` or `::`): a browser sends a literal only for a page of that very address, which
/// a rebinding page cannot be.
public struct AllowedHosts: Sendable, Hashable {
    /// The names allowed, lowercased.
    public let names: Set<String>
    /// Whether any IP address literal is allowed.
    public let addressLiterals: Bool

    /// The hosts allowed for a console listening on `listenHost`, with `extra` names
    /// (`--allowed-host`): the listen host itself, and `localhost`, `127.0.0.1` and `::1`
    /// when it is a loopback address.
    public init(listenHost: String, extra: [String] = []) {
        let host = Self.normalised(listenHost)
        var names = Set(extra.map(Self.normalised))
        var literals = false
        switch host {
        case "0.0.0.0", "::", "":
            literals = true
        case "localhost", "::1":
            names.formUnion(["localhost", "127.0.0.1", "::1"])
        default:
            names.insert(host)
            if host.hasPrefix("127.") { names.formUnion(["localhost", "127.0.0.1", "::1"]) }
        }
        names.remove("")
        self.names = names
        addressLiterals = literals
    }

    /// Whether a request whose `Host` (with or without its port) is `authority` may be served.
    public func allows(_ authority: String?) -> Bool {
        guard let authority, let host = Self.hostName(authority) else { return false }
        if names.contains(host) { return true }
        return addressLiterals && Self.isAddressLiteral(host)
    }

    /// The host of `host[:port]` or `[v6][:port]`, normalised; nil when malformed.
    static func hostName(_ authority: String) -> String? {
        var text = Substring(authority.trimmingCharacters(in: .whitespaces))
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let rest = text[text.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && rest.dropFirst().allSatisfy(\.isNumber)) else { return nil }
            text = text[text.index(after: text.startIndex)..<close]
        } else if let colon = text.lastIndex(of: ":") {
            guard text[text.index(after: colon)...].allSatisfy(\.isNumber), !text[..<colon].contains(":") else {
                return nil
            }
            text = text[..<colon]
        }
        let host = normalised(String(text))
        return host.isEmpty ? nil : host
    }

    private static func normalised(_ host: String) -> String {
        var value = host.lowercased()
        if value.hasPrefix("["), value.hasSuffix("]") { value = String(value.dropFirst().dropLast()) }
        while value.hasSuffix(".") { value.removeLast() }
        return value
    }

    private static func isAddressLiteral(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}
