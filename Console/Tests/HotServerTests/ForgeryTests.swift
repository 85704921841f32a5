import Foundation
import HotCore
import HotManifest
import HotServerKit
import HotTestServers
import HotTesting
import Testing

/// Made-up reports against the real collector and `hot-server rollout advance` with the
/// release key: anyone can post, and the sender picks its client id.
@Suite("Forged telemetry and the rollout")
struct ForgeryTests {
    /// Twelve devices the collector knows before `app` 2 and `other` 1 start: each reports
    /// `app` 1 confirmed.
    static func establishedDevices(_ collect: URL) async throws -> [String] {
        let devices = (0..<12).map { _ in newClient() }
        let bodies = devices.map { batchBody(client: $0, events: [event("confirm", "app", "1")]) }
        #expect(try await sendAll(bodies, to: collect).allSatisfy { $0 == 204 })
        return devices
    }

    @Test(
        "twenty made-up rollbacks from new client ids neither roll back a healthy release nor disable a package; a real halt with no earlier release rolls nothing back and never disables"
    )
    func forgedHalt() async throws {
        let app = try await PublishedApp.make()
        try await app.publish(version: "1")
        let database = "sqlite:" + app.directory.appendingPathComponent("telemetry.db").path
        let collector = try await ServerProcess.start(["collect", "--db", database])
        defer { collector.stop() }
        let collect = collector.url.appendingPathComponent("collect")
        let devices = try await Self.establishedDevices(collect)

        // app 2 is healthy on every established device; other 1 (its only release) fails on them.
        try await app.publish(version: "2")
        try await app.publish(version: "1", id: "other")
        let real = devices.map {
            batchBody(client: $0, events: [event("confirm", "app", "2"), event("rollback", "other", "1")])
        }
        #expect(try await sendAll(real, to: collect).allSatisfy { $0 == 204 })
        // Twenty posts, each a made-up client id: rollbacks of both.
        let forged = (0..<20).map { _ in
            batchBody(client: newClient(), events: [event("rollback", "app", "2"), event("rollback", "other", "1")])
        }
        #expect(try await sendAll(forged, to: collect, from: "127.0.9.1").allSatisfy { $0 == 204 })

        let output = try await app.advance(database: database)
        #expect(output.contains("app 2: hold"), "\(output)")
        #expect(output.contains("a burst of new client ids: 20 trial launches"), "\(output)")
        #expect(output.contains("other 1: hold"), "\(output)")
        #expect(output.contains("never disables"), "\(output)")
        #expect(try app.currentRelease() == "2")
        #expect(try app.package("other")?.disabled == false)
        #expect(try app.package("other")?.current == "1")

        // The console's page says why app 2 holds.
        collector.stop()
        let console = try await ServerProcess.start([
            "console", "--db", database, "--repo", app.repo.path, "--key", app.privateKey.path,
        ])
        defer { console.stop() }
        let page = try await Subprocess.check("curl", ["-s", console.url.absoluteString]).stdout
        #expect(page.contains("held: a burst of new client ids: 20 trial launches"), "\(page)")
    }

    @Test("1,000 made-up confirms do not advance a release failing 6 of its 10 established trials: it is rolled back")
    func forgedAdvance() async throws {
        let app = try await PublishedApp.make()
        try await app.publish(version: "1")
        let database = "sqlite:" + app.directory.appendingPathComponent("telemetry.db").path
        let collector = try await ServerProcess.start(["collect", "--db", database])
        defer { collector.stop() }
        let collect = collector.url.appendingPathComponent("collect")
        let devices = Array(try await Self.establishedDevices(collect).prefix(10))

        // app 2 at 1%: 6 of its 10 established devices roll it back.
        try await app.publish(version: "2")
        try await hot(["release", "app", "2", "--rollout", "1", "--repo", app.repo.path])
        try await hot([
            "sign", "--repo", app.repo.path, "--key", app.privateKey.path, "--expires", "30d", "--rollout-key",
            app.rolloutKey.deletingPathExtension().path + ".pub",
        ])
        let real = devices.enumerated().map { index, client in
            batchBody(client: client, events: [event(index < 6 ? "rollback" : "confirm", "app", "2")])
        }
        #expect(try await sendAll(real, to: collect).allSatisfy { $0 == 204 })
        let forged = (0..<1000).map { _ in batchBody(client: newClient(), events: [event("confirm", "app", "2")]) }
        let statuses = try await sendAll(forged, to: collect, from: "127.0.9.1")
        #expect(statuses.count == 1000 && statuses.allSatisfy { $0 == 204 })

        let output = try await app.advance(database: database)
        #expect(!output.contains("advance to"), "\(output)")
        #expect(output.contains("app 2: halt and roll back"), "\(output)")
        #expect(try app.currentRelease() == "1")
    }

    @Test("new client ids are enrolled up to the cap of their network; only ids enrolled before a release count for it")
    func enrolmentCap() async throws {
        let directory = try scratch("enrolment")
        let database = "sqlite:" + directory.appendingPathComponent("telemetry.db").path
        let collector = try await ServerProcess.start([
            "collect", "--db", database, "--enrolments-per-network", "3",
        ])
        defer { collector.stop() }
        let collect = collector.url.appendingPathComponent("collect")
        // Five ids from one network check for updates: three are enrolled.
        let clients = (0..<5).map { _ in newClient() }
        for client in clients {
            let check = #"{"kind":"check","date":"\#(ISO8601DateFormatter().string(from: Date()))"}"#
            #expect(
                try await send(batchBody(client: client, events: [check]), to: collect, from: "127.0.7.1").status == 204
            )
        }
        // A device of another network is enrolled: the cap is per network.
        let elsewhere = newClient()
        #expect(
            try await send(batchBody(client: elsewhere, events: [event("install", "app", "8")]), to: collect).status
                == 204
        )
        for client in clients + [elsewhere] {
            let body = batchBody(client: client, events: [event("confirm", "app", "9")])
            #expect(try await send(body, to: collect, from: "127.0.7.1").status == 204)
        }
        let versions = try await fullReport(database)["versions"] as? [[String: Any]] ?? []
        let v9 = try #require(entry(versions, "app", "9"))
        #expect(v9["confirmed"] as? Int == 6)
        #expect((v9["established"] as? [String: Any])?["confirmed"] as? Int == 4)
        #expect(v9["newDeviceTrials"] as? Int == 2)
    }
}
