import Foundation
import HotCore
import Logging

/// Which manifests a client accepts: the root keys the app ships with and how many of them
/// must sign, or, for development repositories only, unsigned manifests.
///
/// ```swift
/// let trust = ManifestTrust.signed(by: [PublicKey(scheme: .ed25519, pem: rootKeyPEM)])
/// ```
public struct ManifestTrust: Sendable, Hashable {
    /// The keys the app ships with.
    public var rootKeys: [PublicKey]
    /// How many of ``rootKeys`` must sign the first manifest (and any manifest after the app
    /// ships other root keys).
    public var threshold: Int
    /// Whether unsigned manifests (schema 1, or an envelope with no signature) are accepted.
    /// Every sync that accepts one logs a warning.
    public var allowsUnsigned: Bool
    /// How far past the newest signing time it accepted (``SignedManifestBody/signedAt``) the
    /// device's clock may push the client's time floor; one day by default.
    ///
    /// Expiry is checked against the later of the device's clock and a floor kept with the
    /// trust state: the latest time the client has seen. Every manifest whose signatures
    /// check raises the floor to the release keys' signing time, and to the device's clock as
    /// read then, but never further than `clockLead` past the newest such signing time (or,
    /// for manifests without one, than the release manifest's expiry). A rollout part's
    /// signing time raises nothing. So a clock set back cannot revive an expired
    /// manifest, and a clock that once ran ahead holds the floor at most `clockLead` past the
    /// newest signature: sign manifests to expire later than that, and the next manifest
    /// signed after the clock is corrected is accepted.
    public var clockLead: TimeInterval = 86_400
    /// A time the client is never earlier than, even with no trust state: the app's build
    /// time, say. Nil by default. It survives the loss of `trust.json`, which the floor
    /// kept there does not.
    public var timeFloor: Date?
    /// The lowest manifest version the client accepts, even with no trust state: the version
    /// the app shipped with, or one it keeps elsewhere (its keychain, say). Nil by default.
    /// It survives the loss of `trust.json`, which the highest version kept there does not:
    /// without it, a client that lost its trust state accepts any manifest its root keys
    /// signed that has not expired, an older one replayed included.
    public var versionFloor: Int?
    /// Whether unsigned manifests are accepted although ``rootKeys`` were given; false by
    /// default. A client given keys refuses unsigned manifests even when ``allowsUnsigned``,
    /// so stripping the signatures off a manifest cannot make it acceptable.
    public var allowsUnsignedDespiteKeys = false

    /// Accepts manifests signed by at least `threshold` of `keys`, and later by the keys each
    /// accepted manifest declares.
    ///
    /// - Parameters:
    ///   - keys: The root keys the app ships with.
    ///   - threshold: How many of them must sign (at least 1).
    public static func signed(by keys: [PublicKey], threshold: Int = 1) -> ManifestTrust {
        ManifestTrust(rootKeys: keys, threshold: max(1, threshold), allowsUnsigned: false)
    }

    /// Accepts unsigned manifests as well, with a warning on every sync. For development
    /// repositories only: an unsigned manifest protects against nothing.
    ///
    /// Given `keys`, a signed manifest must be signed by them, and an unsigned one is refused
    /// unless `despiteKeys`: stripping the signatures must not make a manifest acceptable to
    /// a client that was given keys. The channel and expiry of a signed body are checked in
    /// every case.
    ///
    /// - Parameters:
    ///   - keys: Keys to check signatures with when a manifest is signed.
    ///   - threshold: How many of them must sign such a manifest (at least 1).
    ///   - despiteKeys: Accept unsigned manifests although `keys` were given
    ///     (``allowsUnsignedDespiteKeys``).
    public static func unsignedDevelopment(
        keys: [PublicKey] = [],
        threshold: Int = 1,
        despiteKeys: Bool = false
    ) -> ManifestTrust {
        var trust = ManifestTrust(rootKeys: keys, threshold: max(1, threshold), allowsUnsigned: true)
        trust.allowsUnsignedDespiteKeys = despiteKeys
        return trust
    }

    /// Creates a trust configuration.
    public init(rootKeys: [PublicKey], threshold: Int, allowsUnsigned: Bool) {
        self.rootKeys = rootKeys
        self.threshold = threshold
        self.allowsUnsigned = allowsUnsigned
    }
}

/// Checks a served manifest against what the client trusts, and records what it then trusts.
///
/// In order: signatures by a threshold of the trusted keys (those the last accepted manifest
/// declared, or the app's root keys at first); the channel; signatures by a threshold of the
/// keys the new manifest declares (so a rotation cannot declare keys that cannot sign); the
/// rollout part, if any, within its role's bounds; the release manifest against the release
/// last trusted and the version against the highest trusted (rollback); the expiry (freeze). Only then is the new
/// state saved, durably, under the store root.
struct ManifestAuthenticator: Sendable {
    var verifier: any Verifier
    var trust: ManifestTrust
    var context: ClientContext
    var storeRoot: URL
    var now: @Sendable () -> Date
    var logger: Logger
    var lockWait = StoreLockWait.standard

    /// What was accepted: a verified signed body, or an unsigned schema-1 document.
    enum Accepted {
        /// A signed manifest, and the rollout step served with it that was refused (the body
        /// is then the release manifest alone).
        case signed(SignedManifestBody, refusedRollout: HotUpdateError? = nil)
        case unsigned(ManifestDocument)
    }

    /// The lowest manifest version this client accepts on its channel: the highest it trusted
    /// under the app's root of trust, or the app's ``ManifestTrust/versionFloor``; nil when
    /// neither is known or the trust state cannot be read (the manifest's own check decides).
    func trustedVersion() -> Int? {
        let stored = (try? TrustState.load(root: storeRoot))?.channels[context.channel ?? ""]
        let fingerprint = try? rootFingerprint()
        let version = stored.flatMap { $0.rootFingerprint == fingerprint ? $0.version : nil }
        switch (version, trust.versionFloor) {
        case (let version?, let floor?): return max(version, floor)
        case (let version?, nil): return version
        case (nil, let floor): return floor
        }
    }

    /// Whether `served`, the channel's timestamp, names the manifest this client trusts, checked
    /// as the manifest's acceptance would check it (the timestamp's signatures, bounds and
    /// expiry against what the trusted release delegates; the manifest's expiry against the
    /// time floor) without reading the manifest. False when it names another manifest, the
    /// trust state predates what this needs, or the clock moved the time floor enough to be
    /// written (a full check records it).
    ///
    /// - Throws: The timestamp's refusals (`HotUpdateError.Code.timestampExpired` and the
    ///   rest), and `HotUpdateError.Code.manifestExpired`.
    func namesTrusted(_ served: ServedTimestamp, from timestampURL: URL, manifestURL: URL) throws -> Bool {
        let state = try TrustState.load(root: storeRoot)
        guard let stored = state.channels[context.channel ?? ""], stored.rootFingerprint == (try rootFingerprint()),
            let servedSHA256 = stored.servedSHA256, let expires = stored.expires,
            let authority = stored.timestampAuthority,
            served.part.manifest.sha256 == servedSHA256, served.part.manifest.version == stored.version
        else { return false }
        let clock = now()
        var observed = state
        observed.observe(signedAt: nil, expires: expires, clock: clock, lead: trust.clockLead)
        guard !observed.floorMoved(since: state.timeFloor) else { return false }
        do {
            try served.check(
                authority: authority,
                version: stored.version,
                manifestSHA256: servedSHA256,
                manifestLength: served.part.manifest.length,
                now: timestampNow(clock: clock, newestSigningTime: state.newestSigningTime),
                verifier: verifier
            )
        } catch var error as HotUpdateError {
            error.subject = error.subject ?? timestampURL.absoluteString
            throw error
        }
        let current = max(clock, observed.timeFloor ?? clock, trust.timeFloor ?? clock)
        guard current < expires else {
            throw HotUpdateError(
                .manifestExpired,
                "the manifest expired at \(SignedManifestBody.rfc3339(expires)) (now \(SignedManifestBody.rfc3339(current)))",
                subject: manifestURL.absoluteString
            )
        }
        return true
    }

    /// The time a timestamp's expiry is checked against: the later of the device's `clock`,
    /// the newest release signing time the client accepted and the app's time floor. Not the
    /// floor the clock raised: a one-day timestamp stays acceptable on a device whose clock once
    /// ran a day ahead (the manifest's own expiry is checked against that floor).
    private func timestampNow(clock: Date, newestSigningTime: Date?) -> Date {
        max(clock, newestSigningTime ?? clock, trust.timeFloor ?? clock)
    }

    /// Identifies the manifest of served bytes `servedSHA256` as this client's policy makes
    /// it: the bytes, the client's context and its root of trust.
    func revision(servedSHA256: String) throws -> String {
        let fields = [
            "hot-revision-1", servedSHA256, try rootFingerprint(), context.channel ?? "", context.appVersion ?? "",
            context.clientID,
        ]
        return try verifier.digest(of: Data(fields.joined(separator: "\n").utf8), using: .sha256).hex
    }

    /// Authenticates `data`, served from `url`, with the channel's timestamp served beside it
    /// (and the timestamp's URL, for messages), if any.
    ///
    /// A sharded manifest's top document is read with `shards`, its shards' bytes by SHA-256,
    /// which must be those it names (``SignedManifestBody/assembled(from:verifier:)``).
    func authenticate(
        _ data: Data,
        from url: URL,
        timestamp: (ServedTimestamp, URL)? = nil,
        shards: [String: Data]? = nil
    ) throws -> Accepted {
        let subject = url.absoluteString
        let read: SignedEnvelope?
        do {
            read = try SignedEnvelope.read(data)
        } catch var error as HotUpdateError {
            error.subject = error.subject ?? subject
            throw error
        }
        guard let envelope = read, !envelope.signatures.isEmpty else {
            try requireUnsignedAllowed(subject, what: read == nil ? "no \"signed\" part" : "no signature")
            warnUnsigned(subject)
            guard let envelope = read else { return .unsigned(try ManifestDocument.decode(data)) }
            return .signed(try checkedUnverified(envelope, shards: shards, subject: subject))
        }
        if trust.allowsUnsigned && trust.rootKeys.isEmpty {
            warnUnsigned(subject)
            return .signed(try checkedUnverified(envelope, shards: shards, subject: subject))
        }

        // The trust state is written under the store's exclusive lock, so two processes never
        // lower each other's version floor; a check that changes nothing takes no lock and
        // writes nothing (see `StoreStateFile.updateWhenChanged`).
        return try StoreStateFile.trust.updateWhenChanged(root: storeRoot, wait: lockWait) { file, final in
            var state = try TrustState(stored: file)
            let channelName = context.channel ?? ""
            let fingerprint = try rootFingerprint()
            let stored = state.channels[channelName].flatMap { $0.rootFingerprint == fingerprint ? $0 : nil }
            let (trustedKeys, trustedThreshold) = try self.trustedKeys(stored)
            try envelope.tally(keys: trustedKeys, verifier: verifier).require(
                trustedThreshold,
                whose: "trusted",
                subject: subject
            )

            let release: SignedManifestBody
            do {
                release = try envelope.releaseBody(verifier: verifier, shards: shards)
            } catch var error as HotUpdateError {
                error.subject = error.subject ?? subject
                throw error
            }
            guard release.channel == context.channel else {
                throw HotUpdateError(
                    .manifestInvalid,
                    "the manifest is for channel '\(release.channel ?? "(none)")', this client follows '\(context.channel ?? "(none)")'",
                    subject: subject
                )
            }
            let declared = try release.keyTable(verifier: verifier)
            try envelope.tally(keys: declared, verifier: verifier).require(
                release.threshold,
                whose: "declared",
                subject: subject
            )
            let (body, signedSHA256, refused) = try applyingRollout(envelope, to: release, subject: subject)
            let releaseSHA256 = try verifier.digest(of: envelope.signed, using: .sha256).hex
            // The release keys' signatures hold: their signing time is trustworthy, and so is
            // the clock up to a bound past it. The floor they raise is kept whatever is decided
            // next. A rollout part's signing time raises nothing: an online key must not be
            // able to push the client's clock past what the release keys allow.
            let clock = now()
            let before = (floor: state.timeFloor, signed: state.newestSigningTime)
            state.observe(signedAt: release.signedAt, expires: release.expires, clock: clock, lead: trust.clockLead)
            // The floor is kept whenever a new signing time raised it, and otherwise once it has
            // moved by `TrustState.floorStep`: a check an hour after the last one does not rewrite
            // the file for a floor the clock moved by seconds. This check uses the exact floor.
            if state.newestSigningTime != before.signed || state.floorMoved(since: before.floor) {
                file = try state.encoded()
            }
            let newestSigningTime = state.newestSigningTime
            let decision = Result {
                try check(
                    body,
                    signedSHA256: signedSHA256,
                    release: (release.version, releaseSHA256),
                    against: stored,
                    clock: clock,
                    floor: state.timeFloor,
                    subject: subject
                )
                try checkTimestamp(
                    timestamp,
                    release: release,
                    body: body,
                    manifest: data,
                    clock: clock,
                    newestSigningTime: newestSigningTime,
                    subject: subject
                )
            }
            guard case .success = decision else {
                return decision.map { Accepted.signed(body, refusedRollout: refused) }.mapError { error in
                    // The step was refused and the release manifest alone is refused too (older than
                    // the step the client trusts): both reasons are given.
                    guard let refused, var hot = error as? HotUpdateError else { return error }
                    hot.message += " (the rollout step served with it was refused: \(refused.code): \(refused.message))"
                    return hot
                }
            }

            var next = TrustState.Channel(
                rootFingerprint: fingerprint,
                version: body.version,
                signedSHA256: signedSHA256,
                keys: body.keys,
                threshold: body.threshold,
                releaseVersion: release.version,
                releaseSHA256: releaseSHA256
            )
            next.servedSHA256 = try verifier.digest(of: data, using: .sha256).hex
            next.expires = body.expires
            next.timestampAuthority = TimestampAuthority(release: release)
            if state.channels[channelName] != next {
                if final, let stored, stored.keys != body.keys || stored.threshold != body.threshold {
                    logger.notice(
                        "the manifest rotates its signing keys",
                        metadata: [
                            "keys": "\(body.keys.keys.sorted().map { $0.prefix(12) })",
                            "threshold": "\(body.threshold)",
                        ]
                    )
                }
                state.channels[channelName] = next
                file = try state.encoded()
            }
            return .success(.signed(body, refusedRollout: refused))
        }
        .get()
    }

    /// The keys that must sign the next manifest and how many of them: those the manifest
    /// trusted last (`stored`) declared, or the app's root keys.
    private func trustedKeys(_ stored: TrustState.Channel?) throws -> ([String: PublicKey], Int) {
        if let stored {
            return (try SignedManifestBody.keyTable(stored.keys, verifier: verifier), stored.threshold)
        }
        let keys = try Dictionary(
            trust.rootKeys.map { (try verifier.keyID(of: $0), $0) },
            uniquingKeysWith: { first, _ in first }
        )
        return (keys, trust.threshold)
    }

    /// The shards `data` names when it is a sharded manifest's top document, once a threshold
    /// of the keys this client trusts is found to have signed it, so that nothing is downloaded
    /// for a top document forged by whoever serves it; nil for any other manifest. An unsigned
    /// top document passes only where unsigned manifests are accepted. Reads the trust state,
    /// writes nothing: ``authenticate(_:from:timestamp:shards:)`` checks everything again
    /// with the shards.
    ///
    /// - Throws: `HotUpdateError.Code.signatureInvalid`, `HotUpdateError.Code.manifestUnsigned`,
    ///   and the reader's codes.
    func shardReferences(of data: Data, from url: URL) throws -> [ShardReference]? {
        let subject = url.absoluteString
        // A manifest whose bytes never spell the key is read once, by the authentication that
        // follows; one that names shards with the key escaped is refused there, as a top
        // document read without its shards.
        guard data.range(of: Data("\"shards\"".utf8)) != nil else { return nil }
        do {
            guard let envelope = try SignedEnvelope.read(data),
                let shards = try SignedManifestBody.decode(envelope.signed).shards
            else { return nil }
            guard !envelope.signatures.isEmpty else {
                try requireUnsignedAllowed(subject, what: "no signature")
                return shards
            }
            if trust.allowsUnsigned && trust.rootKeys.isEmpty { return shards }
            let state = try TrustState.load(root: storeRoot)
            let fingerprint = try rootFingerprint()
            let stored = state.channels[context.channel ?? ""].flatMap { $0.rootFingerprint == fingerprint ? $0 : nil }
            let (keys, threshold) = try trustedKeys(stored)
            try envelope.tally(keys: keys, verifier: verifier).require(threshold, whose: "trusted", subject: subject)
            return shards
        } catch var error as HotUpdateError {
            error.subject = error.subject ?? subject
            throw error
        }
    }

    /// The manifest to act on, the digest that identifies it, and the rollout step refused:
    /// the release manifest, or, when a rollout part is served with it, that part applied
    /// after a threshold of the rollout role the release keys declare signed it. The digest
    /// then covers both parts, so one version with another rollout part is refused as other
    /// content.
    ///
    /// A part the client refuses (not signed by the role's threshold, beyond the role's
    /// bounds, unreadable, or served where the release keys declare no role) is set aside: the
    /// release manifest, which the release keys' signatures already passed, applies alone,
    /// identified by its own digest, exactly as if the part had been stripped in transit,
    /// which anyone serving the manifest can do. The refusal is returned for the report.
    private func applyingRollout(
        _ envelope: SignedEnvelope,
        to release: SignedManifestBody,
        subject: String
    ) throws -> (SignedManifestBody, String, HotUpdateError?) {
        do {
            let body = try envelope.applyingRollout(to: release, verifier: verifier, checkingSignatures: true)
            let identified = envelope.signed + (envelope.rollout?.signed ?? Data())
            return (body, try verifier.digest(of: identified, using: .sha256).hex, nil)
        } catch var error as HotUpdateError {
            error.subject = error.subject ?? subject
            logger.warning(
                "the rollout step served with the manifest is refused: the release manifest applies alone",
                metadata: ["code": "\(error.code)", "reason": "\(error.message)"]
            )
            return (release, try verifier.digest(of: envelope.signed, using: .sha256).hex, error)
        }
    }

    /// Checks the timestamp served for the manifest `data` against its release manifest, or
    /// refuses its absence when the release declares a timestamp role. The timestamp's
    /// expiry is checked against the later of the device's clock, the app's time floor and
    /// the newest release signing time accepted, not the time floor the clock raised: a
    /// timestamp that lives a day stays acceptable on a device whose clock once ran up to
    /// ``ManifestTrust/clockLead`` ahead, while the manifest's own expiry is checked against
    /// that floor as before.
    private func checkTimestamp(
        _ timestamp: (ServedTimestamp, URL)?,
        release: SignedManifestBody,
        body: SignedManifestBody,
        manifest data: Data,
        clock: Date,
        newestSigningTime: Date?,
        subject: String
    ) throws {
        guard let (served, timestampURL) = timestamp else {
            guard release.timestampRole == nil else {
                throw HotUpdateError(
                    .timestampMissing,
                    "the manifest declares a timestamp role, so it is accepted only with its timestamp, and none was served (look for \(TimestampPart.fileName) beside the manifest)",
                    subject: subject
                )
            }
            return
        }
        let now = timestampNow(clock: clock, newestSigningTime: newestSigningTime)
        do {
            try served.check(
                release: release,
                body: body,
                manifestSHA256: try verifier.digest(of: data, using: .sha256).hex,
                manifestLength: Int64(data.count),
                now: now,
                verifier: verifier
            )
        } catch var error as HotUpdateError {
            error.subject = error.subject ?? timestampURL.absoluteString
            throw error
        }
    }

    /// Refuses a signed body whose version goes below what is trusted (rollback), whose
    /// release manifest is older than the release already trusted (a rollout part wrapping
    /// an older release: a replay, or a rollout key the release keys have since replaced), or
    /// that expired by the later of the device's clock and the time floor (freeze).
    private func check(
        _ body: SignedManifestBody,
        signedSHA256: String,
        release: (version: Int, sha256: String),
        against stored: TrustState.Channel?,
        clock: Date,
        floor: Date?,
        subject: String
    ) throws {
        let lowest = max(stored?.version ?? Int.min, trust.versionFloor ?? Int.min)
        if body.version < lowest {
            let source = stored.map { _ in "already trusted" } ?? "the app starts from"
            throw HotUpdateError(
                .manifestRollback,
                "manifest version \(body.version) is lower than version \(lowest) \(source)",
                subject: subject
            )
        }
        if let stored, body.version == stored.version, signedSHA256 != stored.signedSHA256 {
            throw HotUpdateError(
                .manifestRollback,
                "manifest version \(body.version) differs from the version \(stored.version) already trusted",
                subject: subject
            )
        }
        if let stored, let trustedRelease = stored.releaseVersion {
            if release.version < trustedRelease {
                throw HotUpdateError(
                    .manifestRollback,
                    "the manifest's release manifest has version \(release.version), lower than the release manifest version \(trustedRelease) already trusted; a rollout part cannot bring an older release back",
                    subject: subject
                )
            }
            if release.version == trustedRelease, let digest = stored.releaseSHA256, digest != release.sha256 {
                throw HotUpdateError(
                    .manifestRollback,
                    "the manifest's release manifest version \(release.version) differs from the one already trusted",
                    subject: subject
                )
            }
        }
        let current = max(clock, floor ?? clock, trust.timeFloor ?? clock)
        guard current < body.expires else {
            let seen =
                current > clock
                ? "; the device's clock says \(SignedManifestBody.rfc3339(clock)), but this client has already seen \(SignedManifestBody.rfc3339(current))"
                : ""
            throw HotUpdateError(
                .manifestExpired,
                "the manifest expired at \(SignedManifestBody.rfc3339(body.expires)) (now \(SignedManifestBody.rfc3339(current))\(seen))",
                subject: subject
            )
        }
    }

    /// Refuses an unsigned manifest unless the client accepts them: configured for development
    /// repositories and given no trust keys, or told in so many words to drop them
    /// (``ManifestTrust/allowsUnsignedDespiteKeys``).
    private func requireUnsignedAllowed(_ subject: String, what: String) throws {
        guard trust.allowsUnsigned else {
            throw HotUpdateError(
                .manifestUnsigned,
                "the manifest is not signed (\(what)); sign it with `hot sign`, or allow unsigned development repositories",
                subject: subject
            )
        }
        guard trust.rootKeys.isEmpty || trust.allowsUnsignedDespiteKeys else {
            throw HotUpdateError(
                .manifestUnsigned,
                "the manifest is not signed (\(what)), and this client was given trust keys: an unsigned manifest is refused even for development repositories unless unsigned manifests are allowed despite the keys",
                subject: subject
            )
        }
    }

    /// A signed body accepted without checking its signatures (development repositories):
    /// its channel and expiry still hold. A body never signed (`hot pack` writes its expiry
    /// as the epoch until `hot sign` sets one) has no expiry to check.
    private func checkedUnverified(
        _ envelope: SignedEnvelope,
        shards: [String: Data]?,
        subject: String
    ) throws -> SignedManifestBody {
        let body = try envelope.effectiveBody(verifier: verifier, shards: shards)
        guard body.channel == context.channel else {
            throw HotUpdateError(
                .manifestInvalid,
                "the manifest is for channel '\(body.channel ?? "(none)")', this client follows '\(context.channel ?? "(none)")'",
                subject: subject
            )
        }
        let current = max(now(), trust.timeFloor ?? .distantPast)
        guard current < body.expires || body.expires == Date(timeIntervalSince1970: 0) else {
            throw HotUpdateError(
                .manifestExpired,
                "the manifest expired at \(SignedManifestBody.rfc3339(body.expires)) (now \(SignedManifestBody.rfc3339(current)))",
                subject: subject
            )
        }
        return body
    }

    /// Identifies the app's root of trust: the set of its key ids (each once, sorted, so
    /// the same keys given in another order, repeated or spelled in another PEM are the same
    /// root) and its threshold.
    private func rootFingerprint() throws -> String {
        let ids = Set(try trust.rootKeys.map { try verifier.keyID(of: $0) }).sorted()
        return try verifier.digest(
            of: Data((ids + ["\(trust.threshold)"]).joined(separator: "\n").utf8),
            using: .sha256
        )
        .hex
    }

    private func warnUnsigned(_ subject: String) {
        logger.warning(
            "ACCEPTING AN UNSIGNED MANIFEST: unsigned development repositories are allowed; anyone who can change \(subject) or the network can change what this app installs"
        )
    }
}
