import Foundation
import HotArchive
import HotAssets
import HotCore
import HotManifest
import HotStore
import HotTransport
import HotVerify
import Logging

extension UpdaterConfiguration {
    /// The standard parts under one store root: the one preset that ``AppUpdater``, the `hot`
    /// tool and the examples build from.
    ///
    /// ```swift
    /// import HotUpdate
    ///
    /// var configuration = UpdaterConfiguration.standard(
    ///     root: try StoreLocation.applicationSupport(subdirectory: "HotUpdate"))
    /// configuration.keepPreviousVersions = 2
    /// let updater = Updater(configuration: configuration)
    /// ```
    ///
    /// The parts: `transport` (`URLSessionTransport` unless given), `ZipUnarchiver`,
    /// `CryptoVerifier`, `store` (a `FileMetadataStore` under `root` unless given), `ZstdPatcher`
    /// for deltas that carry binary patches, and `NameIndexWriter`, which keeps the store's
    /// name index for the resolvers. Every other field keeps its default; change any of them,
    /// or a part, on the value returned.
    ///
    /// - Parameters:
    ///   - root: The store root (see `StoreLocation.applicationSupport(subdirectory:)`); the
    ///     only place it is named.
    ///   - transport: Fetches manifests and packages; `URLSessionTransport` by default.
    ///   - store: Records what is installed; a `FileMetadataStore` (`store.json`) under `root`
    ///     by default.
    ///   - maxPackageBytes: The most bytes one package may download and unpack to.
    ///   - launch: Which packages launch under a trial.
    ///   - logger: Where the parts log.
    /// - Returns: A configuration for `Updater(configuration:)` or
    ///   ``AppUpdater/init(configuration:manifest:trust:context:)``.
    public static func standard(
        root: URL,
        transport: any Transport = URLSessionTransport(),
        store: (any MetadataStore)? = nil,
        maxPackageBytes: Int64 = UpdaterConfiguration.defaultMaxPackageBytes,
        launch: LaunchPolicy = LaunchPolicy(),
        logger: Logger = Logger(label: "HotUpdate")
    ) -> UpdaterConfiguration {
        var configuration = UpdaterConfiguration(
            root: root,
            transport: transport,
            unarchiver: ZipUnarchiver(),
            verifier: CryptoVerifier(),
            store: store ?? FileMetadataStore(root: root),
            maxPackageBytes: maxPackageBytes,
            logger: logger,
            launch: launch
        )
        configuration.patcher = ZstdPatcher()
        configuration.commitHooks = [NameIndexWriter()]
        return configuration
    }
}
