import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

/// The device's clock set back and forward, as `faketime` (Debian's libfaketime) sets it for
/// the real `hot` and the LaunchGuard example: no update stops, no download is thrown away,
/// no good version is rolled back, and an expired manifest stays expired.
@Suite("Wrong clocks")
struct ClockTests {
    /// The files of `version`.
    static func files(_ version: String) -> [String: Data] {
        ["config.txt": Data("config \(version)".utf8), "data/blob.bin": noise(40_000, seed: UInt64(version) ?? 1)]
    }

    /// Runs `hot` under `faketime -m -f OFFSET`: the clock starts `offset` away from now and runs.
    static func hot(at offset: String, _ arguments: [String]) async throws -> Subprocess.Output {
        try await Subprocess.run(try faketime(), ["-m", "-f", offset, try builtExecutable("hot").path] + arguments)
    }

    /// Debian's `faketime`; the tests need it (`scripts/ensure-deps test` installs it).
    static func faketime() throws -> String {
        for directory in ["/usr/bin", "/usr/local/bin", "/opt/homebrew/bin"] {
            let candidate = directory + "/faketime"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw HotUpdateError(
            .notFound,
            "faketime is not installed; the clock tests need it: `apt-get install faketime` (scripts/ensure-deps test)"
        )
    }

    @Test("with the clock set back 10 minutes, then a day, then 20 days ahead and corrected, every sync installs")
    func updatesFlowWhateverTheClock() async throws {
        let setup = try await PublishedRepository("clock-back")
        defer { setup.stopNow() }
        try await setup.publish("1", files: Self.files("1"))
        try await PublisherWorkflowTests.hot(setup.sync)
        #expect(try await setup.active().version == "1")

        for (version, offset) in [("2", "-10m"), ("3", "-1d"), ("4", "+20d"), ("5", "+0"), ("6", "-3d")] {
            let archive = try await setup.publish(version, files: Self.files(version))
            let run = try await Self.hot(at: offset, setup.sync)
            #expect(run.status == 0, "version \(version), clock \(offset): \(run.stderr)")
            #expect(run.stdout.contains("app\tupdate\tok"), "version \(version), clock \(offset): \(run.stdout)")
            let active = try await setup.active()
            #expect(active.version == version, "clock \(offset)")
            #expect(active.files == Self.files(version), "clock \(offset)")
            // Downloaded once and installed: nothing fetched to be thrown away.
            #expect(setup.nginx.requestCount(for: archive) == 1, "version \(version), clock \(offset)")
            let again = try await Self.hot(at: offset, setup.sync)
            #expect(again.status == 0 && again.stdout.contains("app\tunchanged\tok"), "\(again.stdout) \(again.stderr)")
            #expect(setup.nginx.requestCount(for: archive) == 1, "version \(version), clock \(offset)")
        }
    }

    @Test("a manifest refused as expired with the clock 2 days ahead stays refused with the clock 30 minutes ahead")
    func expiryHasAFloor() async throws {
        let setup = try await PublishedRepository("clock-expiry")
        defer { setup.stopNow() }
        try await setup.publish("1", files: Self.files("1"), expires: "1h")
        try await PublisherWorkflowTests.hot(setup.sync)
        let installed = try await setup.active()
        #expect(installed.version == "1")

        // Version 2 is signed to expire in an hour too.
        try await setup.publish("2", files: Self.files("2"), expires: "1h")
        let ahead = try await Self.hot(at: "+2d", setup.sync)
        #expect(ahead.status != 0)
        #expect(ahead.stderr.contains("manifestExpired") || ahead.stderr.contains("expired"), "\(ahead.stderr)")

        // Set back to before the expiry: the client has already seen a later time.
        let back = try await Self.hot(at: "+30m", setup.sync)
        #expect(back.status != 0, "\(back.stdout)")
        #expect(back.stderr.contains("expired"), "\(back.stderr)")
        #expect(back.stderr.contains("already seen"), "\(back.stderr)")
        let after = try await setup.active()
        #expect(after.version == "1")
        #expect(after.files == installed.files)

        // The publisher signs anew (the clock corrected): the floor is at most a day past
        // the last signing, so the fresh manifest is accepted and version 2 installs.
        try await PublisherWorkflowTests.hot([
            "sign", "--repo", setup.repo, "--key", setup.privateKey, "--expires", "2d",
        ])
        let fresh = try await Self.hot(at: "+30m", setup.sync)
        #expect(fresh.status == 0, "\(fresh.stderr)")
        #expect(try await setup.active().version == "2")
    }

    @Test(
        "installed with the clock 20 days ahead, launched with it corrected, confirmed after it jumps 2 days: no rollback"
    )
    func launchesSurviveClockJumps() async throws {
        let setup = try await PublishedRepository("clock-launch")
        defer { setup.stopNow() }
        try await setup.publish("1", files: Self.files("1"))
        let timestamps = setup.work.appendingPathComponent("faketime.rc")
        try "+20d".write(to: timestamps, atomically: true, encoding: .utf8)
        // `faketime` starts the example with libfaketime loaded; the offset is read from the
        // file at every clock reading (FAKETIME, which would win over the file, is unset).
        let wrapper = [try Self.faketime(), "-m", "-f", "+0", "/usr/bin/env", "-u", "FAKETIME"]
        let environment: [String: String?] = [
            "FAKETIME_TIMESTAMP_FILE": timestamps.path,
            "FAKETIME_NO_CACHE": "1",
            // A real clock jump leaves the monotonic clock alone.
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        ]
        let arguments = [
            "--manifest", setup.manifestURL, "--root", setup.root, "--trust", setup.publicKey,
            // Ten minutes: a machine busy with other tests may take more than a minute between
            // the launch and its confirmation; the clock jumps by days.
            "--trial-timeout", "600",
        ]
        var launches = 0
        /// One launch of the example app under the faked clock.
        func launch(stopping: Bool = false) throws -> HotRun {
            launches += 1
            return try HotRun(
                arguments + (stopping ? ["--stop-before-confirm"] : []),
                environment: environment,
                log: setup.work.appendingPathComponent("launch\(launches).log"),
                executable: "LaunchGuard",
                wrapper: wrapper
            )
        }

        // Clock 20 days ahead: the bundle runs, version 1 is installed and waits.
        var run = try launch()
        #expect(await run.wait() == .exited(0), "\(run.output)")
        #expect(run.standardOutput.contains("running bundle"))

        // Clock corrected: version 1 runs on trial; the clock jumps 2 days forward before the
        // launch confirms, well past the 600 s the trial has.
        try "+0".write(to: timestamps, atomically: true, encoding: .utf8)
        run = try launch(stopping: true)
        try await run.waitUntilStopped()
        #expect(run.standardOutput.contains("running 1"), "\(run.output)")
        try "+2d".write(to: timestamps, atomically: true, encoding: .utf8)
        run.signal(SIGCONT)
        #expect(await run.wait() == .exited(0), "\(run.output)")

        // Clock set back a day: version 1 was confirmed, so it runs again, not rolled back.
        try "-1d".write(to: timestamps, atomically: true, encoding: .utf8)
        run = try launch()
        #expect(await run.wait() == .exited(0), "\(run.output)")
        #expect(run.standardOutput.contains("running 1"), "\(run.output)")
        #expect(!run.standardOutput.contains("rolled back"), "\(run.output)")
        let status = try await PublisherWorkflowTests.hot(["status", "--root", setup.root])
        #expect(!status.stdout.contains("blocked"), "\(status.stdout)")
    }
}
