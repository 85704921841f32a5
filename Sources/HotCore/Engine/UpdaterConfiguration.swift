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
///     store: JSONMetadataStore(root: root))
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
    /// Limits for unpacking each package.
    public var extractOptions: ExtractOptions
    /// The largest package accepted when the manifest gives no size.
    public var maxPackageBytes: Int64
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
    /// ``Updater/beginLaunch()``). The default guards nothing: every version is active as
    /// soon as it is installed.
    public var launch: LaunchPolicy
    /// Where the engine reports checks, downloads, installs, confirmations, rollbacks and
    /// blocks (see ``TelemetryReporter``). Nil, the default: telemetry is off and nothing is
    /// sent anywhere.
    public var telemetry: (any TelemetryReporter)?
    /// The most bytes a package may declare it unpacks to (``PackageDescriptor/unpackedSize``);
    /// a package declaring more is refused before it is downloaded. A package that declares
    /// nothing is held to ``ExtractOptions/maxTotalBytes`` instead.
    public var maxUnpackedBytes: Int64 = UpdaterConfiguration.defaultMaxUnpackedBytes
    /// The default of ``maxUnpackedBytes``: 8 GiB. `hot pack` warns above it.
    public static let defaultMaxUnpackedBytes: Int64 = 8 << 30
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

    /// Creates a configuration.
    ///
    /// - Parameters:
    ///   - root: The store root directory; created if missing.
    ///   - transport: Fetches packages.
    ///   - unarchiver: Unpacks packages.
    ///   - verifier: Hashes packages.
    ///   - store: Records what is installed; usually a store at the same root.
    ///   - extractOptions: Limits for unpacking.
    ///   - maxPackageBytes: The largest package accepted when the manifest gives no size.
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
        maxPackageBytes: Int64 = 1 << 30,
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
        self.maxPackageBytes = maxPackageBytes
        self.timeouts = timeouts
        self.maxConcurrentPackages = max(1, maxConcurrentPackages)
        self.keepPreviousVersions = max(0, keepPreviousVersions)
        self.logger = logger
        self.launch = launch
        self.telemetry = telemetry
    }
}
