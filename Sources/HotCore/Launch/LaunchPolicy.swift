import Foundation

/// Which packages an app runs (script patches, web modules, a JS bundle, config) and so
/// launch under a trial, and when new versions take effect.
///
/// A guarded package's new version is tried by one launch (``UpdaterLaunch/begin()``) and
/// kept only when that launch confirms it (``UpdaterLaunch/confirm(_:)``); otherwise the next
/// launch rolls it back to the last confirmed version and blocks it. Resource packs need none
/// of it and are left out.
///
/// ```swift
/// var launch = LaunchPolicy(guarded: ["app", "config"])
/// launch.retry = .after(24 * 3600, attempts: 1)
/// let configuration = UpdaterConfiguration(root: root, …, launch: launch)
/// ```
public struct LaunchPolicy: Sendable, Hashable {
    /// The ids of the packages that launch under a trial.
    public var guarded: Set<String>
    /// When a package's new version takes effect, where it differs from the default
    /// (``LaunchPolicy/Timing/nextLaunch`` for guarded packages, else
    /// ``LaunchPolicy/Timing/immediate``).
    public var timings: [String: LaunchPolicy.Timing]
    /// Whether a blocked version is tried again.
    public var retry: LaunchPolicy.RetryPolicy
    /// How long a launch has to confirm; a confirmation after that confirms nothing and the
    /// trial is rolled back at the next launch. Nil: no limit (only a launch that never
    /// confirms fails).
    public var trialTimeout: TimeInterval?
    /// What a launch runs when it begins while another live launch (an app's extension, a
    /// second process) still tries a new version: that trial is never judged a failure while
    /// its launch runs. Default ``ConcurrentLaunch/joinTrial``.
    public var concurrentLaunch: LaunchPolicy.ConcurrentLaunch
    /// How long a launch waits for another process's hold on the store lock (a sync in an
    /// extension, a stopped debugger, a hung helper) before it runs without it: the versions
    /// the store last committed, read without the lock, with no new trial and nothing written
    /// (``LaunchSession/deferred``). The next launch goes on as usual. A hold of this process
    /// (a sync it runs) is waited for whatever this says. One second by default, well within
    /// the time a system gives an app to finish launching (about 20 s on iOS); nil waits as
    /// long as the updater's lock wait does.
    public var lockDeadline: TimeInterval? = 1

    /// Creates a policy.
    ///
    /// - Parameters:
    ///   - guarded: The packages that launch under a trial.
    ///   - timings: When new versions take effect, per package, where it differs from the default.
    ///   - retry: Whether blocked versions are tried again (default never).
    ///   - trialTimeout: How long a launch has to confirm (default no limit).
    ///   - concurrentLaunch: What a launch runs while another live launch tries a new version.
    public init(
        guarded: Set<String> = [],
        timings: [String: LaunchPolicy.Timing] = [:],
        retry: LaunchPolicy.RetryPolicy = .never,
        trialTimeout: TimeInterval? = nil,
        concurrentLaunch: LaunchPolicy.ConcurrentLaunch = .joinTrial
    ) {
        self.guarded = guarded
        self.timings = timings
        self.retry = retry
        self.trialTimeout = trialTimeout
        self.concurrentLaunch = concurrentLaunch
    }

    /// Whether a package launches under a trial.
    public func isGuarded(_ id: String) -> Bool { guarded.contains(id) }

    /// When a new version of a package takes effect.
    public func timing(for id: String) -> LaunchPolicy.Timing {
        timings[id] ?? (isGuarded(id) ? .nextLaunch : .immediate)
    }
}

extension LaunchPolicy {
    /// When a newly installed version takes effect, after CodePush's install modes.
    public struct Timing: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        /// The timing's stable name.
        public let rawValue: String
        /// Creates a timing from its name.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Active as soon as it is installed: assets resolved after the install come from it.
        public static let immediate = LaunchPolicy.Timing(rawValue: "immediate")
        /// Installed as ``PackageRecord/pending`` and made active by the next
        /// ``UpdaterLaunch/begin()``: a running app never has the files it loaded swapped.
        public static let nextLaunch = LaunchPolicy.Timing(rawValue: "nextLaunch")
        /// As ``nextLaunch``, or earlier at ``UpdaterLaunch/resume()`` when the app returns to
        /// the foreground.
        public static let nextResume = LaunchPolicy.Timing(rawValue: "nextResume")

        public var description: String { rawValue }
    }
}

extension LaunchPolicy {
    /// What a launch runs when another live launch is trying a package's new version.
    ///
    /// Either way the trial stays the other launch's: it is not rolled back, its version is
    /// not blocked and its tree is not deleted while that launch runs. Only a trial whose
    /// every launch died unconfirmed (or whose ``LaunchPolicy/trialTimeout`` passed) fails.
    public struct ConcurrentLaunch: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        /// The policy's stable name.
        public let rawValue: String
        /// Creates a policy from its name.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Runs the version on trial too, and may confirm it: an app and its extension run
        /// the same code.
        public static let joinTrial = ConcurrentLaunch(rawValue: "joinTrial")
        /// Runs the last confirmed version (the bundle when there is none) until the trial is
        /// confirmed: a second process never runs code that has not proved itself.
        public static let confirmedVersion = ConcurrentLaunch(rawValue: "confirmedVersion")

        public var description: String { rawValue }
    }
}

extension LaunchPolicy {
    /// Whether a blocked version is ever tried again.
    public struct RetryPolicy: Sendable, Hashable {
        /// How long after a failed launch the version may be downloaded again; nil: never.
        public var interval: TimeInterval?
        /// How many failed launches of one version are retried at most.
        public var attempts: Int

        /// A blocked version stays blocked until an operator unblocks it (CodePush's default).
        public static let never = LaunchPolicy.RetryPolicy(interval: nil, attempts: 0)

        /// A blocked version is tried again `interval` seconds after each failed launch, for at
        /// most `attempts` failed launches; after that it stays blocked.
        ///
        /// ```swift
        /// let policy = LaunchPolicy.RetryPolicy.after(24 * 3600, attempts: 1)  // once, a day later
        /// ```
        public static func after(_ interval: TimeInterval, attempts: Int = 1) -> LaunchPolicy.RetryPolicy {
            LaunchPolicy.RetryPolicy(interval: max(0, interval), attempts: max(0, attempts))
        }

        /// When a version that has failed `failures` launches may be tried again; nil: never.
        public func retryDate(afterFailures failures: Int, at date: Date) -> Date? {
            guard let interval, failures <= attempts else { return nil }
            return date.addingTimeInterval(interval)
        }
    }
}
