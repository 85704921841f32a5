import Foundation
import HotCore
import HotTesting
import Testing

@Suite("Delivery modes, installs on demand, the storage budget, network conditions")
struct DeliveryTests {
    /// An updater over the fixture's root and fakes, configured by `edit`.
    static func updater(_ fixture: EngineFixture, _ edit: (inout UpdaterConfiguration) -> Void) -> Updater {
        var configuration = fixture.updater.configuration
        edit(&configuration)
        return Updater(configuration: configuration)
    }

    /// Publishes `id` version `version` with `delivery`, its files naming both.
    static func publish(
        _ fixture: EngineFixture,
        _ id: String,
        _ delivery: DeliveryMode,
        version: String = "1",
        extra: Int = 0
    ) async throws -> PackageDescriptor {
        var files = ["\(id).txt": "\(id) \(version)"]
        if extra > 0 { files["padding.bin"] = String(repeating: "x", count: extra) }
        var descriptor = try await fixture.publish(id, version, files)
        descriptor.delivery = delivery
        return descriptor
    }

    /// Whether `events` carries `state` for `id` (the minute only turns a hang into a failure).
    static func published(_ events: AsyncStream<UpdateEvent>, _ id: String, _ state: PackageState) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await case .state(let change) in events where change.id == id && change.state == state {
                    return true
                }
                return false
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(60))
                return false
            }
            let found = await group.next() ?? false
            group.cancelAll()
            return found
        }
    }

    static func requested(_ fixture: EngineFixture, _ packages: [PackageDescriptor]) async -> [String] {
        var ids: [String] = []
        for package in packages where await fixture.transport.requestCount(for: package.url) > 0 {
            ids.append(package.id)
        }
        return ids
    }

    @Test("a manifest of 50 packs in three modes: a sync fetches launch and prefetch packs, no on-demand pack")
    func fiftyPacks() async throws {
        let fixture = try EngineFixture(maxConcurrentPackages: 4)
        var packages: [PackageDescriptor] = []
        for index in 0..<5 { packages.append(try await Self.publish(fixture, "launch\(index)", .launch)) }
        for index in 0..<15 { packages.append(try await Self.publish(fixture, "pre\(index)", .prefetch)) }
        for index in 0..<30 { packages.append(try await Self.publish(fixture, "od\(index)", .onDemand)) }
        let report = try await fixture.sync(packages)
        #expect(report.failures.isEmpty)
        let fetched = Set(await Self.requested(fixture, packages))
        #expect(fetched == Set(packages.filter { $0.delivery != .onDemand }.map(\.id)))
        #expect(report.packages.filter { $0.change == .notRequested }.count == 30)
        #expect(report.packages.filter { $0.change == .add }.count == 20)
        let installed = try await fixture.updater.installedPackages().map(\.id)
        #expect(installed.count == 20)
        #expect(!installed.contains { $0.hasPrefix("od") })
        // The store records nothing of the packs never asked for, and the catalog offers all 50.
        let snapshot = try await fixture.updater.currentSnapshot()
        #expect(snapshot.packages.keys.filter { $0.hasPrefix("od") }.isEmpty)
        let offered = try await fixture.updater.offeredPackages()
        #expect(offered.map(\.id) == packages.map(\.id))
        #expect(offered.filter { $0.delivery == .onDemand }.count == 30)
        // A second sync downloads nothing and changes nothing.
        let again = try await fixture.sync(packages)
        #expect(!again.changedAnything)
        #expect(await fixture.transport.receivedRequests.count == 20)
    }

    @Test("twenty concurrent asks for one on-demand pack make one download")
    func coalescing() async throws {
        let fixture = try EngineFixture()
        let pack = try await Self.publish(fixture, "filters", .onDemand)
        _ = try await fixture.sync([pack])
        let body = try FakeArchive.make(["filters.txt": "filters 1"])
        await fixture.transport.hold(body, at: pack.url, deliver: 2)
        let updater = fixture.updater
        let results = try await withThrowingTaskGroup(of: InstalledPackage.self) { group in
            for _ in 0..<20 { group.addTask { try await updater.install(id: "filters") } }
            try await SingleFlightTests.waitUntilHeld(fixture, pack.url)
            var joined = 0
            let deadline = ContinuousClock.now.advanced(by: .seconds(60))
            while ContinuousClock.now < deadline {
                joined = await updater.flightSubscribers(packageID: "filters")
                if joined >= 20 { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(joined == 20)
            await fixture.transport.release(pack.url)
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 20 && results.allSatisfy { $0.version == "1" })
        #expect(await fixture.transport.requestCount(for: pack.url) == 1)
        #expect(await fixture.unarchiver.extractionCount == 1)
        #expect(try await fixture.contents(of: "filters", "filters.txt") == "filters 1")
    }

    @Test("an on-demand pack asked for once is kept current by every sync; the others are never fetched")
    func keptCurrent() async throws {
        let fixture = try EngineFixture()
        var packs: [PackageDescriptor] = []
        for index in 0..<20 { packs.append(try await Self.publish(fixture, "od\(index)", .onDemand)) }
        _ = try await fixture.sync(packs)
        #expect(await fixture.transport.receivedRequests.isEmpty)

        let installed = try await fixture.updater.install(id: "od7")
        #expect(installed.version == "1")
        #expect(await Self.requested(fixture, packs) == ["od7"])

        let od7v1 = packs[7]
        let od7v2 = try await Self.publish(fixture, "od7", .onDemand, version: "2")
        let od9v2 = try await Self.publish(fixture, "od9", .onDemand, version: "2")
        packs[7] = od7v2
        packs[9] = od9v2
        let report = try await fixture.sync(packs)
        #expect(report.packages.first { $0.id == "od7" }?.change == .update)
        #expect(report.packages.first { $0.id == "od9" }?.change == .notRequested)
        #expect(try await fixture.contents(of: "od7", "od7.txt") == "od7 2")
        #expect(await fixture.transport.requestCount(for: od9v2.url) == 0)
        #expect(await fixture.transport.receivedRequests.map(\.url) == [od7v1.url, od7v2.url])
    }

    @Test("a package the trusted manifest does not offer is refused, and nothing is fetched")
    func notInManifestRefused() async throws {
        let fixture = try EngineFixture()
        // Before any manifest: nothing to install from.
        await #expect(throws: HotUpdateError(.notFound, "")) { try await fixture.updater.install(id: "filters") }
        let filters = try await Self.publish(fixture, "filters", .onDemand)
        let other = try await Self.publish(fixture, "other", .onDemand)
        // `other` is served, but the manifest applied does not list it.
        _ = try await fixture.updater.apply(try Manifest(packages: [filters], disabledPackageIDs: ["banned"]))
        for id in ["other", "banned", "../filters"] {
            await #expect(throws: HotUpdateError(.notFound, "")) { try await fixture.updater.install(id: id) }
        }
        #expect(await fixture.transport.receivedRequests.isEmpty)
        #expect(try await fixture.updater.currentSnapshot().packages["other"] == nil)
        _ = other
        // A later process takes the catalog the first one recorded, with no manifest fetched.
        let later = fixture.relaunched()
        #expect(try await later.install(id: "filters").version == "1")
        await #expect(throws: HotUpdateError(.notFound, "")) { try await later.install(id: "other") }
    }

    @Test("asking for an installed pack again and again writes its last use once per interval, not per ask")
    func usageWithoutAWritePerAsk() async throws {
        let fixture = try EngineFixture()
        let pack = try await Self.publish(fixture, "filters", .onDemand)
        _ = try await fixture.sync([pack])
        _ = try await fixture.updater.install(id: "filters")
        let afterFirst = try await fixture.updater.currentSnapshot()
        #expect(afterFirst.packages["filters"]?.lastUsedAt != nil)
        for _ in 0..<100 { _ = try await fixture.updater.install(id: "filters") }
        let afterMany = try await fixture.updater.currentSnapshot()
        #expect(afterMany.generation == afterFirst.generation)
        #expect(await fixture.transport.requestCount(for: pack.url) == 1)
    }

    @Test("the budget evicts least recently used on-demand packs; held, guarded, launch and prefetch packs stay")
    func evictionUnderBudget() async throws {
        let fixture = try EngineFixture()
        let updater = Self.updater(fixture) {
            $0.usageRecordingInterval = 0
            $0.launch = LaunchPolicy(guarded: ["guarded"])
        }
        let packs = [
            try await Self.publish(fixture, "launch", .launch, extra: 1000),
            try await Self.publish(fixture, "pre", .prefetch, extra: 1000),
            try await Self.publish(fixture, "a", .onDemand, extra: 1000),
            try await Self.publish(fixture, "b", .onDemand, extra: 1000),
            try await Self.publish(fixture, "c", .onDemand, extra: 1000),
            try await Self.publish(fixture, "held", .onDemand, extra: 1000),
            try await Self.publish(fixture, "guarded", .onDemand, extra: 1000),
        ]
        _ = try await updater.apply(try Manifest(packages: packs))
        // Used in this order: a, b, c, held, guarded; then a again (most recent).
        for id in ["a", "b", "c", "held", "guarded", "a"] {
            _ = try await updater.install(id: id)
            // Uses are ordered by the time recorded: the next one is recorded later.
            let used = Date()
            try await waitUntil("the clock to move past \(used)", interval: .milliseconds(1)) { Date() > used }
        }
        updater.beginUsing(packageID: "held")
        // Room for one pack's files: b, c go (least recently used); held and guarded are
        // protected; a, the most recently used, fits.
        let report = try await updater.evictOnDemandPacks(budget: OnDemandBudget(maxBytes: 3 * 1010))
        #expect(report.evicted == ["b", "c"])
        #expect(report.garbage.versionsRemoved == 2)
        #expect(Set(try await updater.currentSnapshot().packages.keys) == ["launch", "pre", "a", "held", "guarded"])
        // Budget 0: everything not protected goes, launch and prefetch stay.
        let all = try await updater.evictOnDemandPacks(budget: OnDemandBudget(maxBytes: 0))
        #expect(all.evicted == ["a"])
        updater.endUsing(packageID: "held")
        #expect(try await updater.evictOnDemandPacks(budget: OnDemandBudget(maxBytes: 0)).evicted == ["held"])
        #expect(Set(try await updater.currentSnapshot().packages.keys) == ["launch", "pre", "guarded"])
        // Nothing of the evicted packs is left, and a sync does not bring them back.
        #expect(try fixture.tree().keys.filter { $0.contains("/packages/b/") || $0.contains("/packages/c/") }.isEmpty)
        let sync = try await updater.apply(try Manifest(packages: packs))
        #expect(sync.packages.filter { $0.change == .notRequested }.map(\.id).sorted() == ["a", "b", "c", "held"])
        // Asked again: downloaded again.
        #expect(try await updater.install(id: "b").version == "1")
        #expect(await fixture.transport.requestCount(for: packs[3].url) == 2)
    }

    @Test("a pack a live launch runs from is not evicted; once that launch is gone, it is")
    func liveLaunchProtects() async throws {
        let fixture = try EngineFixture()
        // The app loads the pack at launch and runs from it (not resolved afresh each time).
        let updater = Self.updater(fixture) { $0.launch = LaunchPolicy(timings: ["filters": .nextLaunch]) }
        let pack = try await Self.publish(fixture, "filters", .onDemand)
        _ = try await updater.apply(try Manifest(packages: [pack]))
        _ = try await updater.install(id: "filters")
        let launch = try await updater.launch.begin()
        #expect(launch.package("filters")?.version == "1")
        let kept = try await updater.evictOnDemandPacks(budget: OnDemandBudget(maxBytes: 0))
        #expect(kept.evicted.isEmpty)
        #expect(try await updater.currentSnapshot().packages["filters"]?.active?.version == "1")
        // A later process, after the earlier one's launch ended.
        updater.store.endLaunches()
        let later = Updater(configuration: updater.configuration)
        #expect(try await later.evictOnDemandPacks(budget: OnDemandBudget(maxBytes: 0)).evicted == ["filters"])
        #expect(try await later.currentSnapshot().packages["filters"] == nil)
    }

    @Test("a pack unused for longer than the budget's days is evicted")
    func evictionByDays() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let day: TimeInterval = 86_400
        let candidates = [
            EvictionPlan.Candidate(id: "old", bytes: 10, lastUsed: now - 40 * day, isProtected: false),
            EvictionPlan.Candidate(id: "oldHeld", bytes: 10, lastUsed: now - 50 * day, isProtected: true),
            EvictionPlan.Candidate(id: "recent", bytes: 10, lastUsed: now - 2 * day, isProtected: false),
        ]
        let budget = OnDemandBudget(maxBytes: nil, maxUnusedDays: 30)
        #expect(EvictionPlan.choose(candidates, budget: budget, now: now).map(\.id) == ["old"])
        let both = OnDemandBudget(maxBytes: 15, maxUnusedDays: 30)
        #expect(EvictionPlan.choose(candidates, budget: both, now: now).map(\.id) == ["old", "recent"])
    }

    @Test("on a metered network a large prefetch waits, reported as waiting, and goes once unmetered")
    func meteredDefersLargePrefetch() async throws {
        let fixture = try EngineFixture()
        let updater = Self.updater(fixture) {
            $0.network = NetworkPolicy(meteredLimits: [.prefetch: 500, .onDemand: 500])
            $0.initialNetwork = .metered
        }
        let small = try await Self.publish(fixture, "small", .prefetch)
        let large = try await Self.publish(fixture, "large", .prefetch, extra: 5000)
        let launch = try await Self.publish(fixture, "launch", .launch, extra: 5000)
        let largePack = try await Self.publish(fixture, "largePack", .onDemand, extra: 5000)
        let events = updater.events()
        let report = try await updater.apply(try Manifest(packages: [small, large, launch, largePack]))
        #expect(report.failures.isEmpty)
        #expect(report.waiting.map(\.id) == ["large"])
        #expect(report.packages.first { $0.id == "large" }?.change == .add)
        #expect(await fixture.transport.requestCount(for: large.url) == 0)
        #expect(Set(try await updater.installedPackages().map(\.id)) == ["small", "launch"])
        #expect(try await updater.currentSnapshot().packages["large"]?.state == .new)
        #expect(await Self.published(events, "large", .waitingForNetwork))
        // The user asks for a large pack: it waits too, with its own error code.
        await #expect(throws: HotUpdateError(.waitingForNetwork, "")) { try await updater.install(id: "largePack") }
        #expect(await fixture.transport.requestCount(for: largePack.url) == 0)

        updater.setNetworkConditions(.unmetered)
        let later = try await updater.apply(try Manifest(packages: [small, large, launch, largePack]))
        #expect(later.waiting.isEmpty)
        #expect(later.packages.first { $0.id == "large" }?.change == .add)
        #expect(try await fixture.contents(of: "large", "large.txt") == "large 1")
        #expect(try await updater.install(id: "largePack").version == "1")
    }

    @Test("the network policy: limits per mode and per package; unknown sizes wait; unmetered never waits")
    func networkPolicyDecisions() throws {
        var policy = NetworkPolicy.standard
        policy.packageLimits["maps"] = 0
        var small = try PackageDescriptor(
            id: "small",
            version: "1",
            url: URL(string: "https://cdn.test/s.zip")!,
            size: 10
        )
        var maps = try PackageDescriptor(id: "maps", version: "1", url: URL(string: "https://cdn.test/m.zip")!, size: 1)
        var unknown = try PackageDescriptor(id: "u", version: "1", url: URL(string: "https://cdn.test/u.zip")!)
        #expect(!policy.waits(small, on: .metered))
        #expect(policy.waits(maps, on: .metered))
        #expect(policy.waits(unknown, on: .metered))
        #expect(!policy.waits(unknown, on: .unmetered))
        #expect(policy.waits(maps, on: NetworkConditions(isExpensive: false, isConstrained: true)))
        small.delivery = .launch
        maps.delivery = .launch
        unknown.delivery = .launch
        #expect(!policy.waits(unknown, on: .metered))  // launch packages have no limit by default
        #expect(policy.waits(maps, on: .metered))  // a package's own limit wins
        #expect(DeliveryMode(rawValue: "someday").effective == .prefetch)
    }

    @Test("a pack the user asks for takes the next free slot ahead of queued prefetch downloads")
    func priority() async throws {
        let fixture = try EngineFixture(maxConcurrentPackages: 1)
        let blocker = try await Self.publish(fixture, "blocker", .prefetch)
        let pre1 = try await Self.publish(fixture, "pre1", .prefetch)
        let pre2 = try await Self.publish(fixture, "pre2", .prefetch)
        let launch = try await Self.publish(fixture, "launch", .launch)
        let pack = try await Self.publish(fixture, "pack", .onDemand)
        _ = try await fixture.updater.apply(try Manifest(packages: [pack]))
        await fixture.transport.hold(try FakeArchive.make(["blocker.txt": "blocker 1"]), at: blocker.url)
        let updater = fixture.updater
        let first = Task { try await updater.install(blocker) }
        try await SingleFlightTests.waitUntilHeld(fixture, blocker.url)
        let sync = Task { try await updater.apply(try Manifest(packages: [pre1, pre2, launch, pack, blocker])) }
        // The sync's three downloads queue behind the blocker, then the user asks for the pack.
        try await waitUntil("the sync's three downloads queued") { updater.queuedDownloads >= 3 }
        let asked = Task { try await updater.install(id: "pack") }
        try await waitUntil("the pack's download queued") { updater.queuedDownloads >= 4 }
        await fixture.transport.release(blocker.url)
        _ = try await first.value
        _ = try await asked.value
        _ = try await sync.value
        let order = await fixture.transport.receivedRequests.map { $0.url.lastPathComponent }
        #expect(Array(order.prefix(3)) == ["blocker-1.zip", "launch-1.zip", "pack-1.zip"])
        #expect(Set(order.dropFirst(3)) == ["pre1-1.zip", "pre2-1.zip"])
    }

    @Test("waiting for launch packages: not ready while the download is held, ready once it lands")
    func waitForLaunch() async throws {
        let fixture = try EngineFixture()
        let launch = try await Self.publish(fixture, "core", .launch)
        let pre = try await Self.publish(fixture, "extra", .prefetch)
        await fixture.transport.hold(try FakeArchive.make(["core.txt": "core 1"]), at: launch.url)
        let updater = fixture.updater
        let sync = Task { try await updater.apply(try Manifest(packages: [launch, pre])) }
        try await SingleFlightTests.waitUntilHeld(fixture, launch.url)
        let early = await updater.waitForLaunchPackages(timeout: .milliseconds(50))
        #expect(!early.isReady)
        #expect(early.missing == ["core"])
        let waiter = Task { await updater.waitForLaunchPackages(timeout: .seconds(60)) }
        await fixture.transport.release(launch.url)
        let ready = await waiter.value
        #expect(ready.isReady && ready.missing.isEmpty)
        _ = try await sync.value
    }
}
