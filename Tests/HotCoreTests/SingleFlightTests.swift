import Foundation
import HotCore
import HotTesting
import Testing

@Suite("Single flight")
struct SingleFlightTests {
    /// Waits until the fake transport holds `count` responses for `url`.
    static func waitUntilHeld(_ fixture: EngineFixture, _ url: URL, count: Int = 1) async throws {
        for _ in 0..<2_000 {
            if await fixture.transport.heldCount(for: url) >= count { return }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("the download of \(url) never started")
    }

    /// Publishes a package and holds its download after the first bytes.
    static func publishHeld(_ fixture: EngineFixture, _ id: String) async throws -> PackageDescriptor {
        let offered = try await fixture.publish(id, "1", ["a.png": "alpha", "b/c.txt": "see"])
        let body = try FakeArchive.make(["a.png": "alpha", "b/c.txt": "see"])
        await fixture.transport.hold(body, at: offered.url, deliver: 3)
        return offered
    }

    @Test("fifty concurrent installs of one package share one download and one unpack")
    func coalesced() async throws {
        let fixture = try EngineFixture()
        let offered = try await Self.publishHeld(fixture, "filters")
        let updater = fixture.updater
        let callers = 50
        let results = try await withThrowingTaskGroup(of: InstalledPackage.self) { group in
            for _ in 0..<callers { group.addTask { try await updater.install(offered) } }
            try await Self.waitUntilHeld(fixture, offered.url)
            // The download stays held until every caller has joined its flight (the minute
            // only turns a hang into a failure).
            var joined = 0
            let deadline = ContinuousClock.now.advanced(by: .seconds(60))
            while ContinuousClock.now < deadline {
                joined = await updater.flightSubscribers(packageID: "filters")
                if joined >= callers { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(joined == callers, "only \(joined) of \(callers) callers joined the flight")
            await fixture.transport.release(offered.url)
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == callers)
        #expect(results.allSatisfy { $0.version == "1" })
        #expect(Set(results.map(\.directory)).count == 1)
        #expect(await fixture.transport.requestCount(for: offered.url) == 1)
        #expect(await fixture.unarchiver.extractionCount == 1)
        #expect(try await fixture.contents(of: "filters", "b/c.txt") == "see")
    }

    @Test("cancelling one of two callers lets the other finish with the one download")
    func oneCallerCancels() async throws {
        let fixture = try EngineFixture()
        let offered = try await Self.publishHeld(fixture, "filters")
        let updater = fixture.updater
        let first = Task { try await updater.install(offered) }
        let second = Task { try await updater.install(offered) }
        try await Self.waitUntilHeld(fixture, offered.url)
        first.cancel()
        await #expect(throws: CancellationError.self) { try await first.value }
        await fixture.transport.release(offered.url)
        let installed = try await second.value
        #expect(installed.version == "1")
        #expect(await fixture.transport.requestCount(for: offered.url) == 1)
        #expect(try await fixture.contents(of: "filters", "a.png") == "alpha")
    }

    @Test("a caller cancelled before it asks gets CancellationError, even for a version already installed")
    func cancelledBeforeAsking() async throws {
        let fixture = try EngineFixture()
        let offered = try await fixture.publish("filters", "1", ["a.png": "alpha"])
        let updater = fixture.updater
        _ = try await updater.install(offered)
        let caller = Task {
            while !Task.isCancelled { await Task.yield() }
            return try await updater.install(offered)
        }
        caller.cancel()
        await #expect(throws: CancellationError.self) { try await caller.value }
        #expect(await fixture.transport.requestCount(for: offered.url) == 1)
    }

    @Test("cancel(packageID:) stops the work for every caller, leaves nothing, and the next request starts afresh")
    func cancelPackage() async throws {
        let fixture = try EngineFixture()
        let offered = try await Self.publishHeld(fixture, "filters")
        let updater = fixture.updater
        let callers = (0..<3).map { _ in Task { try await updater.install(offered) } }
        try await Self.waitUntilHeld(fixture, offered.url)
        await updater.cancel(packageID: "filters")
        for caller in callers {
            await #expect(throws: HotUpdateError(.cancelled, "")) { try await caller.value }
        }
        #expect(fixture.stagingIsEmpty())
        #expect(!FileManager.default.fileExists(atPath: fixture.root.appendingPathComponent("packages/filters").path))
        #expect(try await updater.state(of: "filters") == nil)
        #expect(await updater.health.isAvailable("filters") == false)

        await fixture.transport.release(offered.url)
        let installed = try await updater.install(offered)
        #expect(installed.version == "1")
        #expect(await fixture.transport.requestCount(for: offered.url) == 2)
        #expect(await updater.health.isAvailable("filters"))
    }

    @Test(
        "cancelAll during a sync fails its downloads as cancelled, keeps what was installed, and a later sync succeeds"
    )
    func cancelAllDuringSync() async throws {
        let fixture = try EngineFixture()
        let old = try await fixture.publish("images", "1", ["a.png": "one"])
        _ = try await fixture.sync([old])
        let before = try fixture.tree()

        let images = try await fixture.publish("images", "2", ["a.png": "two"])
        await fixture.transport.hold(try FakeArchive.make(["a.png": "two"]), at: images.url, deliver: 2)
        let fonts = try await Self.publishHeld(fixture, "fonts")
        let sync = Task { try await fixture.sync([images, fonts]) }
        try await Self.waitUntilHeld(fixture, images.url)
        try await Self.waitUntilHeld(fixture, fonts.url)
        await fixture.updater.cancelAll()
        let report = try await sync.value

        #expect(report.failures.map(\.id).sorted() == ["fonts", "images"])
        #expect(report.failures.allSatisfy { $0.error?.code == .cancelled })
        #expect(fixture.stagingIsEmpty())
        #expect(try await fixture.contents(of: "images", "a.png") == "one")
        // File lists and the name index (one per generation) follow the recorded states.
        #expect(
            try fixture.tree().filter { !$0.key.hasPrefix("/filelists") && !$0.key.hasPrefix("/index") }.keys.sorted()
                == before.filter { !$0.key.hasPrefix("/filelists") && !$0.key.hasPrefix("/index") }.keys.sorted()
        )
        #expect(try await fixture.updater.state(of: "images") == .updateAvailable)
        #expect(try await fixture.updater.state(of: "fonts") == .new)

        await fixture.transport.release(images.url)
        await fixture.transport.release(fonts.url)
        let retry = try await fixture.sync([images, fonts])
        #expect(retry.failures.isEmpty)
        #expect(try await fixture.contents(of: "images", "a.png") == "two")
        #expect(try await fixture.updater.state(of: "fonts") == .installed)
    }

    @Test("a sync joins the flight an app call already started")
    func syncJoinsInstall() async throws {
        let fixture = try EngineFixture()
        let offered = try await Self.publishHeld(fixture, "filters")
        let updater = fixture.updater
        let install = Task { try await updater.install(offered) }
        try await Self.waitUntilHeld(fixture, offered.url)
        let sync = Task { try await fixture.sync([offered]) }
        // The download is released only once the sync waits on the same flight.
        for _ in 0..<2_000 where await updater.flightSubscribers(packageID: "filters") < 2 {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(await updater.flightSubscribers(packageID: "filters") == 2)
        await fixture.transport.release(offered.url)
        #expect(try await install.value.version == "1")
        let report = try await sync.value
        #expect(report.failures.isEmpty)
        // Joined: the sync planned an add and reports the flight's one download as its own.
        #expect(report.packages.map(\.change) == [.add])
        #expect(report.packages.first?.bytesDownloaded ?? 0 > 0)
        #expect(await fixture.transport.requestCount(for: offered.url) == 1)
    }

    @Test("downloads never exceed maxConcurrentPackages")
    func boundedParallelism() async throws {
        let fixture = try EngineFixture(maxConcurrentPackages: 2)
        var offered: [PackageDescriptor] = []
        for index in 0..<5 {
            let package = try await fixture.publish("p\(index)", "1", ["f.txt": "\(index)"])
            await fixture.transport.hold(try FakeArchive.make(["f.txt": "\(index)"]), at: package.url)
            offered.append(package)
        }
        let all = offered
        let sync = Task { try await fixture.sync(all) }
        var released = 0
        while released < offered.count {
            // Exactly two downloads are under way until the last ones.
            var held: [PackageDescriptor] = []
            for _ in 0..<2_000 {
                held = []
                for package in offered where await fixture.transport.heldCount(for: package.url) > 0 {
                    held.append(package)
                }
                if held.count == min(2, offered.count - released) { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(held.count == min(2, offered.count - released))
            guard let next = held.first else { break }
            await fixture.transport.release(next.url)
            released += 1
        }
        #expect(try await sync.value.failures.isEmpty)
    }
}
