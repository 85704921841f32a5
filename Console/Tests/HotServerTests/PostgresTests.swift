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

extension PostgresServer {
    /// Runs where Debian's server is installed, and under CI=true whatever happens, so CI fails
    /// instead of skipping.
    static var runs: Bool {
        binaries != nil || ProcessInfo.processInfo.environment["CI"] == "true"
    }
    static let skipReason: Comment =
        "skipped: no PostgreSQL under /usr/lib/postgresql (apt-get install postgresql; scripts/ensure-deps test installs it). Under CI=true its absence fails"
}

@Suite("The collector over PostgreSQL", .enabled(if: PostgresServer.runs, PostgresServer.skipReason))
struct PostgresTests {
    @Test("the same schema: batches stored once, bad ones refused, the report, two collectors on one database")
    func collectorOverPostgres() async throws {
        let postgres = try await PostgresServer.start(databases: ["hot"])
        do {
            try await exercise(postgres)
        } catch {
            await postgres.stop()
            throw error
        }
        await postgres.stop()
    }

    func exercise(_ postgres: PostgresServer) async throws {
        let first = try await ServerProcess.start(["collect", "--db", postgres.url("hot")])
        defer { first.stop() }
        // A second collector on the same database: the migration runs once.
        let second = try await ServerProcess.start(["collect", "--db", postgres.url("hot")])
        defer { second.stop() }
        let now = ISO8601DateFormatter().string(from: Date())
        func batch(client: String, kind: String, version: String) -> Data {
            Data(
                #"{"batch":"\#(UUID().uuidString.lowercased())","client":"\#(client)","channel":"beta","appVersion":"5.2","sentAt":"\#(now)","events":[{"kind":"install","date":"\#(now)","packageID":"app","version":"\#(version)"},{"kind":"\#(kind)","date":"\#(now)","packageID":"app","version":"\#(version)","bytes":10}]}"#
                    .utf8
            )
        }
        for index in 0..<6 {
            let body = batch(
                client: UUID().uuidString.lowercased(),
                kind: index < 4 ? "confirm" : "rollback",
                version: "3"
            )
            let target = (index % 2 == 0 ? first : second).url.appendingPathComponent("collect")
            #expect(try await post(body, to: target) == 204)
            if index == 0 { #expect(try await post(body, to: second.url.appendingPathComponent("collect")) == 200) }
        }
        #expect(try await post(Data(#"{"events":[]}"#.utf8), to: first.url.appendingPathComponent("collect")) == 400)
        let versions = try await report(postgres.url("hot"))
        let v3 = try #require(entry(versions, "app", "3"))
        #expect(v3["channel"] as? String == "beta")
        #expect(v3["devices"] as? Int == 6)
        #expect(v3["installed"] as? Int == 6)
        #expect(v3["confirmed"] as? Int == 4)
        #expect(v3["rolledBack"] as? Int == 2)
        #expect(v3["confirmedLaunches"] as? Int == 4)
        let rate = try #require(v3["failureRate"] as? Double)
        #expect(abs(rate - 2.0 / 6.0) < 1e-9)

        // The library's view of the same rows agrees with SQLite's for the same batches.
        let sqlitePath = try scratch("pg-compare").appendingPathComponent("t.db").path
        let sqlite = try await openTelemetryDatabase("sqlite:" + sqlitePath)
        let pg = try await openTelemetryDatabase(postgres.url("hot"))
        let client = UUID().uuidString.lowercased()
        let parsed = try TelemetryBatch.parse(batch(client: client, kind: "rollback", version: "4"))
        #expect(try await sqlite.store(parsed))
        #expect(try await pg.store(parsed))
        #expect(try await !pg.store(parsed))
        let fromSQLite = try await HealthReport.load(from: sqlite).health(package: "app", version: "4", channel: "beta")
        let fromPostgres = try await HealthReport.load(from: pg).health(package: "app", version: "4", channel: "beta")
        #expect(fromSQLite?.rolledBack == 1)
        #expect(fromSQLite?.rolledBack == fromPostgres?.rolledBack)
        #expect(fromSQLite?.bytes == fromPostgres?.bytes)
        await sqlite.close()
        await pg.close()
    }
}
