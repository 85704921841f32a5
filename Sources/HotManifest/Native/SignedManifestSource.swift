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
/// trickling server (`HotUpdateError.Code.timedOut`, see ``timeouts``); and, for the channel's
/// timestamp (``TimestampPart``): one signed by keys the release did not delegate
/// (`HotUpdateError.Code.timestampUnauthorized`), naming other bytes than those served
/// (`HotUpdateError.Code.timestampMismatch`), naming a version below the one trusted
/// (`HotUpdateError.Code.timestampRollback`), beyond its role's bounds
/// (`HotUpdateError.Code.timestampRoleExceeded`), expired, a 304 answer included
/// (`HotUpdateError.Code.timestampExpired`), or missing where the manifest declares a
/// timestamp role (`HotUpdateError.Code.timestampMissing`). What the client trusts is kept in
/// `trust.json` under the store root, so a restart forgets nothing.
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
public struct SignedManifestSource: RevisionedManifestSource {
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
    /// Where the channel's timestamp is looked for: `timestamp.json` beside the manifest by
    /// default. ``TimestampLocation/none`` saves the request against a server that never
    /// serves one.
    public var timestamp = TimestampLocation.besideManifest

    /// Where a ``SignedManifestSource`` looks for the channel's timestamp (``TimestampPart``).
    public enum TimestampLocation: Sendable, Hashable {
        /// `timestamp.json` in the manifest's directory.
        case besideManifest
        /// At this URL.
        case at(URL)
        /// Nowhere: the manifest is fetched alone (a manifest declaring a timestamp role is
        /// then refused).
        case none

        /// The timestamp's URL for the manifest at `manifest`, or nil for ``none``.
        public func url(besideManifest manifest: URL) -> URL? {
            switch self {
            case .besideManifest: manifest.deletingLastPathComponent().appendingPathComponent(TimestampPart.fileName)
            case .at(let url): url
            case .none: nil
            }
        }
    }

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
    /// The channel's timestamp comes first (``TimestampPart``, at ``timestamp``), asked for
    /// conditionally. When it names the manifest this client already holds (by SHA-256 and
    /// length), no manifest is requested; otherwise the manifest is downloaded, cut at the
    /// length the timestamp names, and must be exactly the bytes it names. A timestamp naming
    /// a version below the one this client trusts is refused before anything else is
    /// downloaded. The timestamp is then checked against the release manifest it names, and
    /// both must be unexpired. Where the server has no timestamp (404 or 410), the manifest
    /// is fetched alone, unless the manifest declares a timestamp role.
    ///
    /// Without a timestamp, the request for the manifest is conditional when a manifest from
    /// this URL was accepted before: it carries that answer's `ETag` (`If-None-Match`) and
    /// `Last-Modified` (`If-Modified-Since`), and a `304 Not Modified` answer costs no body.
    ///
    /// Kept bytes, the manifest's and the timestamp's, are checked again in full each time
    /// (signatures, version, expiry): a 304 never extends trust, and a server answering 304
    /// for ever is refused once the kept document expires. Kept bytes refused for any other
    /// reason (damaged on disk) are let go and the document is fetched whole. What was
    /// accepted with new bytes or validators is kept, by the store, under the root; a check
    /// that changes nothing writes nothing.
    ///
    /// - Throws: `HotUpdateError` as listed on the type.
    public func fetchManifest() async throws -> Manifest {
        guard let timestampURL = timestamp.url(besideManifest: url),
            let served = try await fetchTimestamp(from: timestampURL)
        else { return try await fetchManifestAlone() }
        return try await fetchNamedManifest(served.timestamp, from: timestampURL, keeping: served.writes)
    }

    /// The manifest, or nil when the channel's timestamp names the manifest of `revision`,
    /// which this client trusts: then nothing but the timestamp is requested or read, and its
    /// signatures, bounds and expiry, and the manifest's expiry, are checked as a full fetch
    /// checks them. Without a timestamp, or when it names another manifest, as
    /// ``fetchManifest()``.
    ///
    /// - Throws: `HotUpdateError` as listed on the type.
    public func fetchManifest(unlessRevision revision: String) async throws -> Manifest? {
        guard let timestampURL = timestamp.url(besideManifest: url),
            let served = try await fetchTimestamp(from: timestampURL)
        else { return try await fetchManifestAlone() }
        let authenticator = self.authenticator
        let manifestURL = url
        let unchanged = try await FileSystem.offload {
            try authenticator.namesTrusted(served.timestamp, from: timestampURL, manifestURL: manifestURL)
                && authenticator.revision(servedSHA256: served.timestamp.part.manifest.sha256) == revision
        }
        guard !unchanged else {
            keep(served.writes)
            return nil
        }
        return try await fetchNamedManifest(served.timestamp, from: timestampURL, keeping: served.writes)
    }

    /// The manifest the timestamp names: the kept bytes when they are the ones named, the
    /// download otherwise; then authenticated with the timestamp, and both kept.
    private func fetchNamedManifest(
        _ served: ServedTimestamp,
        from timestampURL: URL,
        keeping timestampWrites: [(StoreStateFile, Data)]
    ) async throws -> Manifest {
        let source = self
        let named = served.part.manifest
        if let trusted = authenticator.trustedVersion(), named.version < trusted {
            throw HotUpdateError(
                .timestampRollback,
                "the timestamp names manifest version \(named.version), lower than version \(trusted) this client trusts: an older timestamp, replayed",
                subject: timestampURL.absoluteString
            )
        }
        var writes: [(StoreStateFile, Data)] = []
        let bytes: Data
        let location =
            try named.path.map { path -> URL in
                guard let resolved = URL(string: path, relativeTo: timestampURL)?.absoluteURL else {
                    throw HotUpdateError(
                        .manifestInvalid,
                        "the timestamp's manifest path '\(path)' is not a URL path"
                    )
                }
                return resolved
            } ?? url
        // The kept bytes' SHA-256 was checked against their record as they were loaded.
        if let kept = KeptDocument.load(.manifest, root: storeRoot, url: url, verifier: verifier),
            kept.validators.sha256 == named.sha256, Int64(kept.bytes.count) == named.length
        {
            bytes = kept.bytes
        } else {
            guard named.length <= maxBytes else {
                throw HotUpdateError(
                    .byteLimitExceeded,
                    "the timestamp names a manifest of \(named.length) bytes, more than the \(maxBytes) allowed",
                    subject: timestampURL.absoluteString
                )
            }
            let (data, headers) = try await fetchNamed(
                location,
                length: named.length,
                longer: HotUpdateError(
                    .timestampMismatch,
                    "the manifest served is longer than the \(named.length) bytes the timestamp names",
                    subject: location.absoluteString
                )
            )
            guard try served.part.names(data, verifier: verifier) else {
                throw HotUpdateError(
                    .timestampMismatch,
                    "the manifest served (\(data.count) bytes, SHA-256 \(try verifier.digest(of: data, using: .sha256).hex.prefix(12))…) is not the one the timestamp names (\(named.length) bytes, SHA-256 \(named.sha256.prefix(12))…)",
                    subject: location.absoluteString
                )
            }
            bytes = data
            writes = try KeptDocument.writes(
                .manifest,
                bytes: data,
                from: url,
                headers: headers,
                evenWithoutValidators: true,
                root: storeRoot,
                verifier: verifier
            )
        }
        let shards = try await fetchShards(of: bytes, at: location)
        let manifest = try await FileSystem.offload {
            try source.manifest(from: bytes, timestamp: (served, timestampURL), shards: shards?.bytes)
        }
        keep(writes + timestampWrites + (shards?.writes ?? []))
        return manifest
    }

    /// The shards of `data` when it is a sharded manifest's top document, served at `location`:
    /// none before the top document's signatures are found to hold; then each shard kept under
    /// the root whose SHA-256 is named, and the others downloaded (a few at a time), each cut
    /// at its named length and checked against its SHA-256 before a byte of it is parsed. With
    /// them, what keeps exactly these shards for the next change, when that differs from what
    /// is kept. Nil for any other manifest.
    ///
    /// - Throws: `HotUpdateError.Code.shardMismatch` for a shard other than the one named, and
    ///   as ``ManifestAuthenticator/shardReferences(of:from:)`` and the transport.
    private func fetchShards(
        of data: Data,
        at location: URL
    ) async throws -> (bytes: [String: Data], writes: [(StoreStateFile, Data)])? {
        let authenticator = self.authenticator
        guard
            let references = try await FileSystem.offload({
                try authenticator.shardReferences(of: data, from: location)
            })
        else { return nil }
        let (root, verifier) = (storeRoot, self.verifier)
        let kept = try await FileSystem.offload { KeptShards.load(root: root, verifier: verifier) }
        var shards: [String: Data] = [:]
        var missing: [ShardReference] = []
        for reference in references {
            if let bytes = kept[reference.sha256] {
                shards[reference.sha256] = bytes
            } else {
                missing.append(reference)
            }
        }
        var next = missing.makeIterator()
        try await withThrowingTaskGroup(of: (String, Data).self) { group in
            for _ in 0..<Self.shardFetchWidth {
                guard let reference = next.next() else { break }
                group.addTask { (reference.sha256, try await fetchShard(reference, at: location)) }
            }
            while let (sha256, bytes) = try await group.next() {
                shards[sha256] = bytes
                if let reference = next.next() {
                    group.addTask { (reference.sha256, try await fetchShard(reference, at: location)) }
                }
            }
        }
        let writes: [(StoreStateFile, Data)] =
            Set(shards.keys) == Set(kept.keys) ? [] : [(.keptShards, KeptShards.encoded(shards))]
        return (shards, writes)
    }

    /// How many shards are downloaded at once.
    static let shardFetchWidth = 8

    /// One shard's bytes, downloaded from beside the top document at `location`, cut at the
    /// length named and checked against the SHA-256 named.
    private func fetchShard(_ reference: ShardReference, at location: URL) async throws -> Data {
        guard let shardURL = URL(string: reference.path, relativeTo: location)?.absoluteURL else {
            throw HotUpdateError(.manifestInvalid, "the shard path '\(reference.path)' is not a URL path")
        }
        guard reference.length <= maxBytes else {
            throw HotUpdateError(
                .byteLimitExceeded,
                "the manifest names a shard of \(reference.length) bytes, more than the \(maxBytes) allowed",
                subject: shardURL.absoluteString
            )
        }
        let (data, _) = try await fetchNamed(
            shardURL,
            length: reference.length,
            longer: HotUpdateError(
                .shardMismatch,
                "the shard of bin \(reference.bin) served is longer than the \(reference.length) bytes the manifest names",
                subject: shardURL.absoluteString
            )
        )
        do {
            try reference.check(data, verifier: verifier)
        } catch var error as HotUpdateError {
            error.subject = error.subject ?? shardURL.absoluteString
            throw error
        }
        return data
    }

    /// The body at `url` that a signed document names by its length: the transfer is cut at
    /// `length`, and a longer body, announced or served, is refused with `longer`. With the
    /// response's headers.
    private func fetchNamed(
        _ url: URL,
        length: Int64,
        longer: @autoclosure () -> HotUpdateError
    ) async throws -> (Data, [String: String]) {
        do {
            let response = try await transport.fetch(TransportRequest(url: url, timeouts: timeouts, maxBytes: length))
            try response.requireSuccess()
            return (try await response.collect(limit: length), response.headers)
        } catch let error as HotUpdateError where error.code == .byteLimitExceeded {
            throw longer()
        }
    }

    /// The channel's timestamp, or nil when the server has none (404, 410): a 304 answer
    /// stands for the kept bytes. With it, what to write to keep it, when it changed.
    private func fetchTimestamp(
        from timestampURL: URL
    ) async throws -> (timestamp: ServedTimestamp, writes: [(StoreStateFile, Data)])? {
        let kept = KeptDocument.load(.timestamp, root: storeRoot, url: timestampURL, verifier: verifier)
        let response = try await transport.fetch(
            TransportRequest(
                url: timestampURL,
                headers: kept?.conditionalHeaders ?? [:],
                timeouts: timeouts,
                maxBytes: TimestampPart.maxBytes
            )
        )
        if response.statusCode == 404 || response.statusCode == 410 {
            response.body.cancel()
            return nil
        }
        if response.statusCode == 304, let kept {
            response.body.cancel()
            return (try Self.readTimestamp(kept.bytes, from: timestampURL), [])
        }
        try response.requireSuccess()
        let data = try await response.collect(limit: TimestampPart.maxBytes)
        let writes = try KeptDocument.writes(
            .timestamp,
            bytes: data,
            from: timestampURL,
            headers: response.headers,
            root: storeRoot,
            verifier: verifier
        )
        return (try Self.readTimestamp(data, from: timestampURL), writes)
    }

    private static func readTimestamp(_ data: Data, from url: URL) throws -> ServedTimestamp {
        do {
            return try ServedTimestamp(data)
        } catch var error as HotUpdateError {
            error.subject = error.subject ?? url.absoluteString
            throw error
        }
    }

    /// The manifest with no timestamp: conditionally when one from this URL was kept with
    /// validators, a 304 standing for the kept bytes.
    private func fetchManifestAlone() async throws -> Manifest {
        let source = self
        if let kept = KeptDocument.load(.manifest, root: storeRoot, url: url, verifier: verifier),
            !kept.conditionalHeaders.isEmpty
        {
            let response = try await transport.fetch(
                TransportRequest(url: url, headers: kept.conditionalHeaders, timeouts: timeouts, maxBytes: maxBytes)
            )
            if response.statusCode == 304 {
                response.body.cancel()
                do {
                    let shards = try await fetchShards(of: kept.bytes, at: url)
                    // Off the cooperative pool: recording the trust state waits for the store lock.
                    let manifest = try await FileSystem.offload {
                        try source.manifest(from: kept.bytes, timestamp: nil, shards: shards?.bytes)
                    }
                    keep(shards?.writes ?? [])
                    return manifest
                } catch let error as HotUpdateError
                    where error.code == .manifestExpired || error.code == .timestampMissing
                {
                    throw error
                } catch {
                    logger.warning("the manifest kept for a 304 answer was refused; fetching it whole: \(error)")
                }
            } else {
                try response.requireSuccess()
                return try await accept(try await response.collect(limit: maxBytes), headers: response.headers)
            }
        }
        let response = try await transport.fetch(TransportRequest(url: url, timeouts: timeouts, maxBytes: maxBytes))
        try response.requireSuccess()
        return try await accept(try await response.collect(limit: maxBytes), headers: response.headers)
    }

    /// ``manifest(from:)`` (with the shards of a sharded manifest's top document), then keeps
    /// the bytes and their validators for the next conditional request when they changed (see
    /// ``fetchManifest()``).
    private func accept(_ data: Data, headers: [String: String]) async throws -> Manifest {
        let source = self
        let shards = try await fetchShards(of: data, at: url)
        // Off the cooperative pool: recording the trust state waits for the store lock.
        let manifest = try await FileSystem.offload {
            try source.manifest(from: data, timestamp: nil, shards: shards?.bytes)
        }
        var writes = shards?.writes ?? []
        do {
            writes =
                try KeptDocument.writes(
                    .manifest,
                    bytes: data,
                    from: url,
                    headers: headers,
                    root: storeRoot,
                    verifier: verifier
                ) + writes
        } catch {
            logger.warning("cannot keep the manifest for conditional requests: \(error)")
        }
        keep(writes)
        return manifest
    }

    /// Writes what keeps accepted documents for the next check, under one hold of the store
    /// lock; nothing when nothing changed. A failure loses only the next check's saving.
    private func keep(_ writes: [(StoreStateFile, Data)]) {
        guard !writes.isEmpty else { return }
        do {
            try StoreStateFile.replace(writes, root: storeRoot, wait: lockWait)
        } catch {
            logger.warning("cannot keep the manifest or timestamp for the next check: \(error)")
        }
    }

    private var authenticator: ManifestAuthenticator {
        ManifestAuthenticator(
            verifier: verifier,
            trust: trust,
            context: context,
            storeRoot: storeRoot,
            now: now,
            logger: logger,
            lockWait: lockWait
        )
    }

    /// Authenticates served manifest bytes and applies the policy; records the new trust
    /// state when the manifest is accepted. A manifest that declares a timestamp role is
    /// refused here (`HotUpdateError.Code.timestampMissing`): it is accepted only with its
    /// timestamp, through ``fetchManifest()``. So is a sharded manifest's top document
    /// (`HotUpdateError.Code.manifestInvalid`), whose packages are in shards this reads not.
    ///
    /// - Throws: `HotUpdateError` as listed on the type.
    public func manifest(from data: Data) throws -> Manifest {
        try manifest(from: data, timestamp: nil, shards: nil)
    }

    /// ``manifest(from:)`` with the timestamp served for the bytes, checked against the
    /// release manifest they hold, and the shards of a sharded manifest by SHA-256.
    func manifest(from data: Data, timestamp: (ServedTimestamp, URL)?, shards: [String: Data]?) throws -> Manifest {
        let authenticator = self.authenticator
        switch try authenticator.authenticate(data, from: url, timestamp: timestamp, shards: shards) {
        case .unsigned(let document):
            return try document.manifest(relativeTo: url)
        case .signed(let body, let refused):
            var manifest = try ReleasePolicy(context: context, verifier: verifier).manifest(
                for: body,
                relativeTo: url,
                logger: logger
            )
            manifest.refusedRollout = refused.map { Manifest.Refusal(code: $0.code, message: $0.message) }
            manifest.revision = try authenticator.revision(
                servedSHA256: try verifier.digest(of: data, using: .sha256).hex
            )
            return manifest
        }
    }
}
