import Foundation
import HotCore
import HotServerKit
import HotTestServers
import HotTesting
import HotTransport
import Testing

/// What the real collector takes and refuses, over real HTTP.
@Suite("What the collector takes")
struct IntakeTests {
    static func start(_ extra: [String] = []) async throws -> (ServerProcess, URL, String) {
        let directory = try scratch("intake")
        let database = "sqlite:" + directory.appendingPathComponent("telemetry.db").path
        let collector = try await ServerProcess.start(["collect", "--db", database] + extra)
        return (collector, collector.url.appendingPathComponent("collect"), database)
    }

    @Test("a post without Content-Type: application/json is refused (a web page's no-cors post has none)")
    func contentType() async throws {
        let (collector, collect, database) = try await Self.start()
        defer { collector.stop() }
        let body = batchBody(client: newClient(), events: [event("rollback", "app", "2")])
        #expect(try await send(body, to: collect, type: nil).status == 415)
        #expect(try await send(body, to: collect, type: "text/plain").status == 415)
        #expect(try await report(database).isEmpty)
        #expect(try await send(body, to: collect).status == 204)
    }

    @Test("the ids the library accepts are taken: '+' and '~', 128-byte versions, an app version with spaces")
    func libraryIDs() async throws {
        let (collector, collect, database) = try await Self.start()
        defer { collector.stop() }
        let long = String(repeating: "1.", count: 63) + "99"
        #expect(long.utf8.count == 128)
        let body = batchBody(
            client: newClient(),
            events: [event("confirm", "com.example+fonts~x", "2.0~beta+3"), event("confirm", "app", long)],
            extra: #""channel":"beta~2+x","appVersion":"5.2 (build 7)","#
        )
        #expect(try await send(body, to: collect).status == 204)
        let versions = try await report(database)
        #expect(entry(versions, "com.example+fonts~x", "2.0~beta+3")?["channel"] as? String == "beta~2+x")
        #expect(entry(versions, "app", long)?["confirmed"] as? Int == 1)
        // What the library refuses is refused.
        let dots = batchBody(client: newClient(), events: [event("confirm", "..", "1")])
        #expect(try await send(dots, to: collect).status == 400)
    }

    @Test("events dated by a wrong device clock are kept, with the receipt time beside them")
    func wrongClocks() async throws {
        let (collector, collect, database) = try await Self.start()
        defer { collector.stop() }
        let ahead = Date().addingTimeInterval(3 * 86_400)
        let behind = Date().addingTimeInterval(-90 * 86_400)
        let body = batchBody(
            client: newClient(),
            events: [event("rollback", "app", "2", date: ahead), event("rollback", "app", "3", date: behind)]
        )
        #expect(try await send(body, to: collect).status == 204)
        let versions = try await report(database)
        #expect(entry(versions, "app", "2")?["rolledBack"] as? Int == 1)
        #expect(entry(versions, "app", "3")?["rolledBack"] as? Int == 1)
    }

    @Test("one bad event is refused, not its batch: the others are stored and the answer says which was refused")
    func oneBadEvent() async throws {
        let (collector, collect, database) = try await Self.start()
        defer { collector.stop() }
        let bad =
            #"{"kind":"explode","date":"\#(ISO8601DateFormatter().string(from: Date()))","packageID":"app","version":"2"}"#
        let body = batchBody(
            client: newClient(),
            events: [event("rollback", "app", "2"), bad, event("install", "app", "2")]
        )
        let answer = try await send(body, to: collect)
        #expect(answer.status == 200, "\(answer.body)")
        let decoded = try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any]
        #expect(decoded?["stored"] as? Int == 2)
        let refused = decoded?["refused"] as? [[String: Any]]
        #expect(refused?.count == 1)
        #expect(refused?.first?["index"] as? Int == 1)
        let v2 = try #require(entry(try await report(database), "app", "2"))
        #expect(v2["rolledBack"] as? Int == 1)
        #expect(v2["installed"] as? Int == 1)
        // Sent again (the same batch id): stored once.
        #expect(try await send(body, to: collect).status == 200)
        #expect(entry(try await report(database), "app", "2")?["rollbacks"] as? Int == 1)
    }

    @Test("a batch with a key twice is refused: parsers differ on which value counts")
    func duplicateKeys() async throws {
        let (collector, collect, database) = try await Self.start()
        defer { collector.stop() }
        let now = ISO8601DateFormatter().string(from: Date())
        let body = Data(
            #"{"batch":"\#(newClient())","client":"\#(newClient())","client":"\#(newClient())","sentAt":"\#(now)","events":[\#(event("rollback", "app", "2"))]}"#
                .utf8
        )
        let answer = try await send(body, to: collect)
        #expect(answer.status == 400)
        #expect(answer.body.contains("twice"), "\(answer.body)")
        let inEvent = batchBody(
            client: newClient(),
            events: [#"{"kind":"rollback","kind":"confirm","date":"\#(now)","packageID":"app","version":"2"}"#]
        )
        #expect(try await send(inEvent, to: collect).status == 400)
        #expect(try await report(database).isEmpty)
    }

    @Test("another network that knows a device's client id cannot use up that device's rate")
    func rateByNetwork() async throws {
        let (collector, collect, database) = try await Self.start(["--rate", "0.001", "--burst", "2"])
        defer { collector.stop() }
        let victim = newClient()
        for _ in 0..<2 {
            let body = batchBody(client: victim, events: [event("confirm", "app", "2")])
            #expect(try await send(body, to: collect, from: "127.0.5.1").status == 204)
        }
        let third = try await send(
            batchBody(client: victim, events: [event("confirm", "app", "2")]),
            to: collect,
            from: "127.0.5.1"
        )
        #expect(third.status == 429)
        #expect(third.headers["retry-after"] != nil)
        // The device itself, from its own network: its rollback is taken.
        let rollback = batchBody(client: victim, events: [event("rollback", "app", "2")])
        #expect(try await send(rollback, to: collect).status == 204)
        #expect(entry(try await report(database), "app", "2")?["rolledBack"] as? Int == 1)
    }

    @Test("with --api-key, a post needs the key (X-Hot-Api-Key or Bearer); the reporter sends it in its headers")
    func apiKey() async throws {
        let key = "k3y-for-the-collector-0123456789"
        let (collector, collect, database) = try await Self.start(["--api-key", key])
        defer { collector.stop() }
        let body = { batchBody(client: newClient(), events: [event("confirm", "app", "2")]) }
        #expect(try await send(body(), to: collect).status == 401)
        #expect(try await send(body(), to: collect, headers: ["X-Hot-Api-Key": "wrong-key-0123456789"]).status == 401)
        #expect(try await send(body(), to: collect, headers: ["X-Hot-Api-Key": key]).status == 204)
        #expect(try await send(body(), to: collect, headers: ["Authorization": "Bearer \(key)"]).status == 204)
        let reporter = HTTPTelemetryReporter(
            url: collect,
            transport: CurlTransport(),
            clientID: newClient(),
            options: .init(headers: ["X-Hot-Api-Key": key])
        )
        reporter.record(TelemetryEvent(kind: .confirm, packageID: "app", version: "2"))
        await reporter.flush()
        #expect(reporter.statistics.batchesSent == 1)
        #expect(entry(try await report(database), "app", "2")?["confirmed"] as? Int == 3)
    }

    @Test("the reporter keeps a batch answered 429, sends nothing before its Retry-After, and sends it after")
    func reporterHonoursRetryAfter() async throws {
        // One batch at once, then one every 4 seconds: the second is answered 429, Retry-After 4.
        let (collector, collect, database) = try await Self.start(["--rate", "0.25", "--burst", "1"])
        defer { collector.stop() }
        let queue = try scratch("reporter-queue")
        let reporter = try HTTPTelemetryReporter(
            url: collect,
            transport: CurlTransport(),
            clientID: newClient(),
            queueDirectory: queue
        )
        func health() async throws -> String {
            try await Subprocess.check("curl", ["-s", collector.url.appendingPathComponent("health").absoluteString])
                .stdout
        }
        reporter.record(TelemetryEvent(kind: .install, packageID: "app", version: "2"))
        await reporter.flush()
        #expect(reporter.statistics.batchesSent == 1)
        reporter.record(TelemetryEvent(kind: .rollback, packageID: "app", version: "2"))
        await reporter.flush()
        func keptBatches() throws -> Int {
            try FileManager.default.contentsOfDirectory(atPath: queue.path).filter { $0.hasPrefix("batch-") }.count
        }
        var statistics = reporter.statistics
        #expect(statistics.batchesFailed == 1)
        #expect(statistics.droppedWithFailedBatches == 0)
        #expect(try keptBatches() == 1)
        #expect(try await health().contains("rate-limited 1 "))
        // Flushed again at once: nothing is sent before the Retry-After has passed.
        await reporter.flush()
        #expect(try await health().contains("rate-limited 1 "))
        #expect(reporter.statistics.batchesFailed == 1)
        // Then it is sent.
        let deadline = ContinuousClock.now + .seconds(60)
        while reporter.statistics.batchesSent < 2, ContinuousClock.now < deadline {
            await reporter.flush()
            try await Task.sleep(for: .milliseconds(200))
        }
        statistics = reporter.statistics
        #expect(statistics.batchesSent == 2)
        #expect(statistics.queued == 0)
        #expect(try keptBatches() == 0)
        #expect(entry(try await report(database), "app", "2")?["rolledBack"] as? Int == 1)
    }
}
