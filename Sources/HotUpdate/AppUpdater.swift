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
/// The parts are `UpdaterConfiguration.standard(root:transport:store:maxPackageBytes:launch:logger:)`'s,
/// and a `SignedManifestSource` that trusts a manifest signed by any one of `releaseKeys`. To
/// change a part or a policy, start from that configuration and pass it to
/// ``init(configuration:manifest:trust:context:)``; for a source of your own (an older
/// server's format), ``init(configuration:source:)``. ``updater`` and ``source`` are the ones
/// this preset made, for everything it does not wrap (launch trials, status, repair).
public struct AppUpdater: Sendable {
    /// The engine.
    public let updater: Updater
    /// The manifest source it follows: a `SignedManifestSource` unless another was given.
    public let source: any ManifestSource

    /// Builds the updater and its manifest source from the standard parts.
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
        self.init(
            configuration: .standard(root: root, maxPackageBytes: maxPackageBytes, launch: launch),
            manifest: manifest,
            trust: .signed(by: try releaseKeys.map { try CryptoVerifier.publicKey(pem: $0) }),
            context: context
        )
    }

    /// Builds the updater from `configuration`, following the signed manifest at `manifest`
    /// with the configuration's transport, verifier, root and logger.
    ///
    /// - Parameters:
    ///   - configuration: The parts and policies; usually
    ///     `UpdaterConfiguration.standard(root:transport:store:maxPackageBytes:launch:logger:)`.
    ///   - manifest: The manifest's URL.
    ///   - trust: The keys a manifest must be signed with (`ManifestTrust.signed(by:)`), or a
    ///     development repository's `ManifestTrust.unsignedDevelopment(keys:)`.
    ///   - context: Who asks, for rollouts and targeting.
    public init(
        configuration: UpdaterConfiguration,
        manifest: URL,
        trust: ManifestTrust,
        context: ClientContext = ClientContext()
    ) {
        self.init(
            configuration: configuration,
            source: SignedManifestSource(
                url: manifest,
                transport: configuration.transport,
                verifier: configuration.verifier,
                trust: trust,
                storeRoot: configuration.root,
                context: context,
                logger: configuration.logger
            )
        )
    }

    /// Builds the updater from `configuration`, following `source`: an older server's format
    /// (`PatchInfoManifestSource`, say) or a source of your own.
    ///
    /// - Parameters:
    ///   - configuration: The parts and policies.
    ///   - source: Where the current manifest comes from.
    public init(configuration: UpdaterConfiguration, source: any ManifestSource) {
        updater = Updater(configuration: configuration)
        self.source = source
    }

    /// Fetches the manifest, checks it, and installs what changed.
    ///
    /// - Throws: What `Updater.sync(from:)` throws: a refused manifest above all.
    @discardableResult
    public func sync() async throws -> SyncReport {
        try await updater.sync(from: source)
    }

    /// When to check, remembered across launches under this updater's root: a
    /// `CheckSchedule` whose record (`check-schedule.json`) the store writes, so nothing under
    /// the root is written by anyone else.
    ///
    /// ```swift
    /// let schedule = hot.schedule()
    /// try await schedule.run(.launch) { _ = try await hot.sync() }
    /// ```
    ///
    /// - Parameter policy: When to check: at launch, on foreground, periodically.
    public func schedule(policy: CheckSchedule.Policy = CheckSchedule.Policy()) -> CheckSchedule {
        CheckSchedule(policy: policy, root: updater.configuration.root)
    }

    /// The assets of the installed packages, newest first, with `bundle` as the fallback.
    ///
    /// - Parameters:
    ///   - bundle: The app's bundled copies; nil for none.
    ///   - scales: The screen scales to look for, best first.
    /// - Throws: Only the bundle's errors (a missing or unreadable bundle directory).
    public func resolver(bundle: URL?, scales: ScalePreference = .standard) async throws -> AssetResolverChain {
        try await AssetResolverChain.make(updater: updater, bundle: bundle, scales: scales)
    }
}
