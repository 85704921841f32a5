import Foundation

/// Where a package stands. Persisted in the metadata store.
///
/// A struct with static members rather than an enum, so new states can be added
/// without breaking a `switch` in user code.
///
/// The life of a package: ``new`` (or ``updateAvailable`` when another version is
/// active) when a sync plans it, ``downloading`` and ``verifying`` while its one flight
/// runs, then ``installed`` or ``failed``. A launch check or a verify may move an installed
/// package to ``fileMissing`` or ``digestMismatch``; a repair brings it back to
/// ``installed``. ``downloading`` and ``verifying`` are published as events but never
/// committed: after a crash the store says ``new`` or ``updateAvailable``, which is true.
public struct PackageState: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The state's stable name, as stored.
    public let rawValue: String
    /// Creates a state from its stored name.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Listed by a manifest and not installed yet.
    public static let new = PackageState(rawValue: "new")
    /// Another version than the one offered is active; the offered one is not installed yet.
    public static let updateAvailable = PackageState(rawValue: "updateAvailable")
    /// The package's archive is being downloaded (published, never stored).
    public static let downloading = PackageState(rawValue: "downloading")
    /// The download is being checked against the manifest, unpacked and hashed file by
    /// file (published, never stored).
    public static let verifying = PackageState(rawValue: "verifying")

    /// Installed and active.
    public static let installed = PackageState(rawValue: "installed")
    /// The last update failed; the previously installed version, if any, stays active.
    public static let failed = PackageState(rawValue: "failed")
    /// Disabled by the server: installed files are kept but not resolved.
    public static let disabled = PackageState(rawValue: "disabled")
    /// A file of the active version is missing.
    public static let fileMissing = PackageState(rawValue: "fileMissing")
    /// A file of the active version does not match its recorded digest.
    public static let digestMismatch = PackageState(rawValue: "digestMismatch")
    /// The active version's directory, or one above or inside it under the store root, is
    /// not a real directory: a symbolic link (perhaps out of the store) or another kind of
    /// file. Nothing is read through it; a sync removes it and puts the tree back.
    public static let treeOutsideStore = PackageState(rawValue: "treeOutsideStore")

    /// Whether the state records damage a check found in the active version
    /// (``fileMissing``, ``digestMismatch``, ``treeOutsideStore``), which a sync heals.
    public var isDamage: Bool { self == .fileMissing || self == .digestMismatch || self == .treeOutsideStore }

    /// A version was tried by a launch that never confirmed it: it was rolled back and
    /// blocked (published, never stored: the record says what is active again).
    public static let blocked = PackageState(rawValue: "blocked")

    /// The package was deleted with every version (published, never stored: the record goes).
    public static let removed = PackageState(rawValue: "removed")

    /// An on-demand pack was evicted to keep within the storage budget: deleted with every
    /// version, downloaded again when asked for (published, never stored: the record goes).
    public static let evicted = PackageState(rawValue: "evicted")

    /// The download waits for an unmetered network (see ``NetworkPolicy``); a later sync
    /// fetches it (published, never stored: the record says what is true, new or update
    /// available).
    public static let waitingForNetwork = PackageState(rawValue: "waitingForNetwork")

    /// Whether the state is only published while work runs and never committed.
    public var isTransient: Bool { self == .downloading || self == .verifying }

    public var description: String { rawValue }
}

/// One installed version of a package.
public struct InstalledVersion: Codable, Sendable, Hashable {
    /// The version string from the manifest.
    public var version: String
    /// The installed directory, relative to the store root (`packages/<id>/<version>`).
    public var path: String
    /// The archive's size in bytes.
    public var archiveSize: Int64
    /// The archive's SHA-256 (hex), when known.
    public var sha256: String?
    /// The archive's MD5 (hex), when the source published one.
    public var md5: String?
    /// Where the archive came from.
    public var sourceURL: String
    /// When the version was installed.
    public var installedAt: Date
    /// When this version was chosen to be active, by the device's clock: when the install that
    /// put it in place was asked for, or when a rollback restored it. Information only: the
    /// clock can be wrong or set back, so no decision reads it (see ``chosenInGeneration``).
    /// Nil in stores written before it was kept.
    public var chosenAt: Date?
    /// Where this version was chosen in the store's own order of commits: the
    /// ``StoreSnapshot/generation`` of the commit that installed it or a rollback restored it.
    /// An install asked for on an earlier snapshot (by this process or another) was asked for
    /// before this version was chosen, and does not replace it
    /// (``HotUpdateError/Code/superseded``). The order is the store's, so a clock set back
    /// or forward changes nothing. Nil in stores written before it was kept: such a version
    /// is replaced by any install.
    public var chosenInGeneration: Int?
    /// Whether damage was ever found in a file this version shares through `objects/`: an
    /// object its tree links did not hash to its name, so every tree linking it was damaged
    /// at once. A restore of this version then hashes every file rather than comparing sizes,
    /// and so does a check of it while it is active. Nil when none was found, and in stores
    /// written before it was kept; a version downloaded again starts without it.
    public var damageSeen: Bool?

    /// Creates a record of an installed version.
    public init(
        version: String,
        path: String,
        archiveSize: Int64,
        sha256: String?,
        md5: String?,
        sourceURL: String,
        installedAt: Date,
        chosenAt: Date? = nil,
        chosenInGeneration: Int? = nil
    ) {
        self.chosenAt = chosenAt
        self.chosenInGeneration = chosenInGeneration
        self.version = version
        self.path = path
        self.archiveSize = archiveSize
        self.sha256 = sha256
        self.md5 = md5
        self.sourceURL = sourceURL
        self.installedAt = installedAt
    }
}

/// What the store knows of one package.
public struct PackageRecord: Codable, Sendable, Hashable {
    /// The package id.
    public var id: String
    /// Where the package stands.
    public var state: PackageState
    /// The version resolved from, if any.
    public var active: InstalledVersion?
    /// Older versions kept for rollback, newest first.
    public var previous: [InstalledVersion]
    /// Why the last update failed, when ``state`` is ``PackageState/failed``.
    public var lastError: String?
    /// The ``HotUpdateError/Code`` of ``lastError`` (its description, such as
    /// `"activationFailed"`), so a failed activation of the active version can be told from
    /// a failed download of a newer one. Nil in stores written before it was recorded.
    public var lastErrorCode: String?
    /// A version installed and waiting to take effect: it becomes active at the next
    /// ``UpdaterLaunch/begin()`` (or resume), per the package's ``LaunchPolicy/Timing``.
    /// Nil when nothing waits, and in stores written before it was kept.
    public var pending: InstalledVersion?
    /// Where the active version of a guarded package stands in its launch trial (see
    /// ``LaunchPolicy``); nil for a package that is not guarded or whose active version
    /// never needed a trial.
    public var launch: PackageRecord.LaunchTrial?
    /// Versions a failed launch blocked: no sync downloads or restores them again (see
    /// ``PackageRecord/BlockedVersion``). Nil when none.
    public var blocked: [PackageRecord.BlockedVersion]?
    /// When the app last asked for the package (``Updater/install(id:)``), by the device's
    /// clock, written at most once per ``UpdaterConfiguration/usageRecordingInterval``: what
    /// the on-demand storage budget evicts by, least recently used first. Nil when never
    /// recorded: the active version's install time stands in.
    public var lastUsedAt: Date?

    /// Creates a record.
    public init(
        id: String,
        state: PackageState,
        active: InstalledVersion?,
        previous: [InstalledVersion] = [],
        lastError: String? = nil,
        lastErrorCode: String? = nil
    ) {
        self.id = id
        self.state = state
        self.active = active
        self.previous = previous
        self.lastError = lastError
        self.lastErrorCode = lastErrorCode
    }

    /// Whether the record's failure is the activation hook refusing the active version: a
    /// sync that leaves that version unchanged does not clear it, only a later successful
    /// activation (or another version) does.
    public var activationFailed: Bool {
        state == .failed && lastErrorCode == HotUpdateError.Code.activationFailed.description
    }

    /// Every version whose tree the record refers to: the active one, the one waiting to take
    /// effect, the previous ones and the launch trial's fallback, each once.
    public var keptVersions: [InstalledVersion] {
        var seen: Set<String> = []
        return ([active, pending].compactMap { $0 } + previous + [launch?.fallback].compactMap { $0 }).filter {
            seen.insert($0.path).inserted
        }
    }
}

/// Everything the metadata store holds, read and written as one value.
///
/// All paths are relative to the store root: an app's container moves between launches.
public struct StoreSnapshot: Codable, Sendable, Hashable {
    /// The schema this code writes.
    public static let currentSchema = 1

    /// The schema the snapshot was written with.
    public var schema: Int
    /// Increases by one with every commit.
    public var generation: Int
    /// The packages, by id.
    public var packages: [String: PackageRecord]
    /// The package ids in the order of the last manifest applied: the order script patches
    /// are activated in at launch. Nil until a manifest was applied.
    public var manifestOrder: [String]?
    /// Versions no record keeps any more whose trees a live launch still runs from, by
    /// package id: deleted by the first change after the last such launch ended. Nil when
    /// there are none.
    public var retained: [String: [InstalledVersion]]?
    /// The SHA-256 (hex) of the catalog of offered packages (`catalog.json`) as the store
    /// wrote it from a trusted manifest, recorded in the same commit: a catalog whose bytes
    /// do not match is refused (``HotUpdateError/Code/catalogUntrusted``). Nil until a
    /// manifest was applied.
    public var catalogSHA256: String?

    /// Creates a snapshot; the default is an empty store.
    public init(
        schema: Int = StoreSnapshot.currentSchema,
        generation: Int = 0,
        packages: [String: PackageRecord] = [:]
    ) {
        self.schema = schema
        self.generation = generation
        self.packages = packages
    }

    /// An empty store.
    public static let empty = StoreSnapshot()

    /// Every version whose tree the store keeps, by package id: those its records keep
    /// (``PackageRecord/keptVersions``) and those ``retained`` for a live launch, each once.
    public var keptVersions: [String: [InstalledVersion]] {
        var kept = packages.mapValues(\.keptVersions)
        for (id, versions) in retained ?? [:] {
            let paths = Set(kept[id, default: []].map(\.path))
            kept[id, default: []] += versions.filter { !paths.contains($0.path) }
        }
        return kept
    }

    /// The relative paths of every tree the store keeps.
    public var keptPaths: Set<String> { Set(keptVersions.values.joined().map(\.path)) }
}
