import Foundation
import HotCore
import HotTestServers
import HotTesting
import HotTransport
import Testing

/// Stands in for the reporter's sleep between flushes: each call waits until the test
/// releases it, so the test decides when every flush may happen.
actor SleepGate {
    private(set) var durations: [Duration] = []
    private var waiters: [CheckedContinuation<Void, Never>] = []

    var waiting: Int { waiters.count }

    func sleep(_ duration: Duration) async {
        durations.append(duration)
        await withCheckedContinuation { waiters.append($0) }
    }

    func release() {
        if !waiters.isEmpty { waiters.removeFirst().resume() }
    }
}

/// Waits until `condition` holds, for at most a minute (a loaded machine runs the
/// reporter's tasks late; nothing here measures time).
func eventually(_ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now.advanced(by: .seconds(60))
    while !(await condition()) {
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return true
}

/// Waits until the reporter `weak` names is freed, once the test holds it no more: a flush
/// loop keeps its reporter alive while it runs, so this proves that no loop is left (none
/// waits to send again). Every loop of the tests here sleeps on a ``SleepGate`` the test
/// alone releases, so a loop that waited again would keep the reporter forever.
func loopsEnd(_ weak: () -> HTTPTelemetryReporter?) async -> Bool {
    await eventually { weak() == nil }
}

private func event(_ index: Int) -> TelemetryEvent {
    TelemetryEvent(kind: .download, packageID: "pack", version: "\(index)", bytes: Int64(index * 100), delivery: .full)
}

@Suite("HTTPTelemetryReporter against nginx")
struct HTTPTelemetryReporterTests {
    @Test("events are batched; each flush waits the interval first, so requests never outnumber the intervals passed")
    func batchingAndRate() async throws {
        let server = try await TelemetryCollector.start()
        let gate = SleepGate()
        var reporter: HTTPTelemetryReporter! = HTTPTelemetryReporter(
            url: server.collectURL,
            transport: SchemeRoutingTransport.platformHTTP(),
            clientID: "0f7c2a5e-1b1d-4c59-9b7a-3c3b1f9c2d10",
            options: .init(maxBatchEvents: 3),
            sleep: { await gate.sleep($0) }
        )
        weak let held = reporter

        for index in 0..<2 { reporter.record(event(index)) }
        #expect(await eventually { await gate.waiting == 1 })
        for index in 2..<5 { reporter.record(event(index)) }  // still the same wait: no second loop
        #expect(await gate.waiting == 1)
        #expect(server.posts("/collect").isEmpty)

        // Five events, at most three a batch: two flushes, each after its own interval.
        await gate.release()
        #expect(await eventually { reporter.statistics.batchesSent == 1 })
        #expect(await eventually { await gate.waiting == 1 })
        #expect(server.posts("/collect").count <= 1)
        await gate.release()
        #expect(await eventually { reporter.statistics.batchesSent == 2 })
        #expect(reporter.statistics.queued == 0)

        // A later event waits a whole interval again.
        reporter.record(event(5))
        #expect(await eventually { await gate.waiting == 1 })
        await gate.release()
        #expect(await eventually { reporter.statistics.batchesSent == 3 })
        #expect(reporter.statistics.sent == 6)

        // The queue is empty: the loop ends instead of waiting again, and lets the reporter go.
        reporter = nil
        #expect(await loopsEnd { held })
        #expect(await gate.waiting == 0)

        _ = await server.nginx.waitForRequests(path: "/collect", count: 3, timeout: .seconds(60))
        #expect(server.posts("/collect").map(\.status) == [204, 204, 204])
        let batches = try server.batches()
        #expect(batches.map { $0.events.compactMap(\.version) } == [["0", "1", "2"], ["3", "4"], ["5"]])
        #expect(Set(batches.map(\.client)) == ["0f7c2a5e-1b1d-4c59-9b7a-3c3b1f9c2d10"])
        let first = try #require(batches.first?.events.first)
        #expect((first.kind, first.packageID, first.bytes, first.delivery) == (.download, "pack", 0, .full))
        // Every request followed a full one-second wait of its own, and no loop waited more:
        // with every loop ended, no other wait can come.
        #expect(await gate.durations == [.seconds(1), .seconds(1), .seconds(1)])
        await server.stop()
    }

    @Test("with the real clock, a burst of events is one request")
    func burstIsOneRequest() async throws {
        let server = try await TelemetryCollector.start()
        var reporter: HTTPTelemetryReporter! = HTTPTelemetryReporter(
            url: server.collectURL,
            transport: URLSessionTransport(),
            clientID: UUID().uuidString.lowercased()
        )
        weak let held = reporter
        for index in 0..<50 { reporter.record(event(index)) }
        #expect(await eventually { reporter.statistics.batchesSent == 1 })
        // Once its loop has ended no request can follow: the one batch holds all fifty.
        reporter = nil
        #expect(await loopsEnd { held })
        #expect(try server.batches().map(\.events.count) == [50])
        await server.stop()
    }

    @Test("past the queue's bound the oldest events are dropped")
    func boundedQueue() async throws {
        let server = try await TelemetryCollector.start()
        let gate = SleepGate()
        let reporter = HTTPTelemetryReporter(
            url: server.collectURL,
            transport: SchemeRoutingTransport.platformHTTP(),
            clientID: UUID().uuidString.lowercased(),
            options: .init(maxQueuedEvents: 4),
            sleep: { await gate.sleep($0) }
        )
        for index in 0..<10 { reporter.record(event(index)) }
        #expect(reporter.statistics.queued == 4)
        #expect(reporter.statistics.droppedFromQueue == 6)
        #expect(await eventually { await gate.waiting == 1 })
        await gate.release()
        #expect(await eventually { reporter.statistics.batchesSent == 1 })
        #expect(try server.batches().map { $0.events.compactMap(\.version) } == [["6", "7", "8", "9"]])
        await server.stop()
    }

    @Test("a batch the server refuses is dropped, not retried")
    func dropOnFailure() async throws {
        let server = try await TelemetryCollector.start()
        let gate = SleepGate()
        var reporter: HTTPTelemetryReporter! = HTTPTelemetryReporter(
            url: server.brokenURL,
            transport: SchemeRoutingTransport.platformHTTP(),
            clientID: UUID().uuidString.lowercased(),
            sleep: { await gate.sleep($0) }
        )
        weak let held = reporter
        for index in 0..<3 { reporter.record(event(index)) }
        #expect(await eventually { await gate.waiting == 1 })
        await gate.release()
        #expect(await eventually { reporter.statistics.batchesFailed == 1 })
        // Nothing is kept for a retry.
        #expect(reporter.statistics.queued == 0)
        #expect(reporter.statistics.droppedWithFailedBatches == 3)

        // The next events go in a new batch of their own.
        for index in 3..<5 { reporter.record(event(index)) }
        #expect(await eventually { await gate.waiting == 1 })
        await gate.release()
        #expect(await eventually { reporter.statistics.batchesFailed == 2 })
        #expect(reporter.statistics.droppedWithFailedBatches == 5)
        #expect(reporter.statistics.sent == 0)

        // Nothing waits to send again: the loop has ended, and with it every wait and request.
        reporter = nil
        #expect(await loopsEnd { held })
        #expect(await gate.waiting == 0)
        #expect(await gate.durations.count == 2)
        let logged = await server.nginx.waitForRequests(path: "/broken", count: 2, timeout: .seconds(60))
        #expect(logged.map(\.status) == [500, 500])

        // A collector nobody listens on costs one attempt per batch as well.
        var gone: HTTPTelemetryReporter! = HTTPTelemetryReporter(
            url: URL(string: "http://127.0.0.1:9/collect")!,
            transport: SchemeRoutingTransport.platformHTTP(),
            clientID: UUID().uuidString.lowercased(),
            sleep: { await gate.sleep($0) }
        )
        weak let heldGone = gone
        gone.record(event(0))
        #expect(await eventually { await gate.waiting == 1 })
        await gate.release()
        #expect(await eventually { gone.statistics.batchesFailed == 1 })
        #expect(gone.statistics.queued == 0)
        gone = nil
        #expect(await loopsEnd { heldGone })
        #expect(await gate.durations.count == 3)
        await server.stop()
    }
}

/// The queue kept in files under the store root.
@Suite("HTTPTelemetryReporter's queue file")
struct HTTPTelemetryQueueFileTests {
    @Test(
        "events recorded are on disk before record returns; a reporter that never flushes loses none, the next sends them"
    )
    func survivesTheProcess() async throws {
        let server = try await TelemetryCollector.start()
        let root = try ScratchDirectory.make("telemetry-root")
        let gate = SleepGate()
        // The first reporter never gets to flush: its sleep is never released, as a process
        // killed within the flush interval.
        let first = try HTTPTelemetryReporter(
            url: server.collectURL,
            transport: SchemeRoutingTransport.platformHTTP(),
            clientID: try TelemetryEvent.ClientID.load(root: root),
            queueDirectory: root.appendingPathComponent(HTTPTelemetryReporter.queueDirectoryName),
            options: .init(channel: "beta", appVersion: "5.2"),
            sleep: { await gate.sleep($0) }
        )
        for index in 0..<5 { first.record(event(index)) }
        let queue = root.appendingPathComponent("telemetry/queue.jsonl")
        #expect(try String(contentsOf: queue, encoding: .utf8).split(separator: "\n").count == 5)
        #expect(first.statistics.queued == 5)

        // A second reporter on the same root (the next launch) sends them, once, with the
        // batch fields.
        let second = try HTTPTelemetryReporter(
            url: server.collectURL,
            transport: SchemeRoutingTransport.platformHTTP(),
            root: root,
            options: .init(channel: "beta", appVersion: "5.2")
        )
        await second.flush()
        let batches = try server.batches()
        #expect(batches.count == 1)
        #expect(batches.first?.events.compactMap(\.version) == ["0", "1", "2", "3", "4"])
        #expect(batches.first?.channel == "beta")
        #expect(batches.first?.appVersion == "5.2")
        #expect(batches.first?.client == first.clientID)
        #expect(UUID(uuidString: batches.first?.batch ?? "") != nil)
        #expect(try String(contentsOf: queue, encoding: .utf8).isEmpty)
        #expect(second.statistics.sent == 5)
        await server.stop()
    }

    @Test("a batch that got no answer is kept and sent again with the same batch id; a refused one is dropped")
    func resendsWithTheSameID() async throws {
        let server = try await TelemetryCollector.start()
        let root = try ScratchDirectory.make("telemetry-resend")
        // The broken reporter's own timer is held. Fired a second later, on a loaded machine,
        // it took event 3 from the shared queue and failed it while the healthy flush ran.
        let gate = SleepGate()
        let broken = try HTTPTelemetryReporter(
            url: server.brokenURL,
            transport: SchemeRoutingTransport.platformHTTP(),
            clientID: try TelemetryEvent.ClientID.load(root: root),
            queueDirectory: root.appendingPathComponent(HTTPTelemetryReporter.queueDirectoryName),
            sleep: { await gate.sleep($0) }
        )
        broken.record(event(1))
        broken.record(event(2))
        await broken.flush()
        #expect(broken.statistics.batchesFailed == 1)
        #expect(broken.statistics.droppedWithFailedBatches == 0)
        let kept = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("telemetry").path)
            .filter { $0.hasPrefix("batch-") }
        #expect(kept.count == 1)

        let healthy = try HTTPTelemetryReporter(
            url: server.collectURL,
            transport: SchemeRoutingTransport.platformHTTP(),
            root: root
        )
        healthy.record(event(3))
        await healthy.flush()
        let batches = try server.batches()
        // The kept batch and the new event both arrive, in either order: the new reporter's
        // own timer may send event 3 before its flush sends the kept batch again.
        #expect(Set(batches.map { $0.events.compactMap(\.version) }) == [["1", "2"], ["3"]])
        let resent = try #require(batches.first { $0.events.compactMap(\.version) == ["1", "2"] })
        #expect(kept.first == "batch-\(resent.batch ?? "").json")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("telemetry").path)
                .filter { $0.hasPrefix("batch-") }.isEmpty
        )
        await server.stop()
    }

    @Test("the queue file is bounded: past the bound the oldest events are dropped")
    func bounded() async throws {
        let root = try ScratchDirectory.make("telemetry-bound")
        let gate = SleepGate()
        let reporter = try HTTPTelemetryReporter(
            url: URL(string: "http://127.0.0.1:9/collect")!,
            transport: SchemeRoutingTransport.platformHTTP(),
            clientID: UUID().uuidString.lowercased(),
            queueDirectory: root,
            options: .init(maxQueuedEvents: 4),
            sleep: { await gate.sleep($0) }
        )
        for index in 0..<10 { reporter.record(event(index)) }
        #expect(reporter.statistics.queued == 4)
        #expect(reporter.statistics.droppedFromQueue == 6)
        let lines = try String(contentsOf: root.appendingPathComponent("queue.jsonl"), encoding: .utf8)
            .split(separator: "\n")
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        #expect(
            try lines.map { try decoder.decode(TelemetryEvent.self, from: Data($0.utf8)).version } == [
                "6", "7", "8", "9",
            ]
        )
    }
}
