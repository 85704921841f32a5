import Foundation
import HotCore
import HotServerKit
import HotTestServers
import HotTesting
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The whole loop with the real parts: a fleet of LaunchGuard processes, each with its own
/// store, syncing from a signed repository on nginx and reporting to `hot-server collect`
/// over SQLite; version 2 crashes at launch on every device.
@Suite("A fleet reporting to hot-server")
struct FleetTests {
    @Test(
        "12 devices: v1 confirmed, v2 rolled back 12 times; bad batches change nothing; rollout advance rolls v2 back"
    )
    func fleet() async throws {
        let app = try await PublishedApp.make()
        try await app.publish(version: "1")
        let nginx = try await NginxServer.start(root: app.repo)
        defer { nginx.stopNow() }
        let database = "sqlite:" + app.directory.appendingPathComponent("telemetry.db").path
        let collector = try await ServerProcess.start(["collect", "--db", database])
        defer { collector.stop() }
        let collect = collector.url.appendingPathComponent("collect")

        let manifest = nginx.baseURL.appendingPathComponent("manifest.json")
        let devices = try (0..<12).map { index in
            Device(
                store: try scratch("device-\(index)"),
                manifest: manifest,
                trust: app.publicKey,
                telemetry: collect
            )
        }
        /// Launches every device once, four at a time; returns each one's outcome.
        func launchAll() async throws -> [(ending: ChildProcess.Ending, running: String, output: String)] {
            var results: [(ending: ChildProcess.Ending, running: String, output: String)] = []
            for group in stride(from: 0, to: devices.count, by: 4) {
                try await withThrowingTaskGroup(
                    of: (Int, (ending: ChildProcess.Ending, running: String, output: String)).self
                ) {
                    tasks in
                    for index in group..<min(group + 4, devices.count) {
                        tasks.addTask { (index, try await devices[index].launch()) }
                    }
                    var outcomes: [(Int, (ending: ChildProcess.Ending, running: String, output: String))] = []
                    for try await outcome in tasks { outcomes.append(outcome) }
                    results += outcomes.sorted { $0.0 < $1.0 }.map(\.1)
                }
            }
            return results
        }

        // Version 1: downloaded at the first launch, run and confirmed at the second.
        var runs = try await launchAll()
        #expect(runs.allSatisfy { $0.ending == .exited(0) && $0.running == "bundle" }, "\(runs.map(\.output))")
        runs = try await launchAll()
        #expect(runs.allSatisfy { $0.ending == .exited(0) && $0.running == "1" }, "\(runs.map(\.output))")

        // Version 2 crashes at launch: downloaded, run (abort), rolled back at the next launch.
        try await app.publish(version: "2", crashes: true)
        runs = try await launchAll()
        #expect(runs.allSatisfy { $0.ending == .exited(0) && $0.running == "1" }, "\(runs.map(\.output))")
        runs = try await launchAll()
        #expect(runs.allSatisfy { $0.ending == .signalled(SIGABRT) && $0.running == "2" }, "\(runs.map(\.output))")
        runs = try await launchAll()
        #expect(runs.allSatisfy { $0.ending == .exited(0) && $0.running == "1" }, "\(runs.map(\.output))")

        // Every event reached the collector: each run flushed before it exited, and the
        // rollbacks were sent by the launch after the crash.
        var versions = try await report(database)
        let v1 = try #require(entry(versions, "app", "1"))
        let v2 = try #require(entry(versions, "app", "2"))
        #expect((v1["confirmed"] as? Int ?? 0) >= 12)
        #expect(v1["confirmedLaunches"] as? Int == 12)  // one confirmed trial a device
        #expect(v1["rolledBack"] as? Int == 0)
        #expect(v2["rolledBack"] as? Int == 12)
        #expect(v2["rollbacks"] as? Int == 12)
        #expect(v2["blocked"] as? Int == 12)
        #expect(v2["installed"] as? Int == 12)
        #expect(v2["confirmed"] as? Int == 0)
        #expect(v2["failureRate"] as? Double == 1)
        #expect(v1["failureRate"] as? Double == 0)
        #expect(v1["devices"] as? Int == 12)
        for store in devices.map(\.store) {
            let queue = store.appendingPathComponent("telemetry/queue.jsonl")
            #expect(((try? Data(contentsOf: queue)) ?? Data()).isEmpty, "unsent events left in \(queue.path)")
        }

        // A malformed batch is answered 4xx and changes no count.
        let before = try await report(database).map { $0.filter { $0.key != "adoption" } as NSDictionary }
        let client = UUID().uuidString.lowercased()
        func batch(_ events: String, id: String = UUID().uuidString.lowercased()) -> Data {
            Data(
                #"{"batch":"\#(id)","client":"\#(client)","sentAt":"\#(ISO8601DateFormatter().string(from: Date()))","events":[\#(events)]}"#
                    .utf8
            )
        }
        let now = ISO8601DateFormatter().string(from: Date())
        let rollback = #"{"kind":"rollback","date":"\#(now)","packageID":"app","version":"2"}"#
        #expect(try await post(Data("{not json".utf8), to: collect) == 400)
        #expect(
            try await post(batch(#"{"kind":"explode","date":"\#(now)","packageID":"app","version":"2"}"#), to: collect)
                == 400
        )
        #expect(
            try await post(batch(#"{"kind":"rollback","date":"\#(now)","packageID":"..","version":"2"}"#), to: collect)
                == 400
        )
        #expect(try await post(batch(rollback), to: collect, type: "text/plain") == 415)
        #expect(
            try await post(
                Data(#"{"batch":"x","client":"\#(client)","sentAt":"\#(now)","events":[\#(rollback)]}"#.utf8),
                to: collect
            )
                == 400
        )
        let huge = Array(repeating: rollback, count: 3000).joined(separator: ",")
        #expect(try await post(batch(huge), to: collect) == 413)
        let after = try await report(database).map { $0.filter { $0.key != "adoption" } as NSDictionary }
        #expect(before == after)

        // A batch sent twice is stored once.
        let twice = batch(rollback)
        #expect(try await post(twice, to: collect) == 204)
        #expect(try await post(twice, to: collect) == 200)
        versions = try await report(database)
        #expect(entry(versions, "app", "2")?["rollbacks"] as? Int == 13)

        // The rollout command, holding only a rollout role key, sees v2 failing and rolls it
        // back with a signed rollout step; a new device runs v1.
        #expect(try app.currentRelease() == "2")
        let advance = try await LoneServer.check([
            "rollout", "advance", "--repo", app.repo.path, "--db", database, "--rollout-role", "--key",
            app.rolloutKey.path,
        ])
        #expect(advance.stdout.contains("app 2: halt and roll back"), "\(advance.stdout)")
        #expect(try app.currentRelease() == "1")
        let newcomer = Device(
            store: try scratch("newcomer"),
            manifest: manifest,
            trust: app.publicKey,
            telemetry: collect
        )
        #expect(try await newcomer.launch().running == "bundle")
        let second = try await newcomer.launch()
        #expect(second.ending == .exited(0) && second.running == "1", "\(second.output)")
        // Run again, the rollout holds: nothing fails now.
        let again = try await LoneServer.check([
            "rollout", "advance", "--repo", app.repo.path, "--db", database, "--rollout-role", "--key",
            app.rolloutKey.path,
        ])
        #expect(again.stdout.contains("app 1: hold"), "\(again.stdout)")
        // The rollout role's keys cannot disable, nor release a version that is not current.
        let repository = try PublisherRepository(
            directory: app.repo,
            keys: [app.rolloutKey.path],
            role: .rollout
        )
        let served = try Data(contentsOf: app.repo.appendingPathComponent("manifest.json"))
        for change in [PublisherRepository.Change.disable, .release(version: "2", rollout: nil)] {
            await #expect(throws: HotUpdateError(.rolloutRoleExceeded, "")) {
                try await repository.apply(change, package: "app", channel: "")
            }
        }
        #expect(try Data(contentsOf: app.repo.appendingPathComponent("manifest.json")) == served)
    }
}
