import Foundation
import Logging

/// Everything an ``Updater`` is built from: the parts it uses and its policies.
///
/// A `Sendable` value passed per updater, in the manner of Nuke's pipeline
/// configuration: no process-wide state, so two updaters with different roots or
/// parts coexist.
///
/// ```swift
/// // Application Support, excluded from backup; never Caches (see ``StoreLocation``).
/// let root = try StoreLocation.applicationSupport(subdirectory: "HotUpdate")
/// let configuration = UpdaterConfiguration(
///     root: root,
///     transport: CurlTransport(),
///     unarchiver: ZipUnarchiver(),
///     verifier: CryptoVerifier(),
///     store: FileMetadataStore(root: root))
/// let updater = Updater(configuration: configuration)
/// ```
public struct UpdaterConfiguration: Sendable {
    /// The store root: metadata, installed packages and staging live under it.
    public var root: URL
    /// Fetches packages.
    public var transport: any Transport
    /// Unpacks packages.
    public var unarchiver: any Unarchiver
    /// Hashes packages (and checks signatures).
    public var verifier: any Verifier
    /// Records what is installed.
    public var store: any MetadataStore
    /// How packages are unpacked: entry counts, name lengths, compression ratios, symbolic
    /// links. Its byte total is not read: the updater sets it per package from
    /// ``maxPackageBytes`` (or the size the manifest signs).
    public var extractOptions: ExtractOptions
    /// The one byte limit: the most bytes one package may take, as downloaded and as
    /// unpacked.
    ///
    /// A package whose manifest declares a larger archive (``PackageDescriptor/size``) or a
    /// larger unpacked size (``PackageDescriptor/unpackedSize``) is refused before a byte is
    /// downloaded. One that declares no archive size is cut off past this many bytes; one
    /// that declares no unpacked size may unpack to this many bytes, and one that does, to
    /// exactly its figure (a figure below the truth is a bomb's signature and is refused
    /// while unpacking). The default is ``defaultMaxPackageBytes``.
    public var maxPackageBytes: Int64
    /// The default of ``maxPackageBytes``: 4 GiB. `hot pack` warns above it.
    public static let defaultMaxPackageBytes: Int64 = 4 << 30
    /// Time limits for package downloads.
    public var timeouts: TransportRequest.Timeouts
    /// How many packages are downloaded and unpacked at once, across every caller of the
    /// updater (``Updater/sync(from:)`` and ``Updater/install(_:)`` alike).
    public var maxConcurrentPackages: Int
    /// How many older versions of each package are kept for rollback; installs and
    /// ``Updater/collectGarbage()`` delete older ones and free the objects only they used.
    public var keepPreviousVersions: Int
    /// Where the updater logs. Nothing is bootstrapped: pass your own logger.
    public var logger: Logger
    /// Which packages launch under a trial, and when new versions take effect (see
    /// ``UpdaterLaunch/begin()``). The default guards nothing: every version is active as
    /// soon as it is installed.
    public var launch: LaunchPolicy
    /// Where the engine reports checks, downloads, installs, confirmations, rollbacks and
    /// blocks (see ``TelemetryReporter``). Nil, the default: telemetry is off and nothing is
    /// sent anywhere.
    public var telemetry: (any TelemetryReporter)?
    /// Whether and how long cut downloads are kept under `partial/` to be resumed.
    public var partialDownloads = UpdaterConfiguration.PartialDownloadPolicy()
    /// Whether a package whose manifest lists a delta from the active version is fetched as
    /// that delta when it is smaller (the full package stays the fallback). On by default.
    public var usesDeltas = true
    /// Applies the binary patches a delta may hold (HotArchive's `ZstdPatcher`); without
    /// one, a delta holding patches is refused and the full package installed.
    public var patcher: (any BinaryPatcher)?
    /// What every commit writes besides the snapshot, before the store file (see
    /// ``StoreCommitHook``). None by default; HotAssets' `NameIndexWriter` keeps the name
    /// index the resolvers made from an updater map (`AppUpdater` registers it).
    public var commitHooks: [any StoreCommitHook] = []
    /// How long a change waits while another process holds the store lock, and whom a long
    /// wait is told to (see ``StoreLockWait``): by default the holder is logged after 1 s and a
    /// change gives up with ``HotUpdateError/Code/storeBusy`` after 30 s; reads never wait
    /// more than half a second.
    public var lockWait = StoreLockWait.standard
    /// How often a sync also checks every file of every current package (presence and size,
    /// a stat per file) and heals what is missing: at most once per this interval, after the
    /// sync's own work, never during a launch. A day by default; nil never, 0 every sync.
    /// A sync always checks each package's tree (one stat per package), and the packages a
    /// resolver found missing a file.
    public var quickCheckInterval: TimeInterval? = 86_400
    /// Which downloads wait for an unmetered network (see ``NetworkPolicy``);
    /// ``NetworkPolicy/standard`` by default.
    public var network = NetworkPolicy.standard
    /// The network the updater assumes until the app says otherwise
    /// (``Updater/setNetworkConditions(_:)``): unmetered by default.
    public var initialNetwork = NetworkConditions.unmetered
    /// The storage budget of on-demand packs, applied after every sync (see
    /// ``OnDemandBudget`` and ``Updater/evictOnDemandPacks(budget:)``); nil, the default,
    /// evicts nothing unless asked.
    public var onDemandBudget: OnDemandBudget?
    /// How seldom a pack's last use is written to the store: ``Updater/install(id:)`` records
    /// a use at most once per package per this interval (an hour by default), so asking for a
    /// pack each time a screen opens costs no write.
    public var usageRecordingInterval: TimeInterval = 3_600

    /// Creates a configuration.
    ///
    /// - Parameters:
    ///   - root: The store root directory; created if missing.
    ///   - transport: Fetches packages.
    ///   - unarchiver: Unpacks packages.
    ///   - verifier: Hashes packages.
    ///   - store: Records what is installed; usually a store at the same root.
    ///   - extractOptions: How packages are unpacked (its byte total comes from `maxPackageBytes`).
    ///   - maxPackageBytes: The most bytes one package may take, downloaded and unpacked.
    ///   - timeouts: Time limits for package downloads.
    ///   - maxConcurrentPackages: How many packages are processed at once (at least 1).
    ///   - keepPreviousVersions: How many older versions are kept for rollback.
    ///   - logger: Where to log.
    ///   - launch: Which packages launch under a trial, and when new versions take effect.
    ///   - telemetry: Where the engine reports what it does; nil (the default) is off.
    public init(
        root: URL,
        transport: any Transport,
        unarchiver: any Unarchiver,
        verifier: any Verifier,
        store: any MetadataStore,
        extractOptions: ExtractOptions = ExtractOptions(),
        maxPackageBytes: Int64 = UpdaterConfiguration.defaultMaxPackageBytes,
        timeouts: TransportRequest.Timeouts = TransportRequest.Timeouts(),
        maxConcurrentPackages: Int = 2,
        keepPreviousVersions: Int = 1,
        logger: Logger = Logger(label: "HotUpdate"),
        launch: LaunchPolicy = LaunchPolicy(),
        telemetry: (any TelemetryReporter)? = nil
    ) {
        self.root = root
        self.transport = transport
        self.unarchiver = unarchiver
        self.verifier = verifier
        self.store = store
        self.extractOptions = extractOptions
        self.maxPackageBytes = max(0, maxPackageBytes)
        self.timeouts = timeouts
        self.maxConcurrentPackages = max(1, maxConcurrentPackages)
        self.keepPreviousVersions = max(0, keepPreviousVersions)
        self.logger = logger
        self.launch = launch
        self.telemetry = telemetry
    }
}
