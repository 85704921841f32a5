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

/// `Examples/LaunchGuard` run as several processes sharing one store, as an app and its
/// extensions do, while version 3 of the guarded package waits for the next launch. Each
/// launch stops itself between beginning and confirming (`--stop-before-confirm`), so that
/// every launch has begun before any confirms: the overlap is certain, not a race.
@Suite("Concurrent launches in real processes", .serialized)
struct ConcurrentLaunchProcessTests {
    /// A signed repository on nginx offering versions 1 then 3 of `app`, and a store where 1
    /// is confirmed and 3 waits for the next launch.
    final class Rig: @unchecked Sendable {
        let nginx: NginxServer
        let repository: SignedRepository
        let prepared: URL
        let work: URL
        let publicKey: URL
        var trials = 0

        init() async throws {
            let key = try CryptoSigner.generate()
            work = try makeTemporaryDirectory("launches")
            publicKey = work.appendingPathComponent("server.pub")
            try key.publicKey.pem.write(to: publicKey, atomically: true, encoding: .utf8)
            repository = try SignedRepository(keys: [key])
            try repository.pack(["main.js": Data("print(1)".utf8)], id: "app", version: "1")
            try repository.sign(with: [key])
            nginx = try await NginxServer.start(root: repository.directory)
            prepared = work.appendingPathComponent("prepared")
            var run = try await launch(root: prepared)  // the bundle runs; 1 is downloaded
            try #require(run.status == 0, "\(run.stderr)")
            run = try await launch(root: prepared)  // 1 runs and is confirmed
            try #require(running(run) == ["running 1"], "\(run.stdout)")
            try repository.pack(["main.js": Data("print(3)".utf8)], id: "app", version: "3")
            try repository.sign(with: [key])
            run = try await launch(root: prepared)  // 3 is downloaded and waits
            try #require(
                ExampleTests.lines(run.stdout, starting: "app: update, active 1, 3 waits for the next launch").count
                    == 1,
                "\(run.stdout)"
            )
        }

        func stop() async {
            await nginx.stop()
            try? FileManager.default.removeItem(at: work)
        }

        /// ``stop()`` on the calling thread, for a `defer`.
        func stopNow() {
            nginx.stopNow()
            try? FileManager.default.removeItem(at: work)
        }

        func arguments(root: URL) -> [String] {
            ["--manifest", repository.url(on: nginx).absoluteString, "--root", root.path, "--trust", publicKey.path]
        }

        /// One launch run to its end.
        func launch(root: URL, _ extra: [String] = []) async throws -> Subprocess.Output {
            try await Subprocess.run(try builtExecutable("LaunchGuard").path, arguments(root: root) + extra)
        }

        /// A launch started, which stops itself once it printed what it runs.
        func startStopping(root: URL, _ extra: [String] = [], name: String) throws -> HotRun {
            try HotRun(
                arguments(root: root) + ["--stop-before-confirm"] + extra,
                log: work.appendingPathComponent("\(name).log"),
                executable: "LaunchGuard"
            )
        }

        /// A fresh copy of the prepared store (hard links kept).
        func freshRoot() async throws -> URL {
            trials += 1
            let root = work.appendingPathComponent("trial-\(trials)")
            let copy = try await Subprocess.run("/bin/cp", ["-a", prepared.path, root.path])
            try #require(copy.status == 0, "\(copy.stderr)")
            return root
        }

        func running(_ output: Subprocess.Output) -> [String] {
            ExampleTests.lines(output.stdout, starting: "running ")
        }
    }

    /// Runs `count` launches on a fresh copy of the prepared store, every one begun before any
    /// confirms; returns their outputs and the root.
    func overlappingLaunches(_ count: Int, rig: Rig) async throws -> (outputs: [String], root: URL) {
        let root = try await rig.freshRoot()
        let runs = try (0..<count).map { try rig.startStopping(root: root, name: "trial-\(rig.trials)-\($0)") }
        for run in runs { try await run.waitUntilStopped() }
        for run in runs { run.signal(SIGCONT) }
        var outputs: [String] = []
        for run in runs {
            let ending = await run.wait()
            #expect(ending == .exited(0), "\(run.output)")
            outputs.append(run.standardOutput)
        }
        return (outputs, root)
    }

    /// What a launch after the overlapping ones runs, and whether anything is blocked.
    func checkNextLaunch(root: URL, rig: Rig) async throws {
        let next = try await rig.launch(root: root)
        #expect(next.status == 0, "\(next.stderr)")
        #expect(rig.running(next) == ["running 3"], "\(next.stdout)")
        #expect(!next.stdout.contains("rolled back"), "\(next.stdout)")
        let status = try await Subprocess.run(
            try builtExecutable("hot").path,
            ["status", "--root", root.path, "--json"]
        )
        #expect(status.status == 0, "\(status.stderr)")
        #expect(!status.stdout.contains("\"blocked\""), "\(status.stdout)")
    }

    @Test(
        "two launches at once, eight times, with version 3 waiting: 3 is never blocked, at least one runs it, the next launch runs it"
    )
    func twoLaunchesEightTrials() async throws {
        let rig = try await Rig()
        defer { rig.stopNow() }
        for _ in 0..<8 {
            let (outputs, root) = try await overlappingLaunches(2, rig: rig)
            #expect(outputs.allSatisfy { !$0.contains("rolled back") }, "\(outputs)")
            #expect(outputs.contains { $0.contains("running 3") }, "\(outputs)")
            try await checkNextLaunch(root: root, rig: rig)
        }
    }

    @Test("five launches at once: all run version 3, none blocks it")
    func fiveLaunches() async throws {
        let rig = try await Rig()
        defer { rig.stopNow() }
        let (outputs, root) = try await overlappingLaunches(5, rig: rig)
        #expect(outputs.allSatisfy { $0.contains("running 3") && !$0.contains("rolled back") }, "\(outputs)")
        try await checkNextLaunch(root: root, rig: rig)
    }

    @Test(
        "a launch stopped between begin and confirm: another launch joins its trial, confirms it, and nothing is deleted under it"
    )
    func stoppedLaunch() async throws {
        let rig = try await Rig()
        defer { rig.stopNow() }
        let root = try await rig.freshRoot()
        let stopped = try rig.startStopping(root: root, name: "stopped")
        try await stopped.waitUntilStopped()
        #expect(stopped.standardOutput.contains("running 3"))

        // A second launch while the first is stopped: it runs 3 too and confirms it.
        let other = try await rig.launch(root: root)
        #expect(other.status == 0, "\(other.stderr)")
        #expect(rig.running(other) == ["running 3"], "\(other.stdout)")
        #expect(!other.stdout.contains("rolled back"))
        #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent("packages/app/3/main.js").path))

        // A launch that runs only confirmed code meanwhile: the trial was confirmed, so 3.
        stopped.signal(SIGCONT)
        #expect(await stopped.wait() == .exited(0), "\(stopped.output)")
        try await checkNextLaunch(root: root, rig: rig)
    }

    @Test("with confirmedVersion, a launch beside a stopped trial runs version 1; the trial, continued, confirms 3")
    func confirmedVersionBesideStoppedTrial() async throws {
        let rig = try await Rig()
        defer { rig.stopNow() }
        let root = try await rig.freshRoot()
        let stopped = try rig.startStopping(root: root, name: "stopped")
        try await stopped.waitUntilStopped()
        let other = try await rig.launch(root: root, ["--concurrent-launch", "confirmedVersion"])
        #expect(other.status == 0, "\(other.stderr)")
        #expect(rig.running(other) == ["running 1"], "\(other.stdout)")
        #expect(!other.stdout.contains("rolled back"))
        stopped.signal(SIGCONT)
        #expect(await stopped.wait() == .exited(0), "\(stopped.output)")
        try await checkNextLaunch(root: root, rig: rig)
    }

    @Test("a stopped launch killed before it confirms: the next launch rolls 3 back and blocks it, as a crash")
    func killedLaunchIsRolledBack() async throws {
        let rig = try await Rig()
        defer { rig.stopNow() }
        let root = try await rig.freshRoot()
        let stopped = try rig.startStopping(root: root, name: "killed")
        try await stopped.waitUntilStopped()
        stopped.signal(SIGKILL)
        #expect(await stopped.wait() == .signalled(SIGKILL))
        let next = try await rig.launch(root: root)
        #expect(next.status == 0, "\(next.stderr)")
        #expect(rig.running(next) == ["running 1"], "\(next.stdout)")
        #expect(
            ExampleTests.lines(next.stdout, starting: "rolled back app 3 to 1: blocked").count == 1,
            "\(next.stdout)"
        )
    }
}
