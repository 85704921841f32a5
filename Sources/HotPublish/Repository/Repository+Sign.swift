import Foundation
import HotCore
import HotManifest
import HotVerify

extension Repository {
    /// A change of an online role a release manifest declares (the rollout role, the
    /// timestamp role), applied as the manifest is signed.
    public struct RoleChange: Sendable, Hashable {
        /// The role's new keys (replacing its keys); none keeps them.
        public var keys: [PublicKey]
        /// How many of the role's keys must sign; nil keeps it (1 for a new role).
        public var threshold: Int?
        /// How long after a signing the role's documents may expire, in seconds; nil keeps it
        /// (14 days for a new role).
        public var lifetime: TimeInterval?
        /// How many versions above the release the role's steps may go; nil keeps it (1,000
        /// for a new role). The rollout role's alone.
        public var versionLead: Int?
        /// Removes the role: only release keys sign from then on.
        public var remove: Bool

        /// A change; the defaults keep the role as it is.
        public init(
            keys: [PublicKey] = [],
            threshold: Int? = nil,
            lifetime: TimeInterval? = nil,
            versionLead: Int? = nil,
            remove: Bool = false
        ) {
            (self.keys, self.threshold, self.lifetime, self.versionLead, self.remove) =
                (keys, threshold, lifetime, versionLead, remove)
        }

        /// No change.
        public static let keep = RoleChange()
    }

    /// What a signing declares beside the signature: the keys trusted for the next manifest
    /// and the online roles.
    public struct SigningOptions: Sendable, Hashable {
        /// The keys the manifest declares for signing the next one (replacing the declared
        /// set, for a key rotation); none keeps them (the signing keys at the first signing).
        public var trustedKeys: [PublicKey]
        /// How many declared keys must sign; nil keeps it (1 at first).
        public var threshold: Int?
        /// The rollout role's change.
        public var rolloutRole: RoleChange
        /// The timestamp role's change.
        public var timestampRole: RoleChange
        /// When the timestamp this signing writes expires, where no timestamp role is
        /// declared; nil: with the manifest.
        public var timestampExpires: Date?

        /// Options; the defaults change nothing the manifest declares.
        public init(
            trustedKeys: [PublicKey] = [],
            threshold: Int? = nil,
            rolloutRole: RoleChange = .keep,
            timestampRole: RoleChange = .keep,
            timestampExpires: Date? = nil
        ) {
            (self.trustedKeys, self.threshold, self.rolloutRole) = (trustedKeys, threshold, rolloutRole)
            (self.timestampRole, self.timestampExpires) = (timestampRole, timestampExpires)
        }
    }

    /// What a signing wrote, for people.
    public struct SignedRelease: Sendable, Hashable {
        /// `signed manifest.json version 8, expires …, 2 signature(s)`.
        public var summary: String
        /// The manifest's new version.
        public var version: Int
        /// What the timestamp signed with it names, when the release keys signed one.
        public var timestamp: SignedTimestamp?
        /// Notes: who must sign the timestamp when a role does.
        public var notes: [String]
    }

    /// Signs `channel`'s manifest with `signers`: bumps its version above every version the
    /// previous release's rollout role could reach, sets its expiry, declares the keys and
    /// roles `options` give, writes it (a sharded channel: its top document and the manifest
    /// of every package for older clients), and the channel's timestamp, signed by the same
    /// keys, unless a timestamp role is declared.
    ///
    /// - Throws: `HotUpdateError.Code.invalidArgument` for an expiry in the past, a threshold
    ///   above the declared keys or a role that is not well formed;
    ///   `HotUpdateError.Code.signatureInvalid` when fewer declared keys sign than the
    ///   threshold; `HotUpdateError.Code.storeBusy` while another change holds the repository.
    ///   Nothing is written when it throws before the manifest is.
    public func sign(
        with signers: [any Signer],
        expires expiry: Date,
        channel: String? = nil,
        options: SigningOptions = SigningOptions(),
        now: Date = Date()
    ) throws -> SignedRelease {
        try Self.validate(channel: channel)
        guard !signers.isEmpty else { throw HotUpdateError(.invalidArgument, "give at least one key") }
        if let threshold = options.threshold, threshold < 1 {
            throw HotUpdateError(.invalidArgument, "the threshold must be at least 1")
        }
        guard expiry > now else {
            throw HotUpdateError(
                .invalidArgument,
                "the expiry \(SignedManifestBody.rfc3339(expiry)) is in the past"
            )
        }
        return try locked {
            try signHoldingLock(with: signers, expires: expiry, channel: channel, options: options, now: now)
        }
    }

    private func signHoldingLock(
        with signers: [any Signer],
        expires expiry: Date,
        channel: String?,
        options: SigningOptions,
        now: Date
    ) throws -> SignedRelease {
        let verifier = CryptoVerifier()
        let files = self.files
        let sharded = files.isSharded(channel: channel)
        var loadedTop = sharded ? try files.loadTop(channel: channel) : nil
        if loadedTop?.envelope.rollout != nil {
            // The rollout role's step is kept (the next release starts from it): folded into
            // the shards it changes.
            try files.saveSharded(try files.loadShardedBody(channel: channel), channel: channel)
            loadedTop = try files.loadTop(channel: channel)
        }
        // A sharded channel signs its top document: the shards are named by their hashes.
        var body = try loadedTop?.top ?? files.loadBody(channel: channel)
        // The previous release and the role it declared: a step of it may carry a version up
        // to the role's lead above it, and the next release must be above that.
        let previousRole = body.rolloutRole
        let previousRelease = try loadedTop.map { $0.top.version } ?? files.signedPartVersion(channel: channel)
        if !options.trustedKeys.isEmpty {
            body.keys = try Self.keyTable(options.trustedKeys, verifier: verifier)
        } else if body.keys.isEmpty {
            body.keys = try Self.keyTable(signers.map(\.publicKey), verifier: verifier)
            body.threshold = 1
        }
        if let threshold = options.threshold { body.threshold = threshold }
        guard body.threshold <= body.keys.count else {
            throw HotUpdateError(
                .invalidArgument,
                "the threshold \(body.threshold) is above the \(body.keys.count) declared keys"
            )
        }
        body.rolloutRole = try options.rolloutRole.apply(
            named: "rollout",
            to: body.rolloutRole,
            releaseKeys: body.keys,
            verifier: verifier
        )
        body.timestampRole = try options.timestampRole.apply(
            named: "timestamp",
            to: body.timestampRole,
            releaseKeys: body.keys,
            verifier: verifier
        )
        // (A sharded channel's ids are checked as each is added, against the ids of its shard,
        // where every other spelling of it would be.)
        try PathCollision.check(body.packages.map(\.id), caseSensitive: false, what: "the manifest's package ids")
        body.version = try OnlineRoleBounds.nextReleaseVersion(
            after: body.version,
            release: previousRelease,
            bounds: previousRole?.bounds
        )
        // In whole seconds, as the signed bytes write them: the body in hand is then the one
        // the timestamp is checked against, as clients decode it.
        body.expires = Date(timeIntervalSince1970: expiry.timeIntervalSince1970.rounded(.down))
        body.signedAt = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        body.channel = channel

        let envelope = try SignedEnvelope.sign(try body.canonicalBytes(), with: signers, verifier: verifier)
        let declaredSigners = envelope.signatures.filter { body.keys[$0.keyid] != nil }.count
        guard declaredSigners >= body.threshold else {
            throw HotUpdateError(
                .signatureInvalid,
                "only \(declaredSigners) of the signing keys are declared by the manifest, \(body.threshold) needed; clients would refuse it"
            )
        }
        // The bytes the timestamp names: the top document, or the manifest.
        let served = try envelope.encoded()
        if sharded {
            // The manifest of every package, for clients that predate shards: spliced from the
            // shards' bytes and signed by the same keys.
            let whole = try files.wholeManifest(body)
            try files.write(try SignedEnvelope.sign(whole, with: signers, verifier: verifier), channel: channel)
            try RepositoryFiles.replaceServed(files.topURL(channel: channel), with: served)
        } else {
            try files.write(envelope, channel: channel)
        }
        var result = SignedRelease(
            summary:
                "signed \(files.manifestPath(channel: channel))\(sharded ? " and its \(body.shards?.count ?? 0) shards" : "") version \(body.version), expires \(SignedManifestBody.rfc3339(expiry)), \(envelope.signatures.count) signature(s)",
            version: body.version,
            timestamp: nil,
            notes: []
        )
        // The channel's timestamp after the manifest: signed by the release keys where the
        // manifest declares no timestamp role; with one, the role's machine signs it.
        if body.timestampRole != nil {
            result.notes.append(
                "the timestamp role signs \(files.timestampPath(channel: channel)): clients see version \(body.version) once `hot timestamp --key TIMESTAMP_KEY` signs it"
            )
        } else {
            let signed = try TimestampSigner(files: files, channel: channel).sign(
                with: signers,
                expires: options.timestampExpires ?? body.expires,
                now: now,
                document: (served, body)
            )
            result.timestamp = SignedTimestamp(
                summary: signed.summary,
                manifestVersion: signed.part.manifest.version,
                expires: signed.part.expires
            )
        }
        return result
    }

    static func keyTable(_ keys: [PublicKey], verifier: CryptoVerifier) throws -> [String: SignedManifestBody.Key] {
        var table: [String: SignedManifestBody.Key] = [:]
        for key in keys { table[try verifier.keyID(of: key)] = SignedManifestBody.Key(key) }
        return table
    }
}

extension Repository.RoleChange {
    /// The role after the change: `current` with it applied, nil when removed or never declared.
    func apply(
        named name: String,
        to current: OnlineRole?,
        releaseKeys: [String: SignedManifestBody.Key],
        verifier: CryptoVerifier
    ) throws -> OnlineRole? {
        if remove {
            guard keys.isEmpty, threshold == nil, lifetime == nil, versionLead == nil else {
                throw HotUpdateError(.invalidArgument, "removing the \(name) role goes with no other change of it")
            }
            return nil
        }
        var role = current
        if !keys.isEmpty {
            let table = try Repository.keyTable(keys, verifier: verifier)
            if let overlap = table.keys.first(where: { releaseKeys[$0] != nil }) {
                throw HotUpdateError(
                    .invalidArgument,
                    "the \(name) key \(overlap.prefix(12)) is a release key too; a \(name) role needs keys of its own"
                )
            }
            role = OnlineRole(
                keys: table,
                threshold: role?.threshold ?? 1,
                maxLifetime: role?.maxLifetime ?? OnlineRoleBounds.defaultMaxLifetime,
                maxVersionLead: role?.maxVersionLead ?? OnlineRoleBounds.defaultMaxVersionLead
            )
        }
        guard var role else {
            if threshold != nil || lifetime != nil || versionLead != nil {
                throw HotUpdateError(.invalidArgument, "the manifest has no \(name) role: give its keys")
            }
            return nil
        }
        if let threshold { role.threshold = threshold }
        if let lifetime {
            let seconds = lifetime.rounded()
            guard seconds > 0 else {
                throw HotUpdateError(.invalidArgument, "the \(name) role's lifetime is not in the future")
            }
            guard seconds.isFinite, seconds <= Double(OnlineRoleBounds.maxInteger) else {
                throw HotUpdateError(
                    .invalidArgument,
                    "the \(name) role's lifetime is beyond 2^53 − 1 seconds, which clients refuse"
                )
            }
            role.maxLifetime = Int(seconds)
        }
        if let versionLead {
            guard (1...OnlineRoleBounds.maxInteger).contains(versionLead) else {
                throw HotUpdateError(
                    .invalidArgument,
                    "the \(name) role's version lead is a number of versions from 1 to 2^53 − 1, not \(versionLead)"
                )
            }
            role.maxVersionLead = versionLead
        }
        try role.bounds.validate(role: "the \(name) role")
        guard role.threshold >= 1, role.threshold <= role.keys.count else {
            throw HotUpdateError(
                .invalidArgument,
                "the \(name) threshold \(role.threshold) is not between 1 and the role's \(role.keys.count) keys"
            )
        }
        return role
    }
}
