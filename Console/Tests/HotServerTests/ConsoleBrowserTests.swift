import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

/// Playwright (PyPI) driving Debian's chromium-headless-shell.
enum Browser {
    static let chromium: String? = {
        for path in ["/usr/bin/chromium-headless-shell", "/usr/lib/chromium/chrome-headless-shell"]
        where FileManager.default.isExecutableFile(atPath: path) {
            return path
        }
        return nil
    }()

    static let playwright = Subprocess.pythonImports("playwright.async_api")

    /// Runs where both are installed, and under CI=true whatever happens, so CI fails
    /// instead of skipping.
    static var runs: Bool {
        (chromium != nil && playwright) || ProcessInfo.processInfo.environment["CI"] == "true"
    }

    static let skipReason: Comment =
        "skipped: no Playwright (pip install playwright) or no chromium-headless-shell; scripts/ensure-deps test installs both. Under CI=true their absence fails"
}

@Suite("The console in a real browser", .enabled(if: Browser.runs, Browser.skipReason))
struct ConsoleBrowserTests {
    @Test("the page names the package, plots in SVG, shows v2 failing; Roll back makes a client install v1")
    func rollBackFromTheBrowser() async throws {
        let chromium = try #require(Browser.chromium, "no chromium-headless-shell")
        let app = try await PublishedApp.make()
        try await app.publish(version: "1")
        let nginx = try await NginxServer.start(root: app.repo)
        defer { nginx.stopNow() }
        let database = "sqlite:" + app.directory.appendingPathComponent("telemetry.db").path
        let console = try await ServerProcess.start([
            "console", "--db", database, "--repo", app.repo.path, "--key", app.privateKey.path,
        ])
        defer { console.stop() }
        let token = try #require(console.lines.first { $0.hasPrefix("token ") }.map { String($0.dropFirst(6)) })
        let collect = console.url.appendingPathComponent("collect")
        let manifest = nginx.baseURL.appendingPathComponent("manifest.json")

        // A device runs v1 and confirms it.
        let first = Device(
            store: try scratch("browser-device"),
            manifest: manifest,
            trust: app.publicKey,
            telemetry: collect
        )
        _ = try await first.launch()
        #expect(try await first.launch().running == "1")
        // v2 is released, and eight clients report it rolled back.
        try await app.publish(version: "2", crashes: true)
        let now = ISO8601DateFormatter().string(from: Date())
        for _ in 0..<8 {
            let body = #"""
                {"batch":"\#(UUID().uuidString.lowercased())","client":"\#(UUID().uuidString.lowercased())","sentAt":"\#(now)",
                 "events":[{"kind":"install","date":"\#(now)","packageID":"app","version":"2"},
                           {"kind":"rollback","date":"\#(now)","packageID":"app","version":"2","restoredVersion":"1"}]}
                """#
            #expect(try await post(Data(body.utf8), to: collect) == 204)
        }

        // Without a session the page has no action, and a forged post is refused.
        #expect(
            try await post(
                Data("action=rollback&package=app".utf8),
                to: console.url.appendingPathComponent("action"),
                type: "application/x-www-form-urlencoded"
            ) == 403
        )

        let script = try scratch("playwright").appendingPathComponent("console.py")
        try Data(
            #"""
            import asyncio, json, sys
            from playwright.async_api import async_playwright

            async def main(chromium, base, token):
                async with async_playwright() as p:
                    browser = await p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
                    page = await browser.new_page()
                    await page.goto(base + "/login?token=" + token)
                    before = await page.content()
                    svgs = await page.locator("svg").count()
                    rate = await page.locator('tr[data-version="2"] td.rate').inner_text()
                    await page.click("#rollback-app")
                    await page.wait_for_load_state("load")
                    after = await page.content()
                    await browser.close()
                    print(json.dumps({"before": before, "svgs": svgs, "rate": rate, "after": after}))

            asyncio.run(main(*sys.argv[1:]))
            """#.utf8
        ).write(to: script)
        let output = try await Subprocess.check(
            "python3",
            [
                script.path, chromium,
                console.url.absoluteString.trimmingCharacters(in: CharacterSet(charactersIn: "/")), token,
            ]
        )
        let page = try #require(try JSONSerialization.jsonObject(with: output.standardOutput) as? [String: Any])
        let before = try #require(page["before"] as? String)
        #expect(before.contains("<h2>app"))
        #expect((page["svgs"] as? Int ?? 0) >= 2)
        #expect(before.contains("<svg"))
        // 8 rolled back of 8 trials: 100%, its interval printed beside it.
        #expect((page["rate"] as? String)?.hasPrefix("100.0%") == true, "\(page["rate"] ?? "")")
        let after = try #require(page["after"] as? String)
        #expect(after.contains("<td>rollback</td>"), "\(after)")
        #expect(try app.currentRelease() == "1", "\(after.components(separatedBy: "<h2>Actions").last ?? "")")

        // A new client's first sync installs v1, not v2.
        let newcomer = Device(
            store: try scratch("browser-newcomer"),
            manifest: manifest,
            trust: app.publicKey,
            telemetry: collect
        )
        let run = try await newcomer.launch()
        #expect(run.output.contains("app: add, active bundle, 1 waits for the next launch"), "\(run.output)")
        #expect(try await newcomer.launch().running == "1")
    }
}
