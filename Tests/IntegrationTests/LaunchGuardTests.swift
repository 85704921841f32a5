import Foundation
import HotCore
import HotTestServers
import HotTesting
import HotVerify
import Testing

/// `Examples/LaunchGuard` run as an app's launches against a signed repository on nginx.
@Suite("LaunchGuard")
struct LaunchGuardTests {
    @Test(
        "a version that crashes at launch is rolled back and blocked, never downloaded again, and a newer one is taken"
    )
    func crashingVersionIsRolledBack() async throws {
        let key = try CryptoSigner.generate()
        let keys = try makeTemporaryDirectory("keys")
        let publicKey = keys.appendingPathComponent("server.pub")
        try key.publicKey.pem.write(to: publicKey, atomically: true, encoding: .utf8)
        let repository = try SignedRepository(keys: [key])
        try repository.pack(["main.js": Data("print(1)".utf8)], id: "app", version: "1")
        try repository.sign(with: [key])
        let nginx = try await NginxServer.start(root: repository.directory)
        defer { nginx.stopNow() }
        let store = try makeTemporaryDirectory("store")
        let executable = try builtExecutable("LaunchGuard").path
        let arguments = [
            "--manifest", repository.url(on: nginx).absoluteString, "--root", store.path, "--trust", publicKey.path,
        ]
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
        #expect(run.status == SIGABRT)
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
}
