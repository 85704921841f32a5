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
    /// A rollout step served with the manifest that the client refused: the sync applied the
    /// release manifest alone (``Manifest/refusedRollout``). Not a failure: the release keys'
    /// versions are installed, and the step's refusal is reported so that an operator sees it.
    public var refusedRollout: Manifest.Refusal?

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
        /// Bytes downloaded for this package, a refused delta's included.
        public var bytesDownloaded: Int64
        /// Whether the download waits for an unmetered network (see ``NetworkPolicy``): nothing
        /// was fetched, nothing failed, and a later sync on another network fetches it.
        public var isWaitingForNetwork = false
        /// What only some outcomes have, out of line: the report of a check that finds ten
        /// thousand packages unchanged holds ten thousand small values.
        private var details: Details?

        /// Why the package failed, if it did. The previous version, if any, stays active.
        public var error: HotUpdateError? {
            get { details?.error }
            set { details = Details.make(error: newValue, delta: delta, phases: phases) }
        }
        /// The delta the package was fetched as, or tried as before falling back; nil when
        /// the full package was fetched directly.
        public var delta: SyncReport.DeltaUse? {
            get { details?.delta }
            set { details = Details.make(error: error, delta: newValue, phases: phases) }
        }
        /// How long each phase of the install took, when the package was downloaded and
        /// installed by this sync (a flight another caller began included).
        package var phases: InstallPhases? {
            get { details?.phases }
            set { details = Details.make(error: error, delta: delta, phases: newValue) }
        }

        /// The fields few outcomes have, immutable (a change makes a new one).
        private final class Details: Sendable {
            let error: HotUpdateError?
            let delta: SyncReport.DeltaUse?
            let phases: InstallPhases?

            private init(error: HotUpdateError?, delta: SyncReport.DeltaUse?, phases: InstallPhases?) {
                self.error = error
                self.delta = delta
                self.phases = phases
            }

            /// The details, or nil when there are none.
            static func make(error: HotUpdateError?, delta: SyncReport.DeltaUse?, phases: InstallPhases?) -> Details? {
                error == nil && delta == nil && phases == nil
                    ? nil : Details(error: error, delta: delta, phases: phases)
            }
        }

        /// Equal when every field is.
        public static func == (lhs: PackageOutcome, rhs: PackageOutcome) -> Bool {
            lhs.id == rhs.id && lhs.change == rhs.change && lhs.activeVersion == rhs.activeVersion
                && lhs.bytesDownloaded == rhs.bytesDownloaded && lhs.isWaitingForNetwork == rhs.isWaitingForNetwork
                && lhs.error == rhs.error && lhs.delta == rhs.delta && lhs.phases == rhs.phases
        }

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
            self.bytesDownloaded = bytesDownloaded
            if error != nil || delta != nil { self.details = Details.make(error: error, delta: delta, phases: nil) }
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
