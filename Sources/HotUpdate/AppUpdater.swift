import Foundation
import HotArchive
import HotAssets
import HotCore
import HotManifest
import HotStore
import HotTransport
import HotVerify

/// An app's updater built from the standard parts, in one line from a store root, the signed
/// manifest's URL and the release keys: what most apps need, and nothing to assemble.
///
/// ```swift
/// import HotUpdate
///
/// let hot = try AppUpdater(
///     root: StoreLocation.applicationSupport(subdirectory: "HotUpdate"),
///     manifest: manifestURL, releaseKeys: [releaseKeyPEM])
/// let report = try await hot.sync()
/// let resolver = try await hot.resolver(bundle: Bundle.main.resourceURL)
/// ```
///
/// The parts: `URLSessionTransport` (the system's HTTP stack on every platform),
/// `ZipUnarchiver`, `CryptoVerifier`, a `FileMetadataStore` under the root, `ZstdPatcher` for
/// deltas that carry binary patches, `NameIndexWriter` keeping the store's name index for
/// the resolvers, and a `SignedManifestSource` that trusts a manifest
/// signed by any one of `releaseKeys`. For other parts, build an `Updater` from an
/// `UpdaterConfiguration` and a source yourself; ``updater`` and ``source`` are the
/// ones this preset made, for everything it does not wrap (launch trials, status, repair).
public struct AppUpdater: Sendable {
    /// The engine.
    public let updater: Updater
    /// The signed manifest it follows.
    public let source: SignedManifestSource

    /// Builds the updater and its manifest source.
    ///
    /// - Parameters:
    ///   - root: The store root; see `StoreLocation.applicationSupport(subdirectory:)`.
    ///   - manifest: The signed manifest's URL.
    ///   - releaseKeys: The public keys a manifest may be signed with, PEM (Ed25519 or RSA).
    ///   - context: Who asks: the app's version, a stable installation ID and a channel,
    ///     which rollouts and targeting read.
    ///   - launch: Which packages launch under a trial.
    ///   - maxPackageBytes: The most bytes one package may download and unpack to.
    /// - Throws: `HotUpdateError.Code.signatureInvalid` for a key that cannot be read,
    ///   `HotUpdateError.Code.invalidArgument` when `releaseKeys` is empty.
    public init(
        root: URL,
        manifest: URL,
        releaseKeys: [String],
        context: ClientContext = ClientContext(),
        launch: LaunchPolicy = LaunchPolicy(),
        maxPackageBytes: Int64 = UpdaterConfiguration.defaultMaxPackageBytes
    ) throws {
        guard !releaseKeys.isEmpty else {
            throw HotUpdateError(.invalidArgument, "an app updater needs at least one release key")
        }
        let transport = URLSessionTransport()
        let verifier = CryptoVerifier()
        var configuration = UpdaterConfiguration(
            root: root,
            transport: transport,
            unarchiver: ZipUnarchiver(),
            verifier: verifier,
            store: FileMetadataStore(root: root),
            maxPackageBytes: maxPackageBytes,
            launch: launch
        )
        configuration.patcher = ZstdPatcher()
        configuration.commitHooks = [NameIndexWriter()]
        updater = Updater(configuration: configuration)
        source = SignedManifestSource(
            url: manifest,
            transport: transport,
            verifier: verifier,
            trust: .signed(by: try releaseKeys.map { try CryptoVerifier.publicKey(pem: $0) }),
            storeRoot: root,
            context: context
        )
    }

    /// Fetches the manifest, checks it, and installs what changed.
    ///
    /// - Throws: What `Updater.sync(from:)` throws: a refused manifest above all.
    @discardableResult
    public func sync() async throws -> SyncReport {
        try await updater.sync(from: source)
    }

    /// The assets of the installed packages, newest first, with `bundle` as the fallback.
    ///
    /// - Throws: Only the bundle's errors (a missing or unreadable bundle directory).
    public func resolver(bundle: URL?) async throws -> AssetResolverChain {
        try await AssetResolverChain.make(updater: updater, bundle: bundle)
    }
}
