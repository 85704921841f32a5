import Foundation

#if canImport(Network)
import Network
#endif

/// Decides when an app checks for updates, and remembers it across launches.
///
/// Policies: at launch, on foreground with a minimum interval, periodic (24 hours by default,
/// one hour at least) and manual. After a failure automatic checks back off exponentially
/// with jitter, from one minute to 24 hours; a server's `Retry-After` (HTTP 429 or 503) is
/// honoured when longer. The last check is persisted; one recorded in the future (the
/// clock was set back) is corrected to now, as Sparkle does. The clock and the jitter are
/// injectable, so tests count exact checks.
///
/// Kept under the store root (``init(policy:root:clock:jitter:networkAllows:)``), the record
/// is written by the store, under its lock and durably, beside the rest of the store's state.
///
/// ```swift
/// let schedule = CheckSchedule(policy: CheckSchedule.Policy(), root: root)
/// try await schedule.run(.launch) { _ = try await updater.sync(from: source) }
/// ```
public actor CheckSchedule {
    /// The policy.
    public nonisolated let policy: CheckSchedule.Policy
    private let storage: Storage
    private let clock: @Sendable () -> Date
    private let jitter: @Sendable () -> Double
    private let networkAllows: @Sendable (CheckSchedule.Policy) -> Bool
    private var record: CheckSchedule.Record
    /// Checks run by this schedule (started), for an app's diagnostics.
    public private(set) var checksRun = 0

    /// Where the record is kept between launches.
    private enum Storage: Sendable {
        case memory
        case file(URL)
        /// `check-schedule.json` under a store root, written by the store.
        case store(URL)
    }

    /// Creates a schedule whose record is kept under a store root, in `check-schedule.json`:
    /// the store writes it, under the store's lock and durably, and sweeps what an interrupted
    /// write left.
    ///
    /// - Parameters:
    ///   - policy: When to check.
    ///   - root: The store root the app's updater uses.
    ///   - clock: The current date (default the system clock).
    ///   - jitter: A value in 0...1 drawn per backoff (default random).
    ///   - networkAllows: Whether the current network allows a check under the policy
    ///     (default: on Apple platforms, the current path's expensive and constrained flags;
    ///     elsewhere always).
    public init(
        policy: CheckSchedule.Policy,
        root: URL,
        clock: @escaping @Sendable () -> Date = { Date() },
        jitter: @escaping @Sendable () -> Double = { Double.random(in: 0...1) },
        networkAllows: (@Sendable (CheckSchedule.Policy) -> Bool)? = nil
    ) {
        let root = root.standardizedFileURL
        let stored = try? StoreStateFile.checkSchedule.read(root: root)
        self.init(policy, .store(root), stored: stored ?? nil, clock, jitter, networkAllows)
    }

    /// Creates a schedule.
    ///
    /// - Parameters:
    ///   - policy: When to check.
    ///   - file: Where the record is kept between launches, written by the schedule; nil: in
    ///     memory only. To keep it under a store root, use
    ///     ``init(policy:root:clock:jitter:networkAllows:)``.
    ///   - clock: The current date (default the system clock).
    ///   - jitter: A value in 0...1 drawn per backoff (default random).
    ///   - networkAllows: Whether the current network allows a check under the policy
    ///     (default: on Apple platforms, the current path's expensive and constrained flags;
    ///     elsewhere always).
    public init(
        policy: CheckSchedule.Policy,
        file: URL? = nil,
        clock: @escaping @Sendable () -> Date = { Date() },
        jitter: @escaping @Sendable () -> Double = { Double.random(in: 0...1) },
        networkAllows: (@Sendable (CheckSchedule.Policy) -> Bool)? = nil
    ) {
        let stored = file.flatMap { try? Data(contentsOf: $0) }
        self.init(policy, file.map { .file($0) } ?? .memory, stored: stored, clock, jitter, networkAllows)
    }

    private init(
        _ policy: CheckSchedule.Policy,
        _ storage: Storage,
        stored: Data?,
        _ clock: @escaping @Sendable () -> Date,
        _ jitter: @escaping @Sendable () -> Double,
        _ networkAllows: (@Sendable (CheckSchedule.Policy) -> Bool)?
    ) {
        self.policy = policy
        self.storage = storage
        self.clock = clock
        self.jitter = jitter
        self.networkAllows = networkAllows ?? CheckSchedule.currentNetworkAllows
        var loaded =
            stored.flatMap { try? Self.decoder.decode(CheckSchedule.Record.self, from: $0) } ?? CheckSchedule.Record()
        let now = clock()
        // A date in the future: the clock was set back. Start again from now.
        if let last = loaded.lastCheck, last > now { loaded.lastCheck = now }
        if let success = loaded.lastSuccess, success > now { loaded.lastSuccess = now }
        if let notBefore = loaded.notBefore, notBefore > now.addingTimeInterval(CheckSchedule.Policy.maximumBackoff) {
            loaded.notBefore = now.addingTimeInterval(CheckSchedule.Policy.maximumBackoff)
        }
        record = loaded
    }

    /// What the schedule remembers now.
    public var current: CheckSchedule.Record { record }

    /// Whether `trigger` should check now.
    public func shouldCheck(_ trigger: CheckSchedule.Trigger) -> Bool {
        if trigger == .manual { return true }
        let now = clock()
        if let notBefore = record.notBefore, now < notBefore { return false }
        guard networkAllows(policy) else { return false }
        let since = record.lastCheck.map { now.timeIntervalSince($0) }
        switch trigger {
        case .launch:
            return policy.atLaunch || (record.consecutiveFailures > 0 && record.notBefore != nil)
        case .foreground:
            guard let interval = policy.foregroundMinimumInterval else { return false }
            return since.map { $0 >= interval } ?? true
        case .periodic:
            guard let interval = policy.periodicInterval else { return false }
            return since.map { $0 >= interval } ?? true
        default:
            return false
        }
    }

    /// Runs `check` when ``shouldCheck(_:)`` says so and records how it went.
    ///
    /// - Returns: Whether `check` ran.
    /// - Throws: What `check` threw, after recording the failure.
    @discardableResult
    public func run(_ trigger: CheckSchedule.Trigger, check: @Sendable () async throws -> Void) async throws -> Bool {
        guard shouldCheck(trigger) else { return false }
        checksRun += 1
        do {
            try await check()
            await recordSuccess()
        } catch {
            await recordFailure(retryAfter: Self.retryAfter(of: error))
            throw error
        }
        return true
    }

    /// Records a successful check.
    public func recordSuccess() async {
        let now = clock()
        record = CheckSchedule.Record(lastCheck: now, lastSuccess: now, consecutiveFailures: 0, notBefore: nil)
        await save()
    }

    /// Records a failed check: the next automatic one waits for the backoff, or for
    /// `retryAfter` seconds when the server asked for longer.
    public func recordFailure(retryAfter: TimeInterval? = nil) async {
        let now = clock()
        record.lastCheck = now
        record.consecutiveFailures += 1
        let wait = max(
            backoff(afterFailures: record.consecutiveFailures),
            min(retryAfter ?? 0, CheckSchedule.Policy.maximumBackoff)
        )
        record.notBefore = now.addingTimeInterval(wait)
        await save()
    }

    /// The jittered wait after `failures` failed checks: 1 minute doubled per failure, at most
    /// 24 hours, then drawn between half of it and all of it (never under a minute).
    public func backoff(afterFailures failures: Int) -> TimeInterval {
        guard failures > 0 else { return 0 }
        let exponent = Double(min(failures - 1, 20))
        let ceiling = min(CheckSchedule.Policy.maximumBackoff, CheckSchedule.Policy.minimumBackoff * pow(2, exponent))
        let drawn = ceiling * (0.5 + 0.5 * min(1, max(0, jitter())))
        return max(CheckSchedule.Policy.minimumBackoff, drawn)
    }

    /// Keeps the record; a record that cannot be written is kept in memory for this launch.
    /// The store's lock is waited for off the cooperative pool.
    private func save() async {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        guard let data = try? encoder.encode(record) else { return }
        switch storage {
        case .memory:
            break
        case .file(let file):
            try? FileManager.default.createDirectory(
                at: file.deletingLastPathComponent(),
                withIntermediateDirectories: true
            )
            try? data.write(to: file, options: .atomic)
        case .store(let root):
            _ = try? await FileSystem.offload { try StoreStateFile.checkSchedule.update(root: root) { $0 = data } }
        }
    }

    /// Reads a record as ``save()`` writes it.
    private static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return decoder
    }

    /// The `Retry-After` a failed check carries: a ``HotUpdateError`` with code
    /// ``HotUpdateError/Code/httpStatus`` for 429 or 503 whose message or subject holds
    /// `Retry-After: N`.
    static func retryAfter(of error: any Error) -> TimeInterval? {
        guard let error = error as? HotUpdateError, error.code == .httpStatus else { return nil }
        let text = [error.message, error.subject ?? ""].joined(separator: " ")
        guard text.contains("429") || text.contains("503") else { return nil }
        guard let range = text.range(of: "Retry-After:", options: .caseInsensitive) else { return nil }
        return parseRetryAfter(String(text[range.upperBound...]).trimmingCharacters(in: .whitespaces))
    }

    /// Reads a `Retry-After` header value: seconds, or an HTTP date.
    ///
    /// - Parameters:
    ///   - value: The header's value.
    ///   - now: The current date, for an HTTP date.
    /// - Returns: Seconds to wait, or nil when the value cannot be read.
    public static func parseRetryAfter(_ value: String, now: Date = Date()) -> TimeInterval? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        let digits = trimmed.prefix { $0.isNumber }
        if !digits.isEmpty, let seconds = TimeInterval(digits) { return seconds }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: trimmed) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }

    /// Whether the current network allows a check under `policy`.
    static let currentNetworkAllows: @Sendable (CheckSchedule.Policy) -> Bool = { policy in
        #if canImport(Network)
        if policy.allowsExpensiveNetwork && policy.allowsConstrainedNetwork { return true }
        let monitor = NWPathMonitor()
        let path = monitor.currentPath
        monitor.cancel()
        if !policy.allowsExpensiveNetwork && path.isExpensive { return false }
        if !policy.allowsConstrainedNetwork && path.isConstrained { return false }
        return true
        #else
        return true
        #endif
    }
}

extension CheckSchedule {
    /// When to check for updates.
    public struct Policy: Sendable, Hashable {
        /// Check at every launch.
        public var atLaunch: Bool
        /// Check on foreground when the last check is at least this old; nil: never on foreground.
        public var foregroundMinimumInterval: TimeInterval?
        /// Check on a periodic trigger when the last check is at least this old (at least one
        /// hour); nil: no periodic checks.
        public var periodicInterval: TimeInterval?
        /// Whether a check may use an expensive network (cellular, a personal hotspot). Apple
        /// platforms only.
        public var allowsExpensiveNetwork: Bool
        /// Whether a check may use a constrained network (Low Data Mode). Apple platforms only.
        public var allowsConstrainedNetwork: Bool

        /// The shortest periodic interval: one hour.
        public static let minimumPeriodicInterval: TimeInterval = 3600
        /// The first wait after a failed check: one minute.
        public static let minimumBackoff: TimeInterval = 60
        /// The longest wait after failed checks: 24 hours.
        public static let maximumBackoff: TimeInterval = 24 * 3600

        /// Creates a policy; the default checks at launch, on foreground at most every 15
        /// minutes, and every 24 hours.
        public init(
            atLaunch: Bool = true,
            foregroundMinimumInterval: TimeInterval? = 15 * 60,
            periodicInterval: TimeInterval? = 24 * 3600,
            allowsExpensiveNetwork: Bool = true,
            allowsConstrainedNetwork: Bool = false
        ) {
            self.atLaunch = atLaunch
            self.foregroundMinimumInterval = foregroundMinimumInterval.map { max(0, $0) }
            self.periodicInterval = periodicInterval.map { max(Self.minimumPeriodicInterval, $0) }
            self.allowsExpensiveNetwork = allowsExpensiveNetwork
            self.allowsConstrainedNetwork = allowsConstrainedNetwork
        }

        /// Only checks the app asks for with ``CheckSchedule/Trigger/manual``.
        public static let manualOnly = CheckSchedule.Policy(
            atLaunch: false,
            foregroundMinimumInterval: nil,
            periodicInterval: nil
        )
    }
}

extension CheckSchedule {
    /// What a schedule remembers between launches, in `check-schedule.json` under the store root.
    public struct Record: Codable, Sendable, Hashable {
        /// When the last check ended (success or failure).
        public var lastCheck: Date?
        /// When the last check succeeded.
        public var lastSuccess: Date?
        /// Failed checks since the last success.
        public var consecutiveFailures: Int
        /// No automatic check before this date (backoff or a server's `Retry-After`).
        public var notBefore: Date?

        /// Creates a record.
        public init(
            lastCheck: Date? = nil,
            lastSuccess: Date? = nil,
            consecutiveFailures: Int = 0,
            notBefore: Date? = nil
        ) {
            self.lastCheck = lastCheck
            self.lastSuccess = lastSuccess
            self.consecutiveFailures = consecutiveFailures
            self.notBefore = notBefore
        }
    }
}

extension CheckSchedule {
    /// What asks for a check.
    public struct Trigger: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The trigger's name.
        public let rawValue: String
        /// Creates a trigger from its name.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The app started.
        public static let launch = CheckSchedule.Trigger(rawValue: "launch")
        /// The app came to the foreground.
        public static let foreground = CheckSchedule.Trigger(rawValue: "foreground")
        /// A periodic timer fired (the app calls ``CheckSchedule/run(_:check:)`` from its own timer
        /// or background task).
        public static let periodic = CheckSchedule.Trigger(rawValue: "periodic")
        /// The user or the app asked: always checks, backoff or not.
        public static let manual = CheckSchedule.Trigger(rawValue: "manual")

        public var description: String { rawValue }
    }
}
