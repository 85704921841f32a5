import Foundation
import HotCore
import HotTestServers
import HotTesting
import HotVerify
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Kills `Examples/LaunchGuard` at every step of a launch (beginning it, confirming it,
/// syncing after it) and checks that the next launch always runs a whole version and exits 0.
@Suite("Launch state machine under kills")
struct LaunchKillTests {
    /// A store where version 1 of `app` is confirmed and version 2 (good) waits for the next
    /// launch, and the repository that offers 2.
    struct Rig: Sendable {
        let template: URL
        let arguments: @Sendable (URL) -> [String]
        let nginx: NginxServer
        let logs: URL
    }

    static func makeRig(version2: [String: Data] = ["main.js": Data("print(2)".utf8)]) async throws -> Rig {
        let key = try CryptoSigner.generate()
        let keys = try makeTemporaryDirectory("keys")
        let publicKey = keys.appendingPathComponent("server.pub")
        try key.publicKey.pem.write(to: publicKey, atomically: true, encoding: .utf8)
        let repository = try SignedRepository(keys: [key])
        try repository.pack(["main.js": Data("print(1)".utf8)], id: "app", version: "1")
        try repository.sign(with: [key])
        let nginx = try await NginxServer.start(root: repository.directory)
        let manifest = repository.url(on: nginx).absoluteString
        let arguments: @Sendable (URL) -> [String] = {
            ["--manifest", manifest, "--root", $0.path, "--trust", publicKey.path]
        }
        let template = try makeTemporaryDirectory("launch-template").appendingPathComponent("store")
        let launchGuard = try builtExecutable("LaunchGuard").path
        for _ in 0..<2 { try await Subprocess.check(launchGuard, arguments(template)) }  // bundle, then 1
        try repository.pack(version2, id: "app", version: "2")
        try repository.sign(with: [key])
        try await Subprocess.check(launchGuard, arguments(template))  // 2 downloaded, waiting
        return Rig(
            template: template,
            arguments: arguments,
            nginx: nginx,
            logs: try makeTemporaryDirectory("launch-logs")
        )
    }

    /// A copy of the template store (hard links kept, as the object store needs).
    static func copy(_ rig: Rig, _ name: String) async throws -> URL {
        let root = try makeTemporaryDirectory("launch-\(name)").appendingPathComponent("store")
        try await Subprocess.check("cp", ["-a", rig.template.path, root.path])
        return root
    }

    /// After a death: the next launch exits 0 running a whole version whose files are those of
    /// that version, and `hot status --check` agrees. Returns the version run.
    static func recover(_ rig: Rig, root: URL, label: String) async throws -> String? {
        let output = try await Subprocess.run(try builtExecutable("LaunchGuard").path, rig.arguments(root))
        #expect(output.status == 0, "\(label): \(output.stderr)")
        let running = ExampleTests.lines(output.stdout, starting: "running ")
        #expect(running.count == 1, "\(label): \(output.stdout)")
        guard let version = running.first?.dropFirst("running ".count).description,
            ["1", "2"].contains(version)
        else {
            Issue.record("\(label): ran \(running)")
            return nil
        }
        let status = try await Subprocess.run(
            try builtExecutable("hot").path,
            ["status", "--root", root.path, "--json", "--check"]
        )
        #expect(status.status == 0, "\(label): \(status.stderr)")
        let document = try JSONSerialization.jsonObject(with: status.standardOutput) as? [String: Any]
        let app = (document?["packages"] as? [[String: Any]])?.first { $0["id"] as? String == "app" }
        #expect(app?["version"] as? String == version, "\(label)")
        #expect(app?["state"] as? String == "installed", "\(label)")
        let path = try #require(app?["path"] as? String)
        let text = try String(contentsOfFile: path + "/main.js", encoding: .utf8)
        #expect(text == "print(\(version))", "\(label)")
        // A launch that ran 1 after the kill blocked 2: that is the guarantee, not a loss.
        if version == "1" {
            #expect((app?["blocked"] as? [[String: Any]])?.count == 1, "\(label)")
        }
        return version
    }

    @Test(
        "an abort inside each commit of a launch leaves a store the next launch runs",
        .enabled(if: FaultPointBuild.testsRun, FaultPointBuild.skipReason)
    )
    func abortInEveryCommit() async throws {
        let rig = try await Self.makeRig()
        defer { rig.nginx.stopNow() }
        var ran: [Int: String] = [:]
        // A launch that activates a waiting version commits: begin (1), confirm (2), the
        // sync's plan (3, when it records anything). Past the last, the run finishes.
        for occurrence in 1...4 {
            let root = try await Self.copy(rig, "abort-\(occurrence)")
            let run = try HotRun(
                rig.arguments(root),
                environment: ["HOT_ABORT_AT": "mid-commit:\(occurrence)"],
                log: rig.logs.appendingPathComponent("abort-\(occurrence).log"),
                executable: "LaunchGuard"
            )
            _ = await run.wait()
            ran[occurrence] = try await Self.recover(rig, root: root, label: "mid-commit:\(occurrence)")
        }
        // Dying inside the first commit leaves 2 waiting: the next launch takes it. Dying
        // inside the confirmation leaves 2 on trial, unconfirmed: the next launch rolls it back.
        #expect(ran[1] == "2")
        #expect(ran[2] == "1")
        #expect(ran[4] == "2")
    }

    @Test("SIGKILL at moments spread over a launch leaves a store the next launch runs")
    func sigkillDuringLaunch() async throws {
        let rig = try await Self.makeRig()
        defer { rig.nginx.stopNow() }
        let delays = [0, 2, 5, 10, 15, 20, 30, 45, 60, 90, 150]
        var outcomes: [String: Int] = [:]
        var killed = 0
        for (index, delay) in delays.enumerated() {
            let root = try await Self.copy(rig, "kill-\(index)")
            let run = try HotRun(
                rig.arguments(root),
                log: rig.logs.appendingPathComponent("kill-\(index).log"),
                executable: "LaunchGuard"
            )
            run.kill(after: .milliseconds(delay))
            // Only the ending tells whether the kill landed: a launch that had just exited
            // (not yet reaped) takes the signal without dying of it.
            let ending = await run.wait()
            let died = ending == .signalled(SIGKILL)
            if died {
                killed += 1
            } else {
                #expect(ending == .exited(0), "a launch ended by itself with \(ending): \(run.standardError)")
            }
            let label = "SIGKILL after \(delay) ms (\(ending))"
            let version = try await Self.recover(rig, root: root, label: label)
            outcomes["\(died ? "killed" : "finished") -> running \(version ?? "?")", default: 0] += 1
        }
        let summary = outcomes.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
        print("launch kills: \(killed) of \(delays.count) launches died of SIGKILL; \(summary)")
        // Recovering from a launch that finished proves nothing about kills: some must land.
        #expect(killed > 0, "no launch died of SIGKILL: \(summary)")
    }

    @Test("SIGKILL of a launch that froze before confirming: the next launch rolls back and blocks")
    func sigkillFrozenTrial() async throws {
        let rig = try await Self.makeRig(version2: ["main.js": Data("print(2)".utf8), "hang": Data()])
        defer { rig.nginx.stopNow() }
        let root = try await Self.copy(rig, "frozen")
        let run = try HotRun(
            rig.arguments(root),
            log: rig.logs.appendingPathComponent("frozen.log"),
            executable: "LaunchGuard"
        )
        // Wait for the launch to load 2 (its trial is recorded before that line), then kill it.
        var waited = 0
        while !run.standardOutput.contains("running 2\n"), waited < 2000 {
            try await Task.sleep(for: .milliseconds(10))
            waited += 1
        }
        #expect(run.standardOutput.contains("running 2\n"))
        #expect(run.kill())
        #expect(await run.wait() == .signalled(SIGKILL))
        #expect(try await Self.recover(rig, root: root, label: "frozen trial") == "1")
        // And it stays that way: the following launch runs 1 again.
        #expect(try await Self.recover(rig, root: root, label: "after the rollback") == "1")
    }
}
