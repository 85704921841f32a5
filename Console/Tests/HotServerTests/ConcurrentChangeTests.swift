import Foundation
import HotCore
import HotManifest
import HotTestServers
import Testing

/// The console and an operator's terminal change one repository at the same moment, as two
/// real processes: both take the repository's lock, so one change wins, the other is refused
/// with a clear error, and the repository is never half-written.
@Suite("A console action and hot release at once")
struct ConcurrentChangeTests {
    /// The refusal both give while the other holds the lock.
    static let busy = "another change of the repository is under way"

    @Test(
        "20 rounds of a console action against three hot release at once: one wins at a time, each loser says why, hot verify accepts"
    )
    func consoleAgainstCommandLine() async throws {
        let app = try await PublishedApp.make()
        try await app.publish(version: "1")
        try await app.publish(version: "2")
        let database = "sqlite:" + app.directory.appendingPathComponent("telemetry.db").path
        let console = try await ServerProcess.start([
            "console", "--db", database, "--repo", app.repo.path, "--key", app.privateKey.path,
        ])
        defer { console.stop() }
        let token = try #require(console.lines.first { $0.hasPrefix("token ") }.map { String($0.dropFirst(6)) })
        let action = console.url.appendingPathComponent("action").absoluteString
        let manifest = app.repo.appendingPathComponent("manifest.json")
        var refusedConsole = 0
        var refusedCommandLine = 0
        for round in 0..<20 {
            // Both started back to back, each a process of its own.
            let form = round % 2 == 0 ? "action=disable&package=app" : "action=enable&package=app"
            let curl = try ChildProcess(
                "curl",
                [
                    "-s", "-H", "Authorization: Bearer \(token)", "-X", "POST", "-H",
                    "Content-Type: application/x-www-form-urlencoded", "--data-raw", form, action,
                ],
                standardOutput: .pipe,
                standardError: .pipe
            )
            // Three terminals at once, so that the rounds overlap more often than not.
            let releases = try (0..<3).map { _ in
                try ChildProcess(
                    try executable("hot"),
                    [
                        "release", "app", round % 2 == 0 ? "1" : "2", "--rollout", String(round + 1), "--repo",
                        app.repo.path,
                    ],
                    standardOutput: .pipe,
                    standardError: .pipe
                )
            }
            let curlOutput = try #require(curl.standardOutput).readDataToEndOfFile()
            let curlEnding = await curl.exit(within: .seconds(60))
            #expect(curlEnding == .exited(0))
            let answer = String(decoding: curlOutput, as: UTF8.self)
            // Each side either did its change or was refused for another's, and said so.
            var winners = answer == "ok" ? 1 : 0
            if answer != "ok" {
                #expect(answer.contains(Self.busy), "round \(round): the console answered \(answer)")
                refusedConsole += 1
            }
            for release in releases {
                let complaint = String(
                    decoding: try #require(release.standardError).readDataToEndOfFile(),
                    as: UTF8.self
                )
                let ending = await release.exit(within: .seconds(60))
                if ending == .exited(0) {
                    winners += 1
                } else {
                    #expect(ending == .exited(1), "round \(round)")
                    #expect(complaint.contains(Self.busy), "round \(round): hot release said \(complaint)")
                    refusedCommandLine += 1
                }
            }
            #expect(winners >= 1, "round \(round): every change was refused")
            // Never half-written: the manifest parses whichever won, then verifies once signed.
            let envelope = try SignedEnvelope.parse(try Data(contentsOf: manifest))
            _ = try SignedManifestBody.decode(envelope.signed)
            _ = try await hot(["sign", "--repo", app.repo.path, "--key", app.privateKey.path, "--expires", "30d"])
            let verified = try await Subprocess.run(
                try executable("hot"),
                ["verify", "--repo", app.repo.path, "--trust", app.publicKey.path]
            )
            #expect(verified.status == 0, "round \(round): \(verified.stderr)")
        }
        // The console's side of a loss, for certain: flock(1) holds the lock while it acts.
        let lockFile = app.repo.appendingPathComponent(".hot-lock").path
        let holder = try ChildProcess("flock", [lockFile, "sleep", "30"], standardOutput: .null, standardError: .null)
        defer {
            holder.kill()
            _ = holder.waitUntilExit()
        }
        // Held once `flock -n` cannot take it.
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline, try await Subprocess.run("flock", ["-n", lockFile, "true"]).status == 0 {
            try await Task.sleep(for: .milliseconds(20))
        }
        let before = try Data(contentsOf: manifest)
        let refused = try await Subprocess.check(
            "curl",
            [
                "-s", "-H", "Authorization: Bearer \(token)", "-X", "POST", "-H",
                "Content-Type: application/x-www-form-urlencoded", "--data-raw", "action=disable&package=app", action,
            ]
        ).stdout
        #expect(refused.contains(Self.busy), "\(refused)")
        #expect(try Data(contentsOf: manifest) == before)
        print(
            "concurrent changes: 20 rounds, console refused \(refusedConsole), hot release refused \(refusedCommandLine)"
        )
    }
}
