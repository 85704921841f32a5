/// What a sync did.
public struct SyncReport: Sendable, Equatable {
    /// The manifest's version, if it has one.
    public var manifestVersion: Int?
    /// One outcome per planned package.
    public var packages: [SyncReport.PackageOutcome]
    /// How long fetching and checking the manifest took (its signatures, its trust state),
    /// when the sync fetched it (``Updater/sync(from:)``).
    public var manifestSeconds: Double?
    /// Whether the manifest was the one the last sync left nothing to do for, and nothing had
    /// happened to the store since (see ``RevisionedManifestSource``): nothing was planned,
    /// downloaded or written, and ``packages`` lists each package as that sync left it
    /// (``UpdatePlan/Change/unchanged``, or not requested, or blocked).
    public var isUnchanged = false

    /// Creates a report.
    public init(manifestVersion: Int?, packages: [SyncReport.PackageOutcome]) {
        self.manifestVersion = manifestVersion
        self.packages = packages
    }

    /// The packages that failed.
    public var failures: [SyncReport.PackageOutcome] { packages.filter { !$0.succeeded } }
    /// Bytes downloaded in all.
    public var bytesDownloaded: Int64 { packages.reduce(0) { $0 + $1.bytesDownloaded } }
    /// Whether anything was installed, updated or removed.
    public var changedAnything: Bool {
        packages.contains {
            $0.change != .unchanged && $0.change != .notRequested && $0.succeeded && !$0.isWaitingForNetwork
        }
    }

    /// The packages left to a later sync because the network is metered or constrained and
    /// they are larger than the policy lets through (see ``NetworkPolicy``). Not failures.
    public var waiting: [SyncReport.PackageOutcome] { packages.filter(\.isWaitingForNetwork) }

    /// The packages whose delta was refused and that fell back to the full package.
    public var deltaFallbacks: [SyncReport.PackageOutcome] { packages.filter { $0.deltaFallback != nil } }

    /// Throws the first package failure, if any.
    public func throwIfFailed() throws {
        if let failure = failures.first, let error = failure.error { throw error }
    }
}

extension SyncReport {
    /// What happened to one package during a sync.
    public struct PackageOutcome: Sendable, Equatable {
        /// The package id.
        public var id: String
        /// What the plan said.
        public var change: UpdatePlan.Change
        /// The version active after the sync, if any.
        public var activeVersion: String?
        /// Why the package failed, if it did. The previous version, if any, stays active.
        public var error: HotUpdateError?
        /// Bytes downloaded for this package, a refused delta's included.
        public var bytesDownloaded: Int64
        /// The delta the package was fetched as, or tried as before falling back; nil when
        /// the full package was fetched directly.
        public var delta: SyncReport.DeltaUse?
        /// How long each phase of the install took, when the package was downloaded and
        /// installed by this sync (a flight another caller began included).
        package var phases: InstallPhases?
        /// Whether the download waits for an unmetered network (see ``NetworkPolicy``): nothing
        /// was fetched, nothing failed, and a later sync on another network fetches it.
        public var isWaitingForNetwork = false

        /// Creates an outcome.
        public init(
            id: String,
            change: UpdatePlan.Change,
            activeVersion: String?,
            error: HotUpdateError? = nil,
            bytesDownloaded: Int64 = 0,
            delta: SyncReport.DeltaUse? = nil
        ) {
            self.id = id
            self.change = change
            self.activeVersion = activeVersion
            self.error = error
            self.bytesDownloaded = bytesDownloaded
            self.delta = delta
        }

        /// The outcome of a planned change: `entry`'s id and change, the version active after it.
        package init(_ entry: UpdatePlan.PackagePlan, active: String?, error: HotUpdateError? = nil) {
            self.init(id: entry.id, change: entry.change, activeVersion: active, error: error)
        }

        /// Why a delta was refused before the full package was installed; nil when no delta
        /// was tried or it installed.
        public var deltaFallback: HotUpdateError? { delta?.fallback }

        /// Whether the package ended as planned.
        public var succeeded: Bool { error == nil }
    }
}

extension SyncReport {
    /// A delta a package was fetched as (see `PackageDescriptor.Delta`).
    public struct DeltaUse: Sendable, Equatable {
        /// The installed version the delta applied to.
        public var baseVersion: String
        /// The delta's bytes downloaded.
        public var bytes: Int64
        /// Why the delta was refused, when it was: the full package was installed instead.
        public var fallback: HotUpdateError?

        /// Creates a value.
        public init(baseVersion: String, bytes: Int64, fallback: HotUpdateError? = nil) {
            self.baseVersion = baseVersion
            self.bytes = bytes
            self.fallback = fallback
        }
    }
}
