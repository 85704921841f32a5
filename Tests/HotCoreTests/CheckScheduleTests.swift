import Foundation
import HotCore
import HotTesting
import Testing

/// A clock the test moves by hand.
final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var date: Date
    init(_ date: Date = Date(timeIntervalSince1970: 1_800_000_000)) { self.date = date }
    var now: Date { lock.withLock { date } }
    func advance(_ seconds: TimeInterval) { lock.withLock { date += seconds } }
    func set(_ new: Date) { lock.withLock { date = new } }
}

/// Counts the checks a schedule runs; fails them when told to.
actor CheckCounter {
    private(set) var count = 0
    var failure: (any Error)?
    func setFailure(_ error: (any Error)?) { failure = error }
    func check() throws {
        count += 1
        if let failure { throw failure }
    }
}

@Suite("When to check")
struct CheckScheduleTests {
    static func schedule(
        _ policy: CheckSchedule.Policy,
        _ clock: ManualClock,
        file: URL? = nil,
        jitter: Double = 1
    )
        -> CheckSchedule
    {
        CheckSchedule(
            policy: policy,
            file: file,
            clock: { clock.now },
            jitter: { jitter },
            networkAllows: { _ in true }
        )
    }

    /// Runs the schedule for `trigger`, swallowing a check's failure.
    static func fire(_ schedule: CheckSchedule, _ trigger: CheckSchedule.Trigger, _ counter: CheckCounter) async {
        _ = try? await schedule.run(trigger) { try await counter.check() }
    }

    @Test("at launch, on foreground past the minimum interval, periodic every 24 h, manual always")
    func policies() async throws {
        let clock = ManualClock()
        let counter = CheckCounter()
        let schedule = Self.schedule(CheckSchedule.Policy(foregroundMinimumInterval: 600), clock)
        await Self.fire(schedule, .launch, counter)
        #expect(await counter.count == 1)
        clock.advance(300)
        await Self.fire(schedule, .foreground, counter)  // 5 min after: too soon
        #expect(await counter.count == 1)
        clock.advance(300)
        await Self.fire(schedule, .foreground, counter)  // 10 min after
        #expect(await counter.count == 2)
        await Self.fire(schedule, .manual, counter)
        await Self.fire(schedule, .manual, counter)
        #expect(await counter.count == 4)
        for _ in 0..<23 {
            clock.advance(3600)
            await Self.fire(schedule, .periodic, counter)
        }
        #expect(await counter.count == 4)  // 23 h since the last check
        clock.advance(3600)
        await Self.fire(schedule, .periodic, counter)
        #expect(await counter.count == 5)

        // The periodic interval is an hour at least; manual-only never checks by itself.
        #expect(CheckSchedule.Policy(periodicInterval: 60).periodicInterval == 3600)
        let manual = Self.schedule(.manualOnly, clock)
        for trigger in [CheckSchedule.Trigger.launch, .foreground, .periodic] {
            await Self.fire(manual, trigger, counter)
        }
        #expect(await counter.count == 5)
    }

    @Test("failures back off exponentially with jitter from 1 minute to 24 hours; a success resets")
    func backoff() async throws {
        let clock = ManualClock()
        let counter = CheckCounter()
        await counter.setFailure(HotUpdateError(.transportFailed, "down"))
        let schedule = Self.schedule(CheckSchedule.Policy(foregroundMinimumInterval: 0), clock, jitter: 1)
        #expect(await schedule.backoff(afterFailures: 1) == 60)
        #expect(await schedule.backoff(afterFailures: 2) == 120)
        #expect(await schedule.backoff(afterFailures: 12) == 24 * 3600)
        #expect(await Self.schedule(.manualOnly, clock, jitter: 0).backoff(afterFailures: 3) == 120)
        #expect(await Self.schedule(.manualOnly, clock, jitter: 0).backoff(afterFailures: 1) == 60)

        await Self.fire(schedule, .launch, counter)  // fails: wait 1 min
        clock.advance(59)
        await Self.fire(schedule, .foreground, counter)
        #expect(await counter.count == 1)
        clock.advance(1)
        await Self.fire(schedule, .foreground, counter)  // fails: wait 2 min
        #expect(await counter.count == 2)
        clock.advance(119)
        await Self.fire(schedule, .foreground, counter)
        #expect(await counter.count == 2)
        await Self.fire(schedule, .manual, counter)  // manual ignores the backoff; fails: 4 min
        #expect(await counter.count == 3)
        clock.advance(240)
        await counter.setFailure(nil)
        await Self.fire(schedule, .foreground, counter)
        #expect(await counter.count == 4)
        #expect(await schedule.current.consecutiveFailures == 0)
        #expect(await schedule.current.notBefore == nil)
    }

    @Test("a 503 with Retry-After waits that long")
    func retryAfter() async throws {
        let clock = ManualClock()
        let counter = CheckCounter()
        await counter.setFailure(HotUpdateError(.httpStatus, "the server answered HTTP 503 (Retry-After: 3600)"))
        let schedule = Self.schedule(CheckSchedule.Policy(foregroundMinimumInterval: 0), clock)
        await Self.fire(schedule, .launch, counter)
        await counter.setFailure(nil)
        clock.advance(3599)
        await Self.fire(schedule, .foreground, counter)
        #expect(await counter.count == 1)
        clock.advance(1)
        await Self.fire(schedule, .foreground, counter)
        #expect(await counter.count == 2)
        #expect(CheckSchedule.parseRetryAfter("120") == 120)
        #expect(
            CheckSchedule.parseRetryAfter(
                "Wed, 21 Oct 2015 07:28:00 GMT",
                now: Date(timeIntervalSince1970: 1_445_412_480 - 30)
            ) == 30
        )
    }

    @Test("the last check is persisted, and one in the future is corrected to now")
    func persisted() async throws {
        let directory = ScratchDirectory.parentDirectory.appendingPathComponent("schedule-\(UUID().uuidString)")
        let file = directory.appendingPathComponent("check-schedule.json")
        let clock = ManualClock()
        let counter = CheckCounter()
        let policy = CheckSchedule.Policy(atLaunch: false, foregroundMinimumInterval: 3600)
        await Self.fire(Self.schedule(policy, clock, file: file), .foreground, counter)
        #expect(await counter.count == 1)
        let checked = clock.now
        clock.advance(600)
        let relaunched = Self.schedule(policy, clock, file: file)
        #expect(await relaunched.current.lastCheck == checked)  // read back as written, not corrected
        await Self.fire(relaunched, .foreground, counter)  // a relaunch remembers
        #expect(await counter.count == 1)

        // The clock is set back a year: the recorded check is in the future.
        clock.advance(-365 * 24 * 3600)
        let setBack = Self.schedule(policy, clock, file: file)
        #expect(await setBack.current.lastCheck == clock.now)
        await Self.fire(setBack, .foreground, counter)
        #expect(await counter.count == 1)  // corrected to now, not never again
        clock.advance(3600)
        await Self.fire(setBack, .foreground, counter)
        #expect(await counter.count == 2)
    }

    @Test("kept under a store root, the record is the store's file, and a backoff survives a relaunch exactly")
    func underTheRoot() async throws {
        let root = ScratchDirectory.parentDirectory.appendingPathComponent("schedule-root-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let clock = ManualClock()
        let counter = CheckCounter()
        await counter.setFailure(HotUpdateError(.httpStatus, "the server answered HTTP 503 (Retry-After: 7200)"))
        let policy = CheckSchedule.Policy(foregroundMinimumInterval: 60)
        // A launch of the app: a schedule on the root, read from what the last one kept.
        let launch = {
            CheckSchedule(policy: policy, root: root, clock: { clock.now }, jitter: { 1 }, networkAllows: { _ in true })
        }
        let schedule = launch()
        await Self.fire(schedule, .launch, counter)
        let written = await schedule.current
        #expect(written.notBefore == clock.now.addingTimeInterval(7200))
        let file = root.appendingPathComponent("check-schedule.json")
        #expect(FileManager.default.fileExists(atPath: file.path))
        // No temporary is left beside it: the store replaced it whole.
        let names = try FileManager.default.contentsOfDirectory(atPath: root.path)
        #expect(names.filter { $0.contains("check-schedule") } == ["check-schedule.json"])

        // A relaunch an hour later reads the same record and still waits for the server.
        clock.advance(3600)
        let relaunched = launch()
        #expect(await relaunched.current == written)
        await counter.setFailure(nil)
        await Self.fire(relaunched, .launch, counter)
        #expect(await counter.count == 1)
        clock.advance(3601)
        await Self.fire(relaunched, .launch, counter)
        #expect(await counter.count == 2)
        #expect(await relaunched.current.consecutiveFailures == 0)
    }

    @Test("a network the policy refuses defers automatic checks")
    func network() async throws {
        let clock = ManualClock()
        let counter = CheckCounter()
        let schedule = CheckSchedule(
            policy: CheckSchedule.Policy(allowsExpensiveNetwork: false),
            clock: { clock.now },
            networkAllows: { _ in false }
        )
        await Self.fire(schedule, .launch, counter)
        #expect(await counter.count == 0)
        await Self.fire(schedule, .manual, counter)
        #expect(await counter.count == 1)
    }
}
