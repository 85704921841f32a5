import Foundation

extension PackageRecord {
    /// The blocked entry for an offered version that still blocks it at `date`, if any.
    public func blocking(_ offered: PackageDescriptor, at date: Date) -> PackageRecord.BlockedVersion? {
        blocked?.first { $0.matches(offered) && $0.isBlocking(at: date) }
    }

    /// The version a failed trial would go back to: the active one when it needs no trial
    /// or was confirmed, else the trial's fallback.
    var confirmedVersion: InstalledVersion? {
        guard let launch, launch.phase != .confirmed else { return active }
        return launch.fallback
    }
}

extension PackageRecord {
    /// A version a failed launch blocked, as stored in ``PackageRecord/blocked``.
    ///
    /// No sync downloads or restores a blocked version while it blocks (see
    /// ``isBlocking(at:)``); a newer version is taken as usual. An operator removes it with
    /// ``UpdaterLaunch/unblock(packageID:version:)`` (`hot unblock ID VERSION`).
    public struct BlockedVersion: Codable, Sendable, Hashable {
        /// The version string.
        public var version: String
        /// The archive's SHA-256 (hex), when known: a re-published version with other content is
        /// not blocked.
        public var sha256: String?
        /// Why it was blocked.
        public var reason: String
        /// When it was blocked (the last time, when it failed more than once).
        public var blockedAt: Date
        /// How many launches of it failed.
        public var failures: Int
        /// When it may be downloaded once more (per ``LaunchPolicy/RetryPolicy``); nil: never.
        public var retryAfter: Date?

        /// Creates a value.
        public init(
            version: String,
            sha256: String?,
            reason: String,
            blockedAt: Date,
            failures: Int = 1,
            retryAfter: Date? = nil
        ) {
            self.version = version
            self.sha256 = sha256
            self.reason = reason
            self.blockedAt = blockedAt
            self.failures = failures
            self.retryAfter = retryAfter
        }

        /// Whether the entry blocks an offered version.
        public func matches(_ offered: PackageDescriptor) -> Bool {
            guard offered.version == version else { return false }
            guard let sha256, let offeredSHA = offered.sha256 else { return true }
            return offeredSHA.hex == sha256.lowercased()
        }

        /// Whether the version is still kept out at `date`.
        public func isBlocking(at date: Date) -> Bool {
            guard let retryAfter else { return true }
            return date < retryAfter
        }
    }
}

extension PackageRecord {
    /// The launch trial of a guarded package's active version, as stored in its
    /// ``PackageRecord/launch``.
    public struct LaunchTrial: Codable, Sendable, Hashable {
        /// Where the active version stands.
        public var phase: PackageRecord.LaunchPhase
        /// The token of the launch that tries it, when ``phase`` is ``PackageRecord/LaunchPhase/trial``.
        public var token: String?
        /// When that launch began.
        public var startedAt: Date?
        /// The last confirmed version, which a failed trial rolls back to; nil: the copy bundled
        /// with the app. Kept on disk until the trial is confirmed.
        public var fallback: InstalledVersion?
        /// The tokens of launches that began while this trial's launch was running and run
        /// the version too (``LaunchPolicy/ConcurrentLaunch/joinTrial``): any of them may
        /// confirm it, and the trial fails only when all of them are gone unconfirmed.
        public var joined: [String]?

        /// Creates a value.
        public init(
            phase: PackageRecord.LaunchPhase,
            token: String? = nil,
            startedAt: Date? = nil,
            fallback: InstalledVersion? = nil,
            joined: [String]? = nil
        ) {
            self.phase = phase
            self.token = token
            self.startedAt = startedAt
            self.fallback = fallback
            self.joined = joined
        }

        /// Every launch that runs the trial: its own and those that joined it.
        public var tokens: [String] { [token].compactMap { $0 } + (joined ?? []) }
    }
}

extension PackageRecord {
    /// Where the active version of a guarded package stands in its launch trial.
    ///
    /// A struct with static members rather than an enum, so new phases can be added without
    /// breaking a `switch` in user code.
    ///
    /// A version installed for a guarded package is ``pending`` (installed, never launched);
    /// ``UpdaterLaunch/begin()`` marks it ``trial`` durably before the app loads it;
    /// ``UpdaterLaunch/confirm(_:)`` with that launch's token makes it ``confirmed``. A trial
    /// the next ``UpdaterLaunch/begin()`` finds unconfirmed is rolled back and blocked.
    public struct LaunchPhase: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        /// The phase's stable name, as stored.
        public let rawValue: String
        /// Creates a phase from its stored name.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Installed and active, never launched.
        public static let pending = PackageRecord.LaunchPhase(rawValue: "pending")
        /// Handed to a launch that has not confirmed it yet.
        public static let trial = PackageRecord.LaunchPhase(rawValue: "trial")
        /// A launch confirmed it.
        public static let confirmed = PackageRecord.LaunchPhase(rawValue: "confirmed")

        public var description: String { rawValue }
    }
}
