import Foundation
import HotCore
import HotServerKit
import HotTestServers
import HotTesting
import Testing

/// Sends one request to the console with curl (its answer's headers are not read): `headers` as given (a `Host` among them replaces curl's),
/// `form` as the body of a POST, the cookies of `jar` sent and kept.
private func request(
    _ url: URL,
    headers: [String] = [],
    form: String? = nil,
    jar: URL? = nil
) async throws -> Answer {
    let body = try scratch("answer").appendingPathComponent("body")
    var arguments = ["-s", "-o", body.path, "-w", "%{http_code}"]
    for header in headers { arguments += ["-H", header] }
    if let jar { arguments += ["-b", jar.path, "-c", jar.path] }
    if let form {
        arguments += ["-X", "POST", "-H", "Content-Type: application/x-www-form-urlencoded", "--data-raw", form]
    }
    let output = try await Subprocess.check("curl", arguments + [url.absoluteString])
    let status = Int(output.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    return Answer(status: status, body: (try? String(contentsOf: body, encoding: .utf8)) ?? "", headers: [:])
}

/// The CSRF token of the page's forms, when it shows them.
private func csrf(in page: String) -> String? {
    guard let range = page.range(of: "name=\"csrf\" value=\"") else { return nil }
    let rest = page[range.upperBound...]
    return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
}

/// A console over a repository with `app` 1 released, started with `arguments` besides.
private func startConsole(
    _ app: PublishedApp,
    _ arguments: [String] = []
) async throws -> (server: ServerProcess, token: String) {
    let database = "sqlite:" + app.directory.appendingPathComponent("telemetry.db").path
    let server = try await ServerProcess.start(
        [
            "console", "--db", database, "--repo", app.repo.path, "--key", app.privateKey.path,
        ] + arguments
    )
    let token = try #require(server.lines.first { $0.hasPrefix("token ") }.map { String($0.dropFirst(6)) })
    return (server, token)
}

@Suite("The console refuses what it must not act on")
struct ConsoleHardeningTests {
    @Test("a field that hot would read as an option is answered 400; nothing is signed or recorded")
    func optionLikeFieldsAreRefused() async throws {
        let app = try await PublishedApp.make()
        try await app.publish(version: "1")
        let (console, token) = try await startConsole(app)
        defer { console.stop() }
        let action = console.url.appendingPathComponent("action")
        let bearer = "Authorization: Bearer \(token)"
        let manifest = app.repo.appendingPathComponent("manifest.json")
        let signed = try Data(contentsOf: manifest)

        for form in [
            "action=disable&package=--help", "action=enable&package=-h", "action=release&package=app&version=--help",
            "action=rollback&package=app&to=--version", "action=disable&package=app&channel=--help",
            "action=rollout&package=app&version=1&percent=5&channel=-x", "action=disable&package=..",
            "action=disable&package=a%2Fb",
        ] {
            let answer = try await request(action, headers: [bearer], form: form)
            #expect(answer.status == 400, "\(form): \(answer.status) \(answer.body)")
            #expect(answer.body.hasPrefix("error: "), "\(form): \(answer.body)")
        }
        // A form from a session is refused the same way.
        let jar = try scratch("jar").appendingPathComponent("cookies")
        _ = try await request(
            console.url.appendingPathComponent("login").appending(queryItems: [
                URLQueryItem(name: "token", value: token)
            ]),
            jar: jar
        )
        let page = try await request(console.url, jar: jar)
        let csrfToken = try #require(csrf(in: page.body), "no form on the page after login")
        let fromSession = try await request(
            action,
            form: "csrf=\(csrfToken)&action=disable&package=--help",
            jar: jar
        )
        #expect(fromSession.status == 400, "\(fromSession.body)")
        #expect(fromSession.body.contains("must not start with '-'"), "\(fromSession.body)")

        #expect(try Data(contentsOf: manifest) == signed, "the manifest was signed again")
        let after = try await request(console.url)
        #expect(!after.body.contains("<td>disable</td>"), "an action was recorded")
        #expect(!after.body.contains("<td>enable</td>") && !after.body.contains("<td>release</td>"))

        // A valid action still reaches hot, its names after `--`, and is signed and recorded.
        let disable = try await request(action, headers: [bearer], form: "action=disable&package=app")
        #expect(disable.status == 200 && disable.body == "ok", "\(disable.status) \(disable.body)")
        #expect(try Data(contentsOf: manifest) != signed)
        #expect(try await request(console.url).body.contains("<td>disable</td>"))
    }

    @Test("a session past its lifetime opens nothing: its form is refused and nothing is signed")
    func expiredSessionIsRefused() async throws {
        let app = try await PublishedApp.make()
        try await app.publish(version: "1")
        let (console, token) = try await startConsole(app, ["--session-lifetime", "1"])
        defer { console.stop() }
        let login = console.url.appendingPathComponent("login").appending(queryItems: [
            URLQueryItem(name: "token", value: token)
        ])
        let deadline = ContinuousClock.now + .seconds(60)
        // A session seen open: its cookie and its form's CSRF token (logging in again should
        // the second of its life pass before the page is read).
        var opened: (jar: URL, csrf: String)?
        while opened == nil, ContinuousClock.now < deadline {
            let jar = try scratch("jar").appendingPathComponent("cookies")
            #expect(try await request(login, jar: jar).status == 303)
            if let token = csrf(in: try await request(console.url, jar: jar).body) { opened = (jar, token) }
        }
        let (jar, csrfToken) = try #require(opened, "no session was ever seen open")
        // The session ends: the page it gets is read only again.
        var ended = false
        while !ended, ContinuousClock.now < deadline {
            ended = try await request(console.url, jar: jar).body.contains("<p>Read only")
            if !ended { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(ended, "the session never ended")
        let manifest = app.repo.appendingPathComponent("manifest.json")
        let signed = try Data(contentsOf: manifest)
        let answer = try await request(
            console.url.appendingPathComponent("action"),
            form: "csrf=\(csrfToken)&action=disable&package=app",
            jar: jar
        )
        #expect(answer.status == 403, "\(answer.status) \(answer.body)")
        #expect(try Data(contentsOf: manifest) == signed)
        #expect(!(try await request(console.url).body.contains("<td>disable</td>")))
    }

    @Test("sessions end at their absolute and their idle lifetime, whichever comes first")
    func sessionLifetimes() {
        var sessions = ConsoleSessions(lifetime: 3600, idleLifetime: 600)
        let start = Date(timeIntervalSince1970: 1_000_000)
        let (session, csrf) = sessions.open(now: start)
        // Used every five minutes: the idle lifetime restarts each time, the absolute one does not.
        var time = start
        while time.timeIntervalSince(start) < 3600 - 300 {
            time += 300
            #expect(sessions.csrfToken(of: session, now: time) == csrf)
        }
        #expect(sessions.csrfToken(of: session, now: start + 3600) == nil)
        #expect(sessions.count == 0)
        // Left alone past the idle lifetime.
        let (idle, _) = sessions.open(now: start)
        #expect(sessions.csrfToken(of: idle, now: start + 599) != nil)
        #expect(sessions.csrfToken(of: idle, now: start + 599 + 600) == nil)
        #expect(sessions.csrfToken(of: "not-a-session", now: start) == nil)
    }

    @Test("a request naming a foreign host (DNS rebinding) is answered 421 and changes nothing")
    func foreignHostIsRefused() async throws {
        let app = try await PublishedApp.make()
        try await app.publish(version: "1")
        let (console, token) = try await startConsole(app, ["--allowed-host", "console.example"])
        defer { console.stop() }
        let port = try #require(console.url.port)
        let manifest = app.repo.appendingPathComponent("manifest.json")
        let signed = try Data(contentsOf: manifest)
        let login = console.url.appendingPathComponent("login").appending(queryItems: [
            URLQueryItem(name: "token", value: token)
        ])
        let action = console.url.appendingPathComponent("action")

        for host in ["rebind.example:\(port)", "rebind.example", "127.0.0.1.rebind.example:\(port)"] {
            #expect(try await request(console.url, headers: ["Host: \(host)"]).status == 421, "\(host)")
            let jar = try scratch("jar").appendingPathComponent("cookies")
            #expect(try await request(login, headers: ["Host: \(host)"], jar: jar).status == 421, "\(host)")
            #expect(!((try? String(contentsOf: jar, encoding: .utf8)) ?? "").contains("hot_session"))
            let posted = try await request(
                action,
                headers: ["Host: \(host)", "Authorization: Bearer \(token)"],
                form: "action=disable&package=app"
            )
            #expect(posted.status == 421, "\(host): \(posted.body)")
        }
        #expect(try Data(contentsOf: manifest) == signed)

        for host in ["127.0.0.1:\(port)", "localhost:\(port)", "console.example:\(port)", "Console.Example."] {
            #expect(try await request(console.url, headers: ["Host: \(host)"]).status == 200, "\(host)")
        }
    }
}
