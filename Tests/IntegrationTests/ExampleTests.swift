import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

/// The examples under `Examples/`, built as products and run as a user runs them, against
/// repositories the tests publish and nginx on 127.0.0.1.
@Suite("Examples")
struct ExampleTests {
    static let scriptPatches = packageDirectory.appendingPathComponent("Examples/ScriptPatches")
    static let resourcePacks = packageDirectory.appendingPathComponent("Examples/ResourcePacks")
    static let webOfflinePackages = packageDirectory.appendingPathComponent("Examples/WebOfflinePackages")

    /// Runs an example and returns its standard output; records its standard error when it fails.
    static func run(_ name: String, _ arguments: [String]) async throws -> (status: Int32, stdout: String) {
        let output = try await Subprocess.run(try builtExecutable(name).path, arguments)
        if output.status != 0 { Issue.record("\(name) exited \(output.status): \(output.stderr)") }
        return (output.status, output.stdout)
    }

    /// Lines of `output` that start with `prefix` once trimmed.
    static func lines(_ output: String, starting prefix: String) -> [String] {
        output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { $0.hasPrefix(prefix) }
    }

    @Test(
        "ScriptPatches: the signed patch list over HTTP and file://, one refused patch, launch activation, a debug patch"
    )
    func scriptPatches() async throws {
        let repo = try makeTemporaryDirectory("patch-repo")
        let keys = try makeTemporaryDirectory("keys")
        let key = try await PatchServerKey.make(in: keys, name: "server")
        let patches = Self.scriptPatches.appendingPathComponent("Patches")
        try await Subprocess.check(
            Self.scriptPatches.appendingPathComponent("make-patch-list").path,
            [key.privateKey.path, repo.path]
                + ["fix-login", "broken-banner", "dark-mode"].map {
                    patches.appendingPathComponent($0).path
                }
        )
        let publicKey = keys.appendingPathComponent("server.pub").path
        let nginx = try await NginxServer.start(root: repo)
        let store = try makeTemporaryDirectory("store")

        // First run over HTTP: nothing installed at launch; three patches added, in the
        // list's order; the broken one refused alone; the debug patch from its folder.
        let first = try await Self.run(
            "ScriptPatches",
            [
                nginx.baseURL.appendingPathComponent("patches.json").absoluteString, "--key", publicKey,
                "--root", store.path, "--debug-patch", Self.scriptPatches.appendingPathComponent("DebugPatch").path,
            ]
        )
        #expect(first.status == 0)
        #expect(Self.lines(first.stdout, starting: "fix-login: add").count == 1)
        #expect(
            Self.lines(first.stdout, starting: "activate ").prefix(3) == [
                "activate fix-login: ok",
                "activate broken-banner: failed: package broken-banner: the activation hook refused version \(try md5(of: repo.appendingPathComponent("patches/broken-banner.zip")).hex): syntax error at line 7: unexpected ')'",
                "activate dark-mode: ok",
            ]
        )
        #expect(first.stdout.contains("evaluate fix-login (v"))
        #expect(first.stdout.contains("main.js patches LoginViewController"))
        #expect(first.stdout.contains("evaluate debug (local folder): main.js patches DebugMenu"))
        #expect(Self.lines(first.stdout, starting: "broken-banner ").last?.hasSuffix(" failed") == true)
        #expect(Self.lines(first.stdout, starting: "fix-login ").last?.hasSuffix(" installed") == true)
        #expect(Self.lines(first.stdout, starting: "debug local-").last?.hasSuffix(" installed") == true)
        for path in ["fix-login", "broken-banner", "dark-mode"].map({ "/patches/\($0).zip" }) {
            #expect(nginx.requestCount(for: path) == 1)
        }
        await nginx.stop()

        // The same repository over file://: at launch every installed patch runs again (the
        // broken one fails again); the list removes the debug patch and downloads nothing.
        let second = try await Self.run(
            "ScriptPatches",
            [repo.appendingPathComponent("patches.json").absoluteString, "--key", publicKey, "--root", store.path]
        )
        #expect(second.status == 0)
        let launch = try #require(second.stdout.components(separatedBy: "checking ").first)
        #expect(
            Self.lines(launch, starting: "activate ").map { $0.components(separatedBy: ":")[0] } == [
                "activate fix-login", "activate broken-banner", "activate dark-mode", "activate debug",
            ]
        )
        #expect(Self.lines(launch, starting: "activate broken-banner").first?.contains("failed") == true)
        #expect(Self.lines(second.stdout, starting: "debug: remove").count == 1)
        #expect(second.stdout.contains("nothing new to activate"))
        #expect(Self.lines(second.stdout, starting: "debug ").isEmpty)
        #expect(Self.lines(second.stdout, starting: "dark-mode ").last?.hasSuffix(" installed") == true)

        // A list signed by another key is refused whole: the run fails, the patches stay.
        let other = try await PatchServerKey.make(in: keys, name: "other")
        try await Subprocess.check(
            Self.scriptPatches.appendingPathComponent("make-patch-list").path,
            [other.privateKey.path, repo.path, patches.appendingPathComponent("fix-login").path]
        )
        let refused = try await Subprocess.run(
            try builtExecutable("ScriptPatches").path,
            [repo.appendingPathComponent("patches.json").absoluteString, "--key", publicKey, "--root", store.path]
        )
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("ScriptPatches: error:"))
        #expect(Self.lines(refused.stdout, starting: "activate fix-login: ok").count == 1)
        let stored = try readTree(store.appendingPathComponent("packages/dark-mode"))
        #expect(stored.values.contains(try Data(contentsOf: patches.appendingPathComponent("dark-mode/main.js"))))
    }

    @Test(
        "ResourcePacks over HTTP and file://: on-demand packs of a signed manifest, one download for many requests, shared files, cancel, repair, delete, eviction"
    )
    func resourcePacks() async throws {
        let repo = try makeTemporaryDirectory("pack-repo")
        let keys = try makeTemporaryDirectory("pack-keys")
        try await Subprocess.check(
            "env",
            [
                "HOT=\(try builtExecutable("hot").path)",
                Self.resourcePacks.appendingPathComponent("make-repository").path, repo.path, keys.path,
            ]
        )
        let publicKey = keys.appendingPathComponent("release.pub").path
        /// The server path of a pack's archive, as `hot pack` named it.
        func archive(_ id: String) throws -> String {
            let names = try FileManager.default.contentsOfDirectory(
                atPath: repo.appendingPathComponent("packages").path
            )
            return "/packages/" + (try #require(names.first { $0.hasPrefix("\(id)-1-") && $0.hasSuffix(".zip") }))
        }
        // The large pack trickles, so the example cancels it mid-download.
        let nginx = try await NginxServer.start(
            root: repo,
            options: .init(locations: [.rateLimited(prefix: "/packages/3002-", bytesPerSecond: 300_000)])
        )
        let store = try makeTemporaryDirectory("store")
        let http = try await Self.run(
            "ResourcePacks",
            [
                nginx.baseURL.appendingPathComponent("manifest.json").absoluteString, "--key", publicKey, "--root",
                store.path, "--requests", "25",
            ]
        )
        #expect(http.status == 0)
        let out = http.stdout
        // The sync downloads no pack: all four are on demand.
        #expect(out.contains("sync: manifest 1, 4 on-demand packs offered, 0 bytes downloaded\n"))
        #expect(out.contains("  3002: on-demand, "))
        #expect(out.contains("25 concurrent requests for 3000: 1 download, every caller got packages/3000/1\n"))
        #expect(nginx.requestCount(for: try archive("3000")) == 1)
        #expect(Self.lines(out, starting: "fonts with a wrong password: wrongPassword:").count == 1)
        #expect(out.contains("4000: notFound: package 4000: the trusted manifest offers no such package\n"))
        #expect(out.contains("events fonts: downloading → verifying → failed → downloading → verifying → installed;"))
        #expect(
            Self.lines(out, starting: "events 3001: downloading → verifying → installed;").first?.contains("5/5 files")
                == true
        )
        #expect(out.contains("3000 + 3001: 11 files, 330"))
        #expect(out.contains("(3 shared files stored once, 120000 bytes saved)"))
        #expect(out.contains("resolve 3001 filter sepia.png -> packages/3001/1/sepia.png"))
        #expect(out.contains("resolve 3001 image paper.jpg -> packages/3001/1/paper.jpg"))
        #expect(out.contains("resolve fonts font Brush.ttf -> packages/fonts/1/Brush.ttf"))
        #expect(out.contains("resolve starter image frame.png -> packages/starter/1/frame.png"))
        #expect(out.contains("available: 3000 true, 3002 false"))
        #expect(out.contains("available: 3000/blend.jpg true, 3000/missing.jpg false"))
        #expect(out.contains("cancel 3002: cancelled: package 3002: the install was cancelled; available: false"))
        #expect(
            out.contains(
                "3002 again: the caller that left got cancelled, the other got packages/3002/1; available: true"
            )
        )
        #expect(nginx.requestCount(for: try archive("3002")) == 2)
        #expect(out.contains("verify 3001: missing sepia.png; state fileMissing"))
        #expect(out.contains("repair 3001: restored sepia.png, downloads 0, identical true, healthy true"))
        #expect(nginx.requestCount(for: try archive("3001")) == 1)
        #expect(
            Self.lines(out, starting: "delete 3000: 3 objects,").first?.hasSuffix("3001 healthy true (5 files hashed)")
                == true
        )
        // The budget evicts what is not open, least recently used first; asked again, a pack
        // is downloaded again.
        #expect(Self.lines(out, starting: "evict (budget 0, 3001 open): fonts, 3002;").count == 1)
        #expect(out.contains("fonts asked again: packages/fonts/1, downloaded again 1\n"))
        #expect(nginx.requestCount(for: try archive("fonts")) == 3)
        let states = try #require(out.components(separatedBy: "states:\n").last)
        #expect(
            Self.lines(states, starting: "").sorted() == [
                "3001 1 installed", "fonts 1 installed", "starter 1 installed",
            ]
        )
        await nginx.stop()

        // What the example left on disk: the repaired filter is the published one, the
        // bundled pack's image is the one shipped, the deleted and evicted packs are gone.
        let sepia = try await Subprocess.check(
            "unzip",
            ["-p", repo.appendingPathComponent(String(try archive("3001").dropFirst())).path, "sepia.png"]
        )
        #expect(try Data(contentsOf: store.appendingPathComponent("packages/3001/1/sepia.png")) == sepia.standardOutput)
        #expect(
            try String(contentsOf: store.appendingPathComponent("packages/starter/1/frame.png"), encoding: .utf8)
                == "starter frame\n"
        )
        for id in ["3000", "3002"] {
            #expect(!FileManager.default.fileExists(atPath: store.appendingPathComponent("packages/\(id)").path))
        }

        // The same repository over file://, into a fresh store.
        let local = try await Self.run(
            "ResourcePacks",
            [
                repo.appendingPathComponent("manifest.json").absoluteString, "--key", publicKey, "--root",
                try makeTemporaryDirectory("store").path,
            ]
        )
        #expect(local.status == 0)
        #expect(
            local.stdout.contains("20 concurrent requests for 3000: 1 download, every caller got packages/3000/1\n")
        )
        #expect(local.stdout.contains("repair 3001: restored sepia.png, downloads 0, identical true, healthy true"))
        #expect(local.stdout.contains("resolve starter font Starter.ttf -> packages/starter/1/Starter.ttf"))
    }

    @Test(
        "WebOfflinePackages over HTTP POST and file://: modules install, pages are served from the package, a disabled module opens online"
    )
    func webOfflinePackages() async throws {
        let repo = try makeTemporaryDirectory("h5-repo")
        let publish = Self.webOfflinePackages.appendingPathComponent("make-repository").path
        try await Subprocess.check(publish, [repo.path])
        // As the example's README configures nginx: only a POST to /check gets the answer.
        let check = NginxServer.Location(
            """
            location = /check {
                if ($request_method != POST) { return 403; }
                error_page 405 =200 /check.json;
            }
            """
        )
        let nginx = try await NginxServer.start(root: repo, options: .init(locations: [check]))
        let store = try makeTemporaryDirectory("store")
        let arguments = [nginx.baseURL.appendingPathComponent("check").absoluteString, "--root", store.path]

        let first = try await Self.run("WebOfflinePackages", arguments)
        #expect(first.status == 0)
        #expect(
            first.stdout.contains(
                #"posted {"data":{"appCode":"SomeApp","appVer":"1.2.0","h5vers":[],"platform":"ios"}}"#
            )
        )
        #expect(
            Self.lines(first.stdout, starting: "module ") == [
                "module 10010: add, version 1.0.4", "module 10020: add, version 1.0.2",
            ]
        )
        #expect(
            first.stdout.contains(
                "open https://m.example.com/home/index.html?tab=2#top -> app://m.example.com/home/index.html?tab=2#top (200 text/html; charset=utf-8, packages/10010/1.0.4/index.html)"
            )
        )
        #expect(
            first.stdout.contains(
                "open https://m.example.com/promo/ -> app://m.example.com/promo/ (200 text/html; charset=utf-8, packages/10020/1.0.2/index.html)"
            )
        )
        #expect(first.stdout.contains("-> online https://m.example.com/promo/../home/index.html (unsafePath)"))
        #expect(
            first.stdout.contains(
                "open https://www.example.com/about.html -> online https://www.example.com/about.html (notAModulePage)"
            )
        )
        let page = try Data(contentsOf: store.appendingPathComponent("packages/10020/1.0.2/index.html"))
        #expect(
            page == (try Data(contentsOf: Self.webOfflinePackages.appendingPathComponent("Modules/promo/index.html")))
        )

        // The server turns promo off: its files stay, its pages open online.
        try await Subprocess.check(publish, [repo.path, "--inactive", "10020"])
        let second = try await Self.run("WebOfflinePackages", arguments)
        #expect(
            second.stdout.contains(
                #"{"isActive":true,"moduleId":"10020","moduleVer":"1.0.2"}"#
            )
        )
        #expect(
            Self.lines(second.stdout, starting: "module ") == [
                "module 10010: unchanged, version 1.0.4", "module 10020: disable, version 1.0.2",
            ]
        )
        #expect(
            second.stdout.contains(
                "open https://m.example.com/promo/ -> online https://m.example.com/promo/ (inactive)"
            )
        )
        #expect(
            second.stdout.contains(
                "open https://m.example.com/home/js/app.js -> app://m.example.com/home/js/app.js (200 text/javascript; charset=utf-8, packages/10010/1.0.4/js/app.js)"
            )
        )
        #expect(Self.lines(second.stdout, starting: "10020 ") == ["10020 1.0.2 disabled"])
        #expect(try Data(contentsOf: store.appendingPathComponent("packages/10020/1.0.2/index.html")) == page)
        #expect(nginx.requestCount(for: "/check") == 2)
        await nginx.stop()

        // The recorded answer over file://, turned on again: promo is local once more, with no download.
        try await Subprocess.check(publish, [repo.path])
        let local = try await Self.run(
            "WebOfflinePackages",
            [repo.appendingPathComponent("check.json").absoluteString, "--root", store.path]
        )
        #expect(local.stdout.contains(#"{"isActive":false,"moduleId":"10020","moduleVer":"1.0.2"}"#))
        #expect(Self.lines(local.stdout, starting: "module 10020") == ["module 10020: enable, version 1.0.2"])
        #expect(
            local.stdout.contains(
                "open https://m.example.com/promo/ -> app://m.example.com/promo/ (200 text/html; charset=utf-8, packages/10020/1.0.2/index.html)"
            )
        )
    }
}
