import ArgumentParser
import Foundation
import HotCore
import HotManifest
import HotVerify

/// How `hot sync` and `hot install` fetch and check a native manifest: the trusted keys, the
/// development escape hatches, who asks (client id, channel), and the request's limits. One
/// declaration, so that the two commands accept the same manifests the same way.
struct ManifestOptions: ParsableArguments {
    @Option(help: "A trusted public key (PEM) for a native manifest (repeatable).")
    var trust: [String] = []

    @Option(help: "How many of the --trust keys must sign the first manifest.")
    var threshold = 1

    @Flag(
        help:
            "Accept unsigned native manifests (development repositories only; warns on every sync). With --trust, unsigned manifests are still refused."
    )
    var allowUnsigned = false

    @Flag(help: "With --allow-unsigned and --trust: accept unsigned manifests although keys were given.")
    var allowUnsignedDespiteTrust = false

    @Option(help: "The client id the staged-rollout bucket is derived from (clients with the same id share a bucket).")
    var clientID = ""

    @Option(help: "The channel followed; must match the manifest's channel.")
    var channel: String?

    @Option(help: "Seconds a transfer may stay below 1 byte/s before it is abandoned.")
    var lowSpeedTime: Int = 30

    @Option(help: "Seconds the manifest request may take in all.")
    var timeout: Int = 120

    func validate() throws {
        if allowUnsignedDespiteTrust, !allowUnsigned || trust.isEmpty {
            throw ValidationError("--allow-unsigned-despite-trust goes with --allow-unsigned and --trust")
        }
        guard lowSpeedTime > 0, timeout > 0 else {
            throw ValidationError("--low-speed-time and --timeout must be positive")
        }
    }

    /// The manifest request's limits: the low-speed window and the whole request's time.
    var manifestTimeouts: TransportRequest.Timeouts {
        TransportRequest.Timeouts(lowSpeedWindow: .seconds(lowSpeedTime), total: .seconds(timeout))
    }

    /// A package download's limits: the low-speed window alone, since a large package on a
    /// slow link may rightly take long.
    var downloadTimeouts: TransportRequest.Timeouts {
        TransportRequest.Timeouts(lowSpeedWindow: .seconds(lowSpeedTime))
    }

    /// The source of the signed native manifest at `url`, checked against these options'
    /// trust, for the store at `store`'s root.
    ///
    /// - Throws: When a `--trust` key cannot be read.
    func signedSource(
        url: URL,
        transport: any Transport,
        store: StoreOptions,
        appVersion: String?
    ) throws -> SignedManifestSource {
        let keys = try readPublicKeys(trust)
        var source = SignedManifestSource(
            url: url,
            transport: transport,
            verifier: CryptoVerifier(),
            trust: allowUnsigned
                ? .unsignedDevelopment(keys: keys, threshold: threshold, despiteKeys: allowUnsignedDespiteTrust)
                : .signed(by: keys, threshold: threshold),
            storeRoot: store.rootURL,
            context: ClientContext(appVersion: appVersion, clientID: clientID, channel: channel),
            timeouts: manifestTimeouts,
            logger: store.makeLogger(warnings: true)
        )
        source.lockWait = store.lockWait
        return source
    }
}
