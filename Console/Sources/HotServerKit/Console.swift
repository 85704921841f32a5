import Foundation
import HTTPTypes
import HotCore
import Hummingbird
import Logging
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The release console: one page with every package, version and channel, its rollout, its
/// health and plots drawn on the server as SVG, and forms for the actions, each signed with
/// the publisher's keys, published to the repository and recorded.
///
/// Actions need a session: `GET /login?token=TOKEN` with the token printed at start (or
/// given with `--token-file`) sets an HttpOnly, SameSite=Strict cookie; each form carries the
/// session's CSRF token, and a request whose `Origin` is not the console's own is refused.
/// A session ends ``ConsoleSessions/lifetime`` after login or ``ConsoleSessions/idleLifetime``
/// after its last use. A script may instead send `Authorization: Bearer TOKEN`.
///
/// Every request to the page, the login and the actions must name an allowed host
/// (``AllowedHosts``) in its `Host`, or is answered 421: a page of another name that
/// resolves to the console's address (DNS rebinding) reaches nothing. Every field of an
/// action is checked before `hot` runs (``PublisherRepository/validate(_:package:channel:)``);
/// a bad one is answered 400 with the reason, and nothing is signed or recorded.
public final class ReleaseConsole: Sendable {
    /// The repository changed by the actions.
    public let repository: PublisherRepository
    /// The telemetry and the actions.
    public let database: any TelemetryDatabase
    /// The token that opens a session.
    public let token: String
    /// The hosts a request may name.
    public let allowedHosts: AllowedHosts
    private let sessions: Guarded<ConsoleSessions>
    private let clock: @Sendable () -> Date

    /// Creates a console.
    ///
    /// - Parameters:
    ///   - repository: The repository the actions change.
    ///   - database: The telemetry and the actions.
    ///   - token: The token that opens a session.
    ///   - allowedHosts: The hosts a request may name (see ``AllowedHosts``); by default the
    ///     loopback names.
    ///   - sessions: The sessions' lifetimes.
    ///   - clock: The time sessions are measured with.
    public init(
        repository: PublisherRepository,
        database: any TelemetryDatabase,
        token: String,
        allowedHosts: AllowedHosts = AllowedHosts(listenHost: "127.0.0.1"),
        sessions: ConsoleSessions = ConsoleSessions(),
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.repository = repository
        self.database = database
        self.token = token
        self.allowedHosts = allowedHosts
        self.sessions = Guarded(sessions)
        self.clock = clock
    }

    /// A random token of 32 hex digits.
    public static func randomToken() -> String {
        (0..<4).map { _ in String(format: "%08x", UInt32.random(in: .min ... .max)) }.joined()
    }

    /// Adds the page, the login and the actions to `router`.
    public func addRoutes(to router: Router<BasicRequestContext>) {
        router.get("/") { request, _ -> Response in
            if let refusal = self.refusingHost(request) { return refusal }
            let csrf = self.session(of: request)?.csrf
            let html = try await self.page(csrf: csrf)
            return textResponse(200, html, type: "text/html; charset=utf-8")
        }
        router.get("login") { request, _ -> Response in
            if let refusal = self.refusingHost(request) { return refusal }
            guard let given = request.uri.queryParameters.get("token"), constantTimeEqual(given, self.token) else {
                return textResponse(403, "wrong or missing token")
            }
            let now = self.clock()
            let session = self.sessions.with { $0.open(now: now) }.session
            var headers = HTTPFields()
            headers[.location] = "/"
            headers[.setCookie] = "hot_session=\(session); HttpOnly; SameSite=Strict; Path=/"
            return Response(status: .seeOther, headers: headers)
        }
        router.post("action") { request, _ -> Response in
            if let refusal = self.refusingHost(request) { return refusal }
            let body = try await request.body.collect(upTo: 16 * 1024)
            let form = parseForm(String(buffer: body))
            let bearer = request.headers[.authorization].map { constantTimeEqual($0, "Bearer \(self.token)") } ?? false
            if !bearer {
                guard let session = self.session(of: request), let given = form["csrf"],
                    constantTimeEqual(given, session.csrf)
                else {
                    return textResponse(
                        403,
                        "no session (or it ended), or a wrong CSRF token: open /login?token=… first"
                    )
                }
                if let origin = request.headers[.origin], let host = request.head.authority,
                    origin != "http://\(host)" && origin != "https://\(host)"
                {
                    return textResponse(403, "cross-origin request refused")
                }
            }
            if let reason = Self.invalidFields(form) { return textResponse(400, reason) }
            let outcome = await self.perform(form)
            if bearer { return textResponse(outcome.hasPrefix("ok") ? 200 : 400, outcome) }
            var headers = HTTPFields()
            headers[.location] = "/"
            return Response(status: .seeOther, headers: headers)
        }
    }

    /// A 421 answer when the request's `Host` is not an allowed host; nil when it is.
    private func refusingHost(_ request: Request) -> Response? {
        guard !allowedHosts.allows(request.head.authority) else { return nil }
        return textResponse(
            421,
            "this console does not answer for the host '\(request.head.authority ?? "")'; see --allowed-host"
        )
    }

    /// The open session the request's cookie names, and its CSRF token; the request counts as
    /// a use of it.
    private func session(of request: Request) -> (id: String, csrf: String)? {
        guard let cookies = request.headers[.cookie] else { return nil }
        let now = clock()
        for part in cookies.split(separator: ";") {
            let pair = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if pair.count == 2, pair[0] == "hot_session" {
                let value = String(pair[1])
                if let csrf = sessions.with({ $0.csrfToken(of: value, now: now) }) { return (value, csrf) }
            }
        }
        return nil
    }

    /// Why the fields of an action's form cannot be passed to `hot`, or nil when they can.
    static func invalidFields(_ form: [String: String]) -> String? {
        do {
            try PublisherRepository.validate(
                change(form) ?? .disable,
                package: form["package"] ?? "",
                channel: form["channel"] ?? ""
            )
            if let version = form["version"], !version.isEmpty {
                try PublisherRepository.validateName(version, what: "version")
            }
            return nil
        } catch let error as HotUpdateError {
            return "error: " + error.message
        } catch {
            return "error: \(error)"
        }
    }

    /// The change a form asks for, or nil for an unknown action or a bad percentage.
    private static func change(_ form: [String: String]) -> PublisherRepository.Change? {
        let version = form["version"] ?? ""
        switch form["action"] ?? "" {
        case "release": return .release(version: version, rollout: nil)
        case "rollback": return .rollback(to: form["to"].flatMap { $0.isEmpty ? nil : $0 })
        case "disable": return .disable
        case "enable": return .enable
        case "rollout":
            guard let percent = Int(form["percent"] ?? ""), (0...100).contains(percent) else { return nil }
            return .release(version: version, rollout: percent == 100 ? nil : percent)
        default: return nil
        }
    }

    /// Runs an action from a form: `action`, `package`, `channel`, `version`, `percent`, `to`.
    public func perform(_ form: [String: String]) async -> String {
        let action = form["action"] ?? ""
        let package = form["package"] ?? ""
        let channel = form["channel"] ?? ""
        let version = form["version"] ?? ""
        let change: PublisherRepository.Change
        var detail = ""
        switch action {
        case "release": change = .release(version: version, rollout: nil)
        // `version` is the release rolled back; `to` (optional) the one to go back to.
        case "rollback": change = .rollback(to: form["to"].flatMap { $0.isEmpty ? nil : $0 })
        case "disable": change = .disable
        case "enable": change = .enable
        case "rollout":
            guard let percent = Int(form["percent"] ?? ""), (0...100).contains(percent) else {
                return "error: the rollout is a percentage from 0 to 100"
            }
            change = .release(version: version, rollout: percent == 100 ? nil : percent)
            detail = "\(percent)%"
        default: return "error: unknown action '\(action)'"
        }
        // Nothing is changed, and nothing is recorded, unless every field is valid.
        if let reason = Self.invalidFields(form) { return reason }
        let repository = self.repository
        let outcome: String
        do {
            let printed = try await repository.apply(change, package: package, channel: channel)
            if detail.isEmpty { detail = printed }
            outcome = "ok"
        } catch {
            outcome = "\(error)"
        }
        try? await database.recordAction(
            actor: "console",
            action: action,
            channel: channel,
            package: package,
            version: version,
            detail: detail,
            outcome: outcome
        )
        return outcome
    }

    /// The page. Forms appear only with a session's CSRF token.
    public func page(csrf: String?) async throws -> String {
        let report = try await HealthReport.load(from: database)
        let packages = (try? await repository.packages()) ?? []
        let actions = try await database.actions(limit: 30)
        var html = """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><title>HotUpdate releases</title>
            <style>
            body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:.5em 0}
            td,th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left}form{display:inline}
            .bad{color:#b00}.ok{color:#070}svg{background:#fafafa;border:1px solid #ddd;margin:4px}
            </style></head><body><h1>HotUpdate releases</h1>
            """
        if csrf == nil {
            html += "<p>Read only: open <code>/login?token=…</code> with the token printed at start to act.</p>"
        }
        struct Key: Hashable { var channel: String, id: String }
        var seen = Set<Key>()
        var sections: [(Key, PublisherRepository.PackageState?)] = packages.map {
            (Key(channel: $0.channel, id: $0.id), $0)
        }
        for health in report.versions
        where !packages.contains(where: { $0.id == health.package && $0.channel == health.channel }) {
            sections.append((Key(channel: health.channel, id: health.package), nil))
        }
        for (key, state) in sections where seen.insert(key).inserted {
            let versions = report.versions.filter { $0.package == key.id && $0.channel == key.channel }
            var names = state?.versions ?? []
            for health in versions where !names.contains(health.version) { names.append(health.version) }
            names.sort { VersionOrder($0) < VersionOrder($1) }
            html += "<section class=\"package\"><h2>\(escape(key.id))"
            html += key.channel.isEmpty ? "" : " <small>channel \(escape(key.channel))</small>"
            if state?.disabled == true { html += " <small class=\"bad\">disabled</small>" }
            html += "</h2><table><tr><th>version</th><th>state</th><th>rollout</th><th>devices</th><th>installed</th>"
            html +=
                "<th>confirmed</th><th>rolled back</th><th>blocked</th><th>failure rate (95% interval)</th><th></th></tr>"
            for name in names.reversed() {
                let health = versions.first { $0.version == name }
                var stateText = "not released"
                var rollout = ""
                if let state {
                    if state.current == name {
                        stateText = "current"
                        rollout = "\(state.rollout)%"
                        if let burst = RolloutPolicy().burst(health) {
                            rollout += " <small class=\"bad held\">held: \(escape(burst))</small>"
                        }
                    } else if state.releases.contains(name) {
                        stateText = state.previous == name ? "previous" : "earlier release"
                        if state.previous == name && state.rollout < 100 { rollout = "\(100 - state.rollout)%" }
                    } else if !state.versions.contains(name) {
                        stateText = "not in the manifest"
                    }
                }
                let rate =
                    health.map {
                        String(
                            format: "%.1f%% (%.1f–%.1f%%)",
                            $0.failureRate * 100,
                            $0.failureInterval.lower * 100,
                            $0.failureInterval.upper * 100
                        )
                    } ?? "–"
                let failing = (health?.failureInterval.lower ?? 0) > 0.05
                html +=
                    "<tr class=\"version\" data-version=\"\(escape(name))\"><td>\(escape(name))</td><td>\(stateText)</td><td>\(rollout)</td>"
                html +=
                    "<td>\(health?.devices ?? 0)</td><td>\(health?.installed ?? 0)</td><td>\(health?.confirmed ?? 0)</td>"
                html += "<td>\(health?.rolledBack ?? 0)</td><td>\(health?.blocked ?? 0)</td>"
                html += "<td class=\"\(failing ? "bad" : "ok") rate\">\(rate)</td><td>"
                if let csrf, let state {
                    let hidden = hiddenFields(csrf: csrf, package: key.id, channel: key.channel, version: name)
                    if state.current == name {
                        if state.previous != nil {
                            html += form(hidden, action: "rollback", label: "Roll back", id: "rollback-\(key.id)")
                        }
                        html +=
                            "<form method=\"post\" action=\"/action\">\(hidden)<input type=\"hidden\" name=\"action\" value=\"rollout\">"
                        html +=
                            "<input name=\"percent\" size=\"3\" value=\"\(state.rollout)\" aria-label=\"rollout percentage\">"
                        html += "<button type=\"submit\">Set rollout</button></form>"
                    } else if state.versions.contains(name) {
                        html += form(hidden, action: "release", label: "Release", id: "release-\(key.id)-\(name)")
                    }
                }
                html += "</td></tr>"
            }
            html += "</table>"
            if let csrf, let state {
                let hidden = hiddenFields(csrf: csrf, package: key.id, channel: key.channel, version: "")
                html +=
                    state.disabled
                    ? form(hidden, action: "enable", label: "Enable", id: "enable-\(key.id)")
                    : form(hidden, action: "disable", label: "Disable", id: "disable-\(key.id)")
            }
            html += "<div>" + SVGPlot.adoption(versions) + SVGPlot.failureRates(versions) + "</div></section>"
        }
        if sections.isEmpty { html += "<p>No package yet: nothing released and no telemetry received.</p>" }
        html += "<h2>Actions</h2><table class=\"actions\"><tr><th>time</th><th>by</th><th>action</th><th>package</th>"
        html += "<th>version</th><th>detail</th><th>outcome</th></tr>"
        let formatter = ISO8601DateFormatter()
        for action in actions {
            html +=
                "<tr><td>\(formatter.string(from: action.at))</td><td>\(escape(action.actor))</td><td>\(escape(action.action))</td>"
            html += "<td>\(escape(action.package))\(action.channel.isEmpty ? "" : " (\(escape(action.channel)))")</td>"
            html +=
                "<td>\(escape(action.version))</td><td>\(escape(action.detail))</td><td>\(escape(action.outcome))</td></tr>"
        }
        html += "</table></body></html>"
        return html
    }

    private func hiddenFields(csrf: String, package: String, channel: String, version: String) -> String {
        [("csrf", csrf), ("package", package), ("channel", channel), ("version", version)].map {
            "<input type=\"hidden\" name=\"\($0.0)\" value=\"\(escape($0.1))\">"
        }.joined()
    }

    private func form(_ hidden: String, action: String, label: String, id: String) -> String {
        "<form method=\"post\" action=\"/action\">\(hidden)<input type=\"hidden\" name=\"action\" value=\"\(action)\">"
            + "<button type=\"submit\" id=\"\(escape(id))\">\(label)</button></form>"
    }
}

/// HTML-escapes text.
func escape(_ text: String) -> String {
    var result = ""
    for character in text {
        switch character {
        case "&": result += "&amp;"
        case "<": result += "&lt;"
        case ">": result += "&gt;"
        case "\"": result += "&quot;"
        case "'": result += "&#39;"
        default: result.append(character)
        }
    }
    return result
}

/// Compares two secrets in time independent of where they differ.
func constantTimeEqual(_ a: String, _ b: String) -> Bool {
    let x = Array(a.utf8)
    let y = Array(b.utf8)
    guard x.count == y.count else { return false }
    var difference: UInt8 = 0
    for index in x.indices { difference |= x[index] ^ y[index] }
    return difference == 0
}

/// Parses `application/x-www-form-urlencoded`.
func parseForm(_ text: String) -> [String: String] {
    var result: [String: String] = [:]
    for pair in text.split(separator: "&") {
        let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        func decode(_ part: Substring) -> String {
            part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(part)
        }
        guard let name = parts.first else { continue }
        result[decode(name)] = parts.count > 1 ? decode(parts[1]) : ""
    }
    return result
}

/// Plots drawn on the server as SVG.
enum SVGPlot {
    static let colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]

    /// Devices that installed or confirmed each version, over time.
    static func adoption(_ versions: [VersionHealth]) -> String {
        let width = 420.0
        let height = 180.0
        let left = 40.0
        let bottom = 24.0
        let points = versions.flatMap(\.adoption)
        var svg =
            "<svg class=\"adoption\" xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" role=\"img\" aria-label=\"adoption over time\">"
        svg += "<text x=\"\(left)\" y=\"14\" font-size=\"12\">adoption (devices)</text>"
        svg +=
            "<line x1=\"\(left)\" y1=\"\(height - bottom)\" x2=\"\(width - 10)\" y2=\"\(height - bottom)\" stroke=\"#888\"/>"
        svg += "<line x1=\"\(left)\" y1=\"20\" x2=\"\(left)\" y2=\"\(height - bottom)\" stroke=\"#888\"/>"
        guard let first = points.map(\.time).min(), let last = points.map(\.time).max() else {
            return svg + "<text x=\"\(left + 10)\" y=\"\(height / 2)\" font-size=\"12\">no installs yet</text></svg>"
        }
        let maxDevices = Double(max(1, points.map(\.devices).max() ?? 1))
        let span = max(1, last - first)
        func x(_ time: Double) -> Double { left + (time - first) / span * (width - left - 20) }
        func y(_ devices: Int) -> Double { height - bottom - Double(devices) / maxDevices * (height - bottom - 30) }
        svg += "<text x=\"4\" y=\"\(y(Int(maxDevices)) + 4)\" font-size=\"10\">\(Int(maxDevices))</text>"
        for (index, version) in versions.enumerated() where !version.adoption.isEmpty {
            let color = colors[index % colors.count]
            var path = "M\(x(first)),\(y(0))"
            for point in version.adoption {
                path += " L\(x(point.time)),\(y(point.devices - 1)) L\(x(point.time)),\(y(point.devices))"
            }
            path += " L\(x(last)),\(y(version.adoption.last?.devices ?? 0))"
            svg += "<path d=\"\(path)\" fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\"/>"
            svg +=
                "<text x=\"\(Int(width) - 60)\" y=\"\(30 + 14 * index)\" font-size=\"11\" fill=\"\(color)\">v\(escape(version.version))</text>"
        }
        return svg + "</svg>"
    }

    /// Each version's trial failure rate with its 95% interval.
    static func failureRates(_ versions: [VersionHealth]) -> String {
        let width = 300.0
        let height = 180.0
        let bottom = 24.0
        let top = 24.0
        var svg =
            "<svg class=\"failure\" xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" role=\"img\" aria-label=\"failure rate per version\">"
        svg += "<text x=\"8\" y=\"14\" font-size=\"12\">trial failure rate, 95% interval</text>"
        svg +=
            "<line x1=\"30\" y1=\"\(height - bottom)\" x2=\"\(width - 10)\" y2=\"\(height - bottom)\" stroke=\"#888\"/>"
        func y(_ rate: Double) -> Double { height - bottom - rate * (height - bottom - top) }
        svg +=
            "<text x=\"2\" y=\"\(y(1) + 4)\" font-size=\"10\">100%</text><text x=\"2\" y=\"\(y(0))\" font-size=\"10\">0</text>"
        let slot = (width - 40) / Double(max(1, versions.count))
        for (index, version) in versions.enumerated() {
            let center = 35 + slot * (Double(index) + 0.5)
            let barWidth = min(30, slot * 0.6)
            let color = version.failureInterval.lower > 0.05 ? "#d62728" : "#2ca02c"
            if version.trials > 0 {
                svg +=
                    "<rect x=\"\(center - barWidth / 2)\" y=\"\(y(version.failureRate))\" width=\"\(barWidth)\" height=\"\(y(0) - y(version.failureRate))\" fill=\"\(color)\" opacity=\"0.6\"/>"
                svg +=
                    "<line x1=\"\(center)\" y1=\"\(y(version.failureInterval.lower))\" x2=\"\(center)\" y2=\"\(y(version.failureInterval.upper))\" stroke=\"#222\"/>"
            }
            svg += "<text x=\"\(center - 8)\" y=\"\(height - 8)\" font-size=\"11\">v\(escape(version.version))</text>"
        }
        return svg + "</svg>"
    }
}
