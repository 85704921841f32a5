import Foundation
import HotCore
import HotTesting
import Testing

/// The examples under `Examples/`, built as products and run as a user runs them, against
/// repositories the tests publish and nginx on 127.0.0.1.
@Suite("Examples")
struct ExampleTests {
    static let scriptPatches = packageDirectory.appendingPathComponent("Examples/ScriptPatches")

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

    @Test("ScriptPatches: the signed patch list over HTTP and file://, one refused patch, launch activation, a debug patch")
    func scriptPatches() async throws {
        let repo = try makeTemporaryDirectory("patch-repo")
        let keys = try makeTemporaryDirectory("keys")
        let key = try await PatchServerKey.make(in: keys, name: "server")
        let patches = Self.scriptPatches.appendingPathComponent("Patches")
        try await Subprocess.check(
            Self.scriptPatches.appendingPathComponent("make-patch-list").path,
            [key.privateKey.path, repo.path] + ["fix-login", "broken-banner", "dark-mode"].map {
                patches.appendingPathComponent($0).path
            })
        let publicKey = keys.appendingPathComponent("server.pub").path
        let nginx = try await NginxServer.start(root: repo)
        let store = try makeTemporaryDirectory("store")

        // First run over HTTP: nothing installed at launch; three patches added, in the
        // list's order; the broken one refused alone; the debug patch from its folder.
        let first = try await Self.run(
            "ScriptPatches",
            [nginx.baseURL.appendingPathComponent("patches.json").absoluteString, "--key", publicKey,
             "--root", store.path, "--debug-patch", Self.scriptPatches.appendingPathComponent("DebugPatch").path])
        #expect(first.status == 0)
        #expect(Self.lines(first.stdout, starting: "fix-login: add").count == 1)
        #expect(Self.lines(first.stdout, starting: "activate ").prefix(3) == [
            "activate fix-login: ok",
            "activate broken-banner: failed: package broken-banner: the activation hook refused version \(try md5(of: repo.appendingPathComponent("patches/broken-banner.zip")).hex): syntax error at line 7: unexpected ')'",
            "activate dark-mode: ok",
        ])
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
            [repo.appendingPathComponent("patches.json").absoluteString, "--key", publicKey, "--root", store.path])
        #expect(second.status == 0)
        let launch = try #require(second.stdout.components(separatedBy: "checking ").first)
        #expect(Self.lines(launch, starting: "activate ").map { $0.components(separatedBy: ":")[0] } == [
            "activate fix-login", "activate broken-banner", "activate dark-mode", "activate debug",
        ])
        #expect(Self.lines(launch, starting: "activate broken-banner").first?.contains("failed") == true)
        #expect(Self.lines(second.stdout, starting: "debug: remove").count == 1)
        #expect(second.stdout.contains("nothing new to activate"))
        #expect(Self.lines(second.stdout, starting: "debug ").isEmpty)
        #expect(Self.lines(second.stdout, starting: "dark-mode ").last?.hasSuffix(" installed") == true)

        // A list signed by another key is refused whole: the run fails, the patches stay.
        let other = try await PatchServerKey.make(in: keys, name: "other")
        try await Subprocess.check(
            Self.scriptPatches.appendingPathComponent("make-patch-list").path,
            [other.privateKey.path, repo.path, patches.appendingPathComponent("fix-login").path])
        let refused = try await Subprocess.run(
            try builtExecutable("ScriptPatches").path,
            [repo.appendingPathComponent("patches.json").absoluteString, "--key", publicKey, "--root", store.path])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("ScriptPatches: error:"))
        #expect(Self.lines(refused.stdout, starting: "activate fix-login: ok").count == 1)
        let stored = try readTree(store.appendingPathComponent("packages/dark-mode"))
        #expect(stored.values.contains(try Data(contentsOf: patches.appendingPathComponent("dark-mode/main.js"))))
    }
}
