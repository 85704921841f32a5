import Foundation
import HotCore
import HotTestServers
import HotTesting
import HotVerify
import Testing

/// `Examples/LaunchGuard` run as an app's launches against a signed repository on nginx.
@Suite("LaunchGuard")
struct LaunchGuardTests {
    /// A signed repository with version 1 of `app` on nginx, a store, and LaunchGuard's
    /// arguments for them.
    struct Rig {
        let key: CryptoSigner
        let repository: SignedRepository
        let nginx: NginxServer
        let store: URL
        let executable: String
        let arguments: [String]

        init() async throws {
            key = try CryptoSigner.generate()
            let keys = try makeTemporaryDirectory("keys")
            let publicKey = keys.appendingPathComponent("server.pub")
            try key.publicKey.pem.write(to: publicKey, atomically: true, encoding: .utf8)
            repository = try SignedRepository(keys: [key])
            try repository.pack(["main.js": Data("print(1)".utf8)], id: "app", version: "1")
            try repository.sign(with: [key])
            nginx = try await NginxServer.start(root: repository.directory)
            store = try makeTemporaryDirectory("store")
            executable = try builtExecutable("LaunchGuard").path
            arguments = [
                "--manifest", repository.url(on: nginx).absoluteString, "--root", store.path, "--trust", publicKey.path,
            ]
        }
    }

    @Test(
        "a version that crashes at launch is rolled back and blocked, never downloaded again, and a newer one is taken"
    )
    func crashingVersionIsRolledBack() async throws {
        let rig = try await Rig()
        defer { rig.nginx.stopNow() }
        let (key, repository, nginx, store) = (rig.key, rig.repository, rig.nginx, rig.store)
        let (executable, arguments) = (rig.executable, rig.arguments)
        func launch() async throws -> Subprocess.Output {
            try await Subprocess.run(executable, arguments)
        }
        func running(_ output: Subprocess.Output) -> [String] {
            ExampleTests.lines(output.stdout, starting: "running ")
        }

        // The bundle runs; version 1 is downloaded and waits.
        var run = try await launch()
        #expect(run.status == 0, "\(run.stderr)")
        #expect(running(run) == ["running bundle"])
        #expect(
            ExampleTests.lines(run.stdout, starting: "app: add, active bundle, 1 waits for the next launch").count == 1
        )

        // The next launch takes version 1.
        run = try await launch()
        #expect(run.status == 0, "\(run.stderr)")
        #expect(running(run) == ["running 1"])

        // Version 2 crashes at its first launch.
        let crashing = try repository.pack(
            ["main.js": Data("print(2)".utf8), "crash": Data()],
            id: "app",
            version: "2"
        )
        try repository.sign(with: [key])
        let crashingPath = "/packages/" + repository.archive(crashing).lastPathComponent
        run = try await launch()
        #expect(run.status == 0, "\(run.stderr)")
        #expect(running(run) == ["running 1"])
        #expect(nginx.requestCount(for: crashingPath) == 1)
        run = try await launch()
        #expect(run.ending == .signalled(SIGABRT))
        #expect(running(run) == ["running 2"])

        // The following launch runs version 1 again and exits 0.
        run = try await launch()
        #expect(run.status == 0, "\(run.stderr)")
        #expect(running(run) == ["running 1"])
        #expect(ExampleTests.lines(run.stdout, starting: "rolled back app 2 to 1: blocked").count == 1)
        #expect(ExampleTests.lines(run.stdout, starting: "app: blocked, active 1").count == 1)

        // Later launches never download 2 again.
        run = try await launch()
        #expect(run.status == 0, "\(run.stderr)")
        #expect(running(run) == ["running 1"])
        #expect(nginx.requestCount(for: crashingPath) == 1)

        // The operator sees the blocked version.
        let status = try await Subprocess.run(
            try builtExecutable("hot").path,
            ["status", "--root", store.path, "--json"]
        )
        #expect(status.status == 0, "\(status.stderr)")
        let document = try JSONSerialization.jsonObject(with: status.standardOutput) as? [String: Any]
        let packages = try #require(document?["packages"] as? [[String: Any]])
        let app = try #require(packages.first { $0["id"] as? String == "app" })
        #expect(app["version"] as? String == "1")
        #expect((app["blocked"] as? [[String: Any]])?.compactMap { $0["version"] as? String } == ["2"])

        // A good version 3 is taken at the launch after its download.
        try repository.pack(["main.js": Data("print(3)".utf8)], id: "app", version: "3")
        try repository.sign(with: [key])
        run = try await launch()
        #expect(run.status == 0, "\(run.stderr)")
        #expect(running(run) == ["running 1"])
        run = try await launch()
        #expect(run.status == 0, "\(run.stderr)")
        #expect(running(run) == ["running 3"])
        #expect(nginx.requestCount(for: crashingPath) == 1)
    }

    @Test(
        "another process holding the store lock (stopped with SIGSTOP, or in a plain loop): the launch gives up after its 1 s deadline, runs the confirmed version, says the trial was deferred and exits 0; the next launch tries and confirms the new version",
        .enabled(if: FaultPointBuild.testsRun, FaultPointBuild.skipReason)
    )
    func heldLockDefersTheTrial() async throws {
        let rig = try await Rig()
        defer { rig.nginx.stopNow() }
        let (key, repository, store) = (rig.key, rig.repository, rig.store)
        let (executable, arguments) = (rig.executable, rig.arguments)
        func launch() async throws -> (output: Subprocess.Output, seconds: Double) {
            let clock = ContinuousClock()
            let start = clock.now
            let output = try await Subprocess.run(executable, arguments)
            let elapsed = clock.now - start
            return (output, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        }
        func running(_ output: Subprocess.Output) -> [String] {
            ExampleTests.lines(output.stdout, starting: "running ")
        }

        // Version 1 installed and confirmed; version 2 installed, waiting for the next launch.
        _ = try await launch()
        var run = try await launch()
        #expect(running(run.output) == ["running 1"], "\(run.output.stdout)")
        try repository.pack(["main.js": Data("print(2)".utf8)], id: "app", version: "2")
        try repository.sign(with: [key])
        run = try await launch()
        #expect(run.output.stdout.contains("2 waits for the next launch"), "\(run.output.stdout)")

        // Two holders of the store lock from outside: util-linux's flock, stopped with SIGSTOP
        // (as a debugger or a suspended extension would be), and around a busy loop.
        let lockFile = store.appendingPathComponent("store.lock").path
        for (name, command, stop) in [
            ("stopped", "echo held; exec sleep 600", true), ("looping", "echo held; while :; do :; done", false),
        ] {
            let holder = try ChildProcess(
                "/usr/bin/flock",
                ["-x", lockFile, "sh", "-c", command],
                standardOutput: .pipe
            )
            #expect(holder.standardOutput.flatMap(ChildProcess.readLine) == "held")
            if stop { holder.signal(SIGSTOP) }
            run = try await launch()
            print("launch guard: with a \(name) holder, the launch took \(String(format: "%.2f", run.seconds)) s")
            #expect(run.output.status == 0, "\(name): \(run.output.stderr)")
            #expect(running(run.output) == ["running 1"], "\(name): \(run.output.stdout)")
            #expect(run.output.stdout.contains("trial deferred:"), "\(name): \(run.output.stdout)")
            #expect(run.output.stdout.contains("process \(holder.pid)"), "\(name): \(run.output.stdout)")
            #expect(run.output.stdout.contains("for more than 1 s"), "the launch's deadline: \(run.output.stdout)")
            // flock and its shell both hold the lock (the shell through the inherited descriptor).
            _ = try await Subprocess.run("pkill", ["-KILL", "-P", String(holder.pid)])
            holder.kill()
            await holder.exit()
        }

        // The holder gone, the next launch tries the newest version and confirms it.
        run = try await launch()
        #expect(run.output.status == 0, "\(run.output.stderr)")
        #expect(running(run.output) == ["running 2"], "\(run.output.stdout)")
        #expect(!run.output.stdout.contains("trial deferred"))
        // Confirmed: the launch after it runs 2 again, with nothing rolled back.
        run = try await launch()
        #expect(running(run.output) == ["running 2"], "\(run.output.stdout)")
        #expect(!run.output.stdout.contains("rolled back"), "\(run.output.stdout)")
    }
}
