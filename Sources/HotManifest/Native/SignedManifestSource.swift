import Foundation
import HotCore
import Logging

/// Reads a repository's signed manifest (``SignedEnvelope`` around a
/// ``SignedManifestBody``), checks it against what the client trusts, and applies the
/// publisher's policy for this client (``ReleasePolicy``).
///
/// Refused, each with a `HotUpdateError` and nothing installed or changed:
/// too few valid signatures by trusted keys, or none (`HotUpdateError.Code.signatureInvalid`);
/// a version lower than the highest trusted, or the same version with other content
/// (`HotUpdateError.Code.manifestRollback`); an expired manifest
/// (`HotUpdateError.Code.manifestExpired`); a body longer than ``maxBytes``
/// (`HotUpdateError.Code.byteLimitExceeded`, the transfer is cut there); a stalled or
/// trickling server (`HotUpdateError.Code.timedOut`, see ``timeouts``). What the client
/// trusts is kept in `trust.json` under the store root, so a restart forgets nothing.
///
/// ```swift
/// let source = SignedManifestSource(
///     url: URL(string: "https://cdn.example.com/app/channels/production/manifest.json")!,
///     transport: CurlTransport(), verifier: CryptoVerifier(),
///     trust: .signed(by: [PublicKey(scheme: .ed25519, pem: rootKeyPEM)]),
///     storeRoot: root,
///     context: ClientContext(appVersion: "5.3.1", clientID: installationID, channel: "production"))
/// let report = try await updater.sync(from: source)
/// ```
public struct SignedManifestSource: ManifestSource {
    /// Where the manifest is.
    public var url: URL
    /// How to fetch it.
    public var transport: any Transport
    /// Checks signatures and hashes.
    public var verifier: any Verifier
    /// Which keys the client trusts at first, and whether unsigned manifests are allowed.
    public var trust: ManifestTrust
    /// The store root, where `trust.json` is kept (the updater's root).
    public var storeRoot: URL
    /// Who this client is, for the per-package policy.
    public var context: ClientContext
    /// The largest manifest accepted; the transfer is cut there.
    public var maxBytes: Int64
    /// Time limits for fetching the manifest (stalled and trickling servers).
    public var timeouts: TransportRequest.Timeouts
    /// The current time, for expiry; injectable for tests.
    public var now: @Sendable () -> Date
    /// Where refusals of unsigned manifests and key rotations are logged.
    public var logger: Logger
    /// How long recording the trust state waits while another process holds the store lock
    /// (pass the updater's `UpdaterConfiguration.lockWait`).
    public var lockWait = StoreLockWait.standard

    /// Creates a source.
    ///
    /// - Parameters:
    ///   - url: The manifest's URL; package URLs resolve against it.
    ///   - transport: How to fetch it.
    ///   - verifier: Checks signatures (`CryptoVerifier`).
    ///   - trust: The app's root keys and threshold, or ``ManifestTrust/unsignedDevelopment(keys:threshold:despiteKeys:)``.
    ///   - storeRoot: The updater's root; `trust.json` is kept there.
    ///   - context: App version, client id and channel.
    ///   - maxBytes: The largest manifest accepted.
    ///   - timeouts: Time limits for the request.
    ///   - now: The clock.
    ///   - logger: Where to log.
    public init(
        url: URL,
        transport: any Transport,
        verifier: any Verifier,
        trust: ManifestTrust,
        storeRoot: URL,
        context: ClientContext = ClientContext(),
        maxBytes: Int64 = 1 << 20,
        timeouts: TransportRequest.Timeouts = TransportRequest.Timeouts(total: .seconds(120)),
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "HotUpdate")
    ) {
        self.url = url
        self.transport = transport
        self.verifier = verifier
        self.trust = trust
        self.storeRoot = storeRoot
        self.context = context
        self.maxBytes = maxBytes
        self.timeouts = timeouts
        self.now = now
        self.logger = logger
    }

    /// Fetches, authenticates and applies the policy.
    ///
    /// The request is conditional when a manifest from this URL was accepted before: it
    /// carries that answer's `ETag` (`If-None-Match`) and `Last-Modified`
    /// (`If-Modified-Since`), and a `304 Not Modified` answer costs no body. The bytes kept
    /// from that answer are then checked again in full (signatures, version, expiry): a 304
    /// never extends trust, and a server answering 304 for ever is refused once the kept
    /// manifest expires. Kept bytes refused for any other reason (damaged on disk) are let go
    /// and the manifest is fetched whole. A manifest accepted with new bytes or validators is
    /// kept, by the store, under the root; a check that changes nothing writes nothing.
    ///
    /// - Throws: `HotUpdateError` as listed on the type.
    public func fetchManifest() async throws -> Manifest {
        let source = self
        if let kept = KeptManifest.load(root: storeRoot, url: url, verifier: verifier) {
            let response = try await transport.fetch(
                TransportRequest(url: url, headers: kept.conditionalHeaders, timeouts: timeouts, maxBytes: maxBytes)
            )
            if response.statusCode == 304 {
                response.body.cancel()
                do {
                    // Off the cooperative pool: recording the trust state waits for the store lock.
                    return try await FileSystem.offload { try source.manifest(from: kept.bytes) }
                } catch let error as HotUpdateError where error.code == .manifestExpired {
                    throw error
                } catch {
                    logger.warning("the manifest kept for a 304 answer was refused; fetching it whole: \(error)")
                }
            } else {
                try response.requireSuccess()
                let data = try await response.collect(limit: maxBytes)
                return try await FileSystem.offload { try source.accept(data, headers: response.headers) }
            }
        }
        let response = try await transport.fetch(TransportRequest(url: url, timeouts: timeouts, maxBytes: maxBytes))
        try response.requireSuccess()
        let data = try await response.collect(limit: maxBytes)
        return try await FileSystem.offload { try source.accept(data, headers: response.headers) }
    }

    /// ``manifest(from:)``, then keeps the bytes and their validators for the next
    /// conditional request when they changed (see ``fetchManifest()``).
    private func accept(_ data: Data, headers: [String: String]) throws -> Manifest {
        let manifest = try manifest(from: data)
        do {
            let root = storeRoot
            try KeptManifest.keep(data, from: url, headers: headers, root: root, verifier: verifier, wait: lockWait)
        } catch {
            // The manifest was accepted: only the next check's saving is lost.
            logger.warning("cannot keep the manifest for conditional requests: \(error)")
        }
        return manifest
    }

    /// Authenticates served manifest bytes and applies the policy; records the new trust
    /// state when the manifest is accepted.
    ///
    /// - Throws: `HotUpdateError` as listed on the type.
    public func manifest(from data: Data) throws -> Manifest {
        let authenticator = ManifestAuthenticator(
            verifier: verifier,
            trust: trust,
            context: context,
            storeRoot: storeRoot,
            now: now,
            logger: logger,
            lockWait: lockWait
        )
        switch try authenticator.authenticate(data, from: url) {
        case .unsigned(let document):
            return try document.manifest(relativeTo: url)
        case .signed(let body):
            return try ReleasePolicy(context: context, verifier: verifier).manifest(
                for: body,
                relativeTo: url,
                logger: logger
            )
        }
    }
}
