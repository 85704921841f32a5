import Foundation
import Logging

/// What one launch loads: its token and the packages to load.
public struct LaunchSession: Sendable, Hashable {
    /// Ties a confirmation to this launch alone (see ``UpdaterLaunch/confirm(_:)``).
    public var token: String
    /// The packages to load, as ``Updater/installedPackages()`` lists them once the launch's
    /// changes are recorded.
    public var packages: [InstalledPackage]
    /// The guarded packages this launch tries: confirm them once the app runs.
    public var trials: [String: String]
    /// The versions rolled back by this launch: a package id and the version blocked.
    public var rolledBack: [LaunchSession.RolledBackVersion]
    /// Why this launch ran without the store lock, when another process held it past
    /// ``LaunchPolicy/lockDeadline``: it runs the versions last committed (a guarded
    /// package's confirmed one), tries nothing and changed nothing; nil for a launch that
    /// took the lock. The next launch rolls back, activates and tries as usual.
    public var deferred: LaunchSession.Deferral?

    /// Creates a value.
    public init(
        token: String,
        packages: [InstalledPackage],
        trials: [String: String],
        rolledBack: [LaunchSession.RolledBackVersion],
        deferred: LaunchSession.Deferral? = nil
    ) {
        self.token = token
        self.packages = packages
        self.trials = trials
        self.rolledBack = rolledBack
        self.deferred = deferred
    }

    /// The package of that id this launch loads, if any.
    public func package(_ id: String) -> InstalledPackage? {
        packages.first { $0.id == id }
    }
}

/// The launch part of an ``Updater``: trials, versions waiting for a restart, and blocked
/// versions. Reach it as ``Updater/launch``.
///
/// ```swift
/// let session = try await updater.launch.begin()
/// try loadApp(from: session.package("app")?.directory ?? bundledApp)
/// try await updater.launch.confirm(session.token)  // the app runs
/// ```
public struct UpdaterLaunch: Sendable {
    let updater: Updater

    /// Begins a launch: call it once at app start, before loading any package, and load the
    /// returned packages.
    ///
    /// In one transaction (one commit, so a kill at any point leaves the store as before or
    /// as after):
    /// 1. A guarded package whose active version is still on trial from an earlier launch
    ///    that never confirmed it (every process running it ended, or its time ran out) goes back to its
    ///    last confirmed version, or to the bundle when there is none; the bad version is
    ///    blocked with the reason (see ``PackageRecord/BlockedVersion``), its tree deleted, and a
    ///    ``PackageState/blocked`` event published with a ``HotUpdateError/Code/launchFailed``
    ///    error.
    /// 2. A version waiting for the next launch (``PackageRecord/pending``) becomes active.
    /// 3. Each guarded package's untried active version is marked ``PackageRecord/LaunchPhase/trial`` with
    ///    this launch's token, before the app loads it.
    ///
    /// A trial another live launch runs (an extension's, another process's) is left alone:
    /// this launch joins it or runs the confirmed version, per
    /// ``LaunchPolicy/concurrentLaunch``, and the trees it runs from are kept until it ends.
    /// This launch lives until the process ends, the updater is released, or `begin()` is
    /// called again.
    /// - Returns: The launch's token and what to load.
    /// - Throws: ``HotUpdateError`` when the store cannot be read or written.
    public func begin() async throws -> LaunchSession {
        try await begin(resuming: false)
    }

    /// Activates the versions waiting for the next resume (``LaunchPolicy/Timing/nextResume``),
    /// as ``begin()`` does for them, when the app returns to the foreground and can reload
    /// those packages. Trials of this process's launch are not rolled back.
    ///
    /// - Returns: A new token for the versions activated (confirm it once they run) and
    ///   every package to load.
    /// - Throws: ``HotUpdateError`` when the store cannot be read or written.
    public func resume() async throws -> LaunchSession {
        try await begin(resuming: true)
    }

    /// Confirms the launch of `token`: every guarded version it tries becomes
    /// ``PackageRecord/LaunchPhase/confirmed``, and a blocked entry for that version (one tried again by
    /// the retry policy) is cleared. A token of another launch confirms nothing, and so does
    /// one whose ``LaunchPolicy/trialTimeout`` passed.
    ///
    /// - Parameter token: The token ``begin()`` returned.
    /// - Returns: The ids of the packages confirmed.
    /// - Throws: ``HotUpdateError`` when the store cannot be written.
    @discardableResult
    public func confirm(_ token: String) async throws -> [String] {
        let now = Date()
        let confirmed = try await updater.store.confirmLaunch(
            token,
            timeout: updater.configuration.launch.trialTimeout,
            at: now
        )
        for (id, version) in confirmed {
            updater.logger.info("launch confirmed", metadata: ["package": "\(id)"])
            updater.report(TelemetryEvent(kind: .confirm, date: now, packageID: id, version: version))
        }
        return confirmed.map(\.id)
    }

    /// The versions installed and waiting to take effect: a package listed here changes at
    /// the next launch (or resume), not while the app runs.
    ///
    /// - Throws: ``HotUpdateError`` from the metadata store.
    public func waitingVersions() async throws -> [LaunchSession.WaitingVersion] {
        let policy = updater.configuration.launch
        return try await updater.open().packages.values.sorted { $0.id < $1.id }.compactMap { record in
            record.pending.map {
                LaunchSession.WaitingVersion(id: record.id, version: $0.version, timing: policy.timing(for: record.id))
            }
        }
    }

    /// Whether a new version of `packageID` is installed and waits for a restart (or resume).
    ///
    /// - Throws: ``HotUpdateError`` from the metadata store.
    public func waitsForRestart(_ packageID: String) async throws -> Bool {
        try await updater.open().packages[packageID]?.pending != nil
    }

    /// Removes a version from a package's blocked list, so the next sync that offers it
    /// downloads it again.
    ///
    /// - Parameters:
    ///   - packageID: The package.
    ///   - version: The blocked version.
    /// - Throws: ``HotUpdateError/Code/notFound`` when that version is not blocked.
    public func unblock(packageID: String, version: String) async throws {
        try await updater.store.unblock(packageID, version: version)
        updater.logger.notice("unblocked", metadata: ["package": "\(packageID)", "version": "\(version)"])
    }

    private func begin(resuming: Bool) async throws -> LaunchSession {
        let token = UUID().uuidString
        let now = Date()
        let changes: Store.LaunchChanges
        do {
            changes = try await updater.store.beginLaunch(
                resuming: resuming,
                token: token,
                policy: updater.configuration.launch,
                keep: updater.configuration.keepPreviousVersions,
                at: now
            )
        } catch let busy as HotUpdateError where busy.code == .storeBusy {
            // Another process held the lock past the deadline (this process's own holders are
            // waited for): run what the store last committed, and leave the rest to the next launch.
            return try await deferredLaunch(token: token, because: busy, at: now)
        }
        for rolled in changes.rolledBack { reportRollback(rolled, at: now) }
        for (id, version) in changes.activated { updater.hub.publish(id, version, .installed) }
        var packages = try await updater.installedPackages()
        // A tree lost since it was installed is not handed out: the app loads its bundled copy,
        // and the next sync heals the package (one stat per package).
        packages = packages.filter { package in
            guard FileSystem.isDirectory(package.directory) else {
                updater.logger.error(
                    "the active version's files are gone: the bundled copy runs until a sync heals it",
                    metadata: ["package": "\(package.id)", "version": "\(package.version)"]
                )
                return false
            }
            return true
        }
        if !changes.substitutes.isEmpty {
            // Another launch tries these packages' new versions: this one runs the confirmed ones.
            let snapshot = try await updater.store.read()
            packages = try packages.compactMap { package in
                guard let substitute = changes.substitutes[package.id] else { return package }
                guard let version = substitute, let record = snapshot.packages[package.id] else { return nil }
                return try updater.store.installedPackage(record, version: version)
            }
            for (id, version) in changes.substitutes {
                updater.logger.notice(
                    "another launch tries a new version: running the confirmed one",
                    metadata: ["package": "\(id)", "version": "\(version?.version ?? "bundle")"]
                )
            }
        }
        return LaunchSession(
            token: token,
            packages: packages,
            trials: changes.trials,
            rolledBack: changes.rolledBack
        )
    }

    /// A launch without the store lock: the versions the store last committed, read without
    /// the lock (a guarded package's confirmed version, the bundle when it has none), with no
    /// trial and nothing written; reported and logged with the reason.
    private func deferredLaunch(
        token: String,
        because busy: HotUpdateError,
        at now: Date
    ) async throws
        -> LaunchSession
    {
        let store = updater.store
        let snapshot = try await store.loadUnlocked()
        var packages: [InstalledPackage] = []
        for record in snapshot.packages.values where record.state != .disabled {
            guard let version = record.confirmedVersion else { continue }
            let package = try store.installedPackage(record, version: version)
            guard FileSystem.isDirectory(package.directory), !store.treeIsOutsideStore(version) else { continue }
            packages.append(package)
        }
        packages.sort { ($0.installedAt, $0.id) > ($1.installedAt, $1.id) }
        let deferred = LaunchSession.Deferral(
            reason: "the launch ran the versions last committed, without trying new ones: \(busy.message)"
        )
        updater.logger.warning("\(deferred.reason)", metadata: ["root": "\(updater.layout.root.path)"])
        updater.report(
            TelemetryEvent(kind: .deferredLaunch, date: now, errorCode: HotUpdateError.Code.storeBusy.description)
        )
        return LaunchSession(token: token, packages: packages, trials: [:], rolledBack: [], deferred: deferred)
    }

    /// Reports, publishes and logs a trial rolled back and blocked.
    private func reportRollback(_ rolled: LaunchSession.RolledBackVersion, at now: Date) {
        updater.report(
            TelemetryEvent(
                kind: .rollback,
                date: now,
                packageID: rolled.id,
                version: rolled.version,
                restoredVersion: rolled.restoredVersion
            )
        )
        updater.report(
            TelemetryEvent(
                kind: .block,
                date: now,
                packageID: rolled.id,
                version: rolled.version,
                errorCode: HotUpdateError.Code.launchFailed.description
            )
        )
        updater.hub.publish(
            rolled.id,
            rolled.version,
            .blocked,
            HotUpdateError(.launchFailed, rolled.reason, packageID: rolled.id)
        )
        updater.logger.error(
            "rolled back a version whose launch never confirmed",
            metadata: [
                "package": "\(rolled.id)", "version": "\(rolled.version)",
                "restored": "\(rolled.restoredVersion ?? "bundle")",
            ]
        )
    }
}

extension LaunchSession {
    /// Why a launch ran without the store lock (``LaunchSession/deferred``).
    public struct Deferral: Sendable, Hashable, CustomStringConvertible {
        /// What happened, with the process that held the lock and for how long it was waited
        /// for; the code it stands for is ``HotUpdateError/Code/storeBusy``.
        public var reason: String

        /// Creates a value.
        public init(reason: String) { self.reason = reason }

        public var description: String { reason }
    }
}

extension LaunchSession {
    /// A version that a launch rolled back and blocked.
    public struct RolledBackVersion: Sendable, Hashable {
        /// The package id.
        public var id: String
        /// The version blocked.
        public var version: String
        /// The version active again; nil: the copy bundled with the app.
        public var restoredVersion: String?
        /// Why.
        public var reason: String

        /// Creates a value.
        public init(id: String, version: String, restoredVersion: String?, reason: String) {
            self.id = id
            self.version = version
            self.restoredVersion = restoredVersion
            self.reason = reason
        }
    }
}

extension LaunchSession {
    /// A version installed and waiting to take effect.
    public struct WaitingVersion: Sendable, Hashable {
        /// The package id.
        public var id: String
        /// The version waiting.
        public var version: String
        /// When it takes effect.
        public var timing: LaunchPolicy.Timing
    }
}
