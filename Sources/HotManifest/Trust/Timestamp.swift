import Foundation
import HotCore

/// The role the release keys delegate a channel's timestamp to (``TimestampPart``): it may
/// name, with a short expiry, a manifest the release keys signed, and nothing else.
///
/// The release manifest declares it under `timestampRole`, signed by the release keys, with
/// the same fields as the rollout role. A machine that re-signs the timestamp on a schedule
/// (`hot timestamp`, a cron job) then holds a timestamp key, never a release key. A manifest
/// that declares the role is accepted only with a timestamp beside it, so the timestamp's
/// short expiry bounds how long a stale manifest can be served. Without the role, the release
/// keys sign the timestamp (`hot sign` writes one), and a client that finds none falls back to
/// the manifest alone.
public typealias TimestampRole = OnlineRole

/// A channel's timestamp: a small signed document, served at a fixed URL beside the manifest
/// (`timestamp.json`), that names the current manifest by version, SHA-256 and length, with a
/// short expiry.
///
/// ```json
/// {"signatures": [{"keyid": "5d3e…", "sig": "…"}],
///  "signed": {"_type": "hot-timestamp", "schema": 1, "channel": "production",
///             "signedAt": "2026-11-28T09:00:00Z", "expires": "2026-11-29T09:00:00Z",
///             "manifest": {"version": 9, "sha256": "…", "length": 1072}}}
/// ```
///
/// A client fetches it first, conditionally (`If-None-Match`). When it names the manifest the
/// client already holds, the check downloads no manifest. Otherwise the manifest is downloaded
/// and must be exactly the bytes named (`HotUpdateError.Code.timestampMismatch`). The
/// timestamp is checked against the release manifest it names: signed by a threshold of that
/// release's ``SignedManifestBody/timestampRole`` (its release keys when it declares none),
/// no earlier than the release, expiring within the role's bound (``OnlineRoleBounds``), and
/// not yet expired. It carries no version of its own: it names the version of a manifest the
/// release keys (or the rollout role, within its bounds) signed, so a stolen timestamp key
/// cannot push a client's version or time floor.
public struct TimestampPart: Codable, Sendable, Hashable, SignedPart {
    /// The `_type` of a timestamp.
    public static let type = "hot-timestamp"
    /// The schema this code reads and writes.
    public static let currentSchema = 1
    /// What messages call it.
    static let what = "the timestamp"
    /// The timestamp's file name, beside the manifest.
    public static let fileName = "timestamp.json"
    /// How long a timestamp lives when the publisher does not say: one day.
    public static let defaultLifetime = 86_400
    /// The largest timestamp a client reads; the transfer is cut there. A timestamp is a few
    /// hundred bytes per signature.
    public static let maxBytes: Int64 = 16 * 1024

    /// The manifest a timestamp names.
    public struct Named: Codable, Sendable, Hashable {
        /// The version of the manifest clients act on (the rollout part's, when it has one).
        public var version: Int
        /// The SHA-256, hex, of the manifest file's bytes as served.
        public var sha256: String
        /// The length of those bytes.
        public var length: Int64
        /// Where the bytes are, relative to the timestamp: a content-addressed copy
        /// (`manifests/<sha256>.json` at the repository's root) that a CDN may cache for ever,
        /// so a client that reads a timestamp always finds the manifest it names, whatever was
        /// published since. Nil for the manifest's own URL. A relative path of letters, digits,
        /// `.`, `_`, `-` and `/` (``TimestampPart/validatePath(_:)``): a timestamp key cannot
        /// send a client to another host.
        public var path: String?

        /// Creates a reference.
        public init(version: Int, sha256: String, length: Int64, path: String? = nil) {
            self.version = version
            self.sha256 = sha256
            self.length = length
            self.path = path
        }
    }

    /// Always ``type``.
    public var type: String
    /// The schema number; ``currentSchema``.
    public var schema: Int
    /// The channel, as its manifest names it; nil for a repository with one manifest.
    public var channel: String?
    /// When it was signed: no earlier than the release manifest it names. It raises no time
    /// floor.
    public var signedAt: Date
    /// After this instant clients refuse it; at most the role's bound.
    public var expires: Date
    /// The manifest it names.
    public var manifest: Named

    private enum CodingKeys: String, CodingKey {
        case type = "_type"
        case schema, channel, signedAt, expires, manifest
    }

    /// Creates a timestamp.
    public init(channel: String?, signedAt: Date, expires: Date, manifest: Named) {
        self.type = Self.type
        self.schema = Self.currentSchema
        self.channel = channel
        self.signedAt = signedAt
        self.expires = expires
        self.manifest = manifest
    }

    /// A timestamp naming `manifestBytes`, the manifest file as served, whose effective
    /// version is `version`.
    ///
    /// - Throws: `HotUpdateError.Code.internalInconsistency` when the digest cannot be made.
    public static func naming(
        _ manifestBytes: Data,
        version: Int,
        channel: String?,
        signedAt: Date,
        expires: Date,
        path: String? = nil,
        verifier: any Verifier
    ) throws -> TimestampPart {
        TimestampPart(
            channel: channel,
            signedAt: signedAt,
            expires: expires,
            manifest: Named(
                version: version,
                sha256: try verifier.digest(of: manifestBytes, using: .sha256).hex,
                length: Int64(manifestBytes.count),
                path: path
            )
        )
    }

    /// Parses the signed bytes of a timestamp and checks its type, schema and fields.
    ///
    /// - Throws: `HotUpdateError.Code.manifestInvalid`, and the strict reader's codes.
    public static func decode(_ data: Data) throws -> TimestampPart {
        let part = try decodeSignedPart(data)
        let digest = part.manifest.sha256
        guard digest.count == 64, digest.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
            throw HotUpdateError(.manifestInvalid, "the timestamp's manifest SHA-256 is not 64 lowercase hex digits")
        }
        guard part.manifest.length > 0 else {
            throw HotUpdateError(.manifestInvalid, "the timestamp names a manifest of \(part.manifest.length) bytes")
        }
        if let path = part.manifest.path { try validatePath(path) }
        return part
    }

    /// Refuses a ``Named/path`` that could name another host: only letters, digits, `.`,
    /// `_`, `-` and `/`, not starting with `/`, no empty component. It may climb with `..`
    /// (a channel's timestamp names `../../manifests/…`), never out of the origin.
    ///
    /// - Throws: `HotUpdateError.Code.manifestInvalid`.
    public static func validatePath(_ path: String) throws {
        let allowed = path.utf8.allSatisfy {
            (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0)
                || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-")
                || $0 == UInt8(ascii: "/")
        }
        let components = path.split(separator: "/", omittingEmptySubsequences: false)
        guard !path.isEmpty, allowed, !path.hasPrefix("/"), !components.contains(where: \.isEmpty) else {
            throw HotUpdateError(
                .manifestInvalid,
                "the timestamp's manifest path '\(path)' is not a relative path of letters, digits, '.', '_', '-' and '/'"
            )
        }
    }

    /// The bytes to sign and serve: sorted keys, indented, RFC 3339 UTC dates.
    public func canonicalBytes() throws -> Data {
        try SignedManifestBody.canonicalEncoding(self, what: "the timestamp")
    }

    /// Whether it names `bytes`: their SHA-256 and length.
    ///
    /// - Throws: `HotUpdateError.Code.internalInconsistency` when the digest cannot be made.
    public func names(_ bytes: Data, verifier: any Verifier) throws -> Bool {
        guard Int64(bytes.count) == manifest.length else { return false }
        return try verifier.digest(of: bytes, using: .sha256).hex == manifest.sha256
    }
}

/// A timestamp as served (``TimestampPart`` in an envelope with its signatures), and the checks
/// a client makes of it.
package struct ServedTimestamp: Sendable, Hashable {
    /// The envelope: the signed bytes and the signatures over them.
    package var envelope: SignedEnvelope
    /// The decoded signed part.
    package var part: TimestampPart

    /// Reads served timestamp bytes.
    ///
    /// - Throws: `HotUpdateError.Code.manifestInvalid` and the strict reader's codes; a rollout
    ///   part inside a timestamp is refused.
    package init(_ data: Data) throws {
        let envelope = try SignedEnvelope.parse(data)
        guard envelope.rollout == nil else {
            throw HotUpdateError(.manifestInvalid, "the timestamp carries a rollout part")
        }
        self.envelope = envelope
        self.part = try TimestampPart.decode(envelope.signed)
    }

    /// Checks the timestamp against the manifest it is served for.
    ///
    /// - Parameters:
    ///   - release: The release manifest, whose signatures the caller checked.
    ///   - body: The manifest clients act on (`release` with its rollout part applied).
    ///   - manifestSHA256: The SHA-256, hex, of the manifest file's bytes as served.
    ///   - manifestLength: Their length.
    ///   - now: The time to check expiry against: the later of the device's clock, the app's
    ///     time floor and the newest release signing time the client accepted.
    ///   - verifier: Checks signatures.
    /// - Throws: As ``check(authority:version:manifestSHA256:manifestLength:now:verifier:)``.
    package func check(
        release: SignedManifestBody,
        body: SignedManifestBody,
        manifestSHA256: String,
        manifestLength: Int64,
        now: Date,
        verifier: any Verifier
    ) throws {
        try check(
            authority: TimestampAuthority(release: release),
            version: body.version,
            manifestSHA256: manifestSHA256,
            manifestLength: manifestLength,
            now: now,
            verifier: verifier
        )
    }

    /// Checks the timestamp against what the release manifest it names delegates
    /// (`authority`), and that it names the manifest of `version` with those bytes.
    ///
    /// - Throws: `HotUpdateError` with `HotUpdateError.Code.timestampUnauthorized` (too few
    ///   valid signatures by the keys the release delegates timestamps to),
    ///   `HotUpdateError.Code.timestampMismatch` (another manifest, version or channel),
    ///   `HotUpdateError.Code.timestampRoleExceeded` (signed before the release, or
    ///   expiring past the role's bound) or `HotUpdateError.Code.timestampExpired`.
    package func check(
        authority: TimestampAuthority,
        version: Int,
        manifestSHA256: String,
        manifestLength: Int64,
        now: Date,
        verifier: any Verifier
    ) throws {
        let keys = try SignedManifestBody.keyTable(authority.keys, verifier: verifier)
        let tally = try envelope.tally(keys: keys, verifier: verifier)
        guard tally.valid.count >= authority.threshold else {
            let whose =
                authority.isRole ? "timestamp role's keys" : "release keys (no timestamp role is declared)"
            let others = tally.invalid.count + tally.unknown.count
            throw HotUpdateError(
                .timestampUnauthorized,
                "the timestamp has \(tally.valid.count) valid signatures by the release manifest's \(whose), \(authority.threshold) needed"
                    + (others > 0 ? "; \(others) other signatures do not count" : "")
            )
        }
        guard part.channel == authority.channel else {
            throw HotUpdateError(
                .timestampMismatch,
                "the timestamp is for channel '\(part.channel ?? "(none)")', the manifest for '\(authority.channel ?? "(none)")'"
            )
        }
        let named = part.manifest
        guard named.sha256 == manifestSHA256, named.length == manifestLength, named.version == version else {
            throw HotUpdateError(
                .timestampMismatch,
                "the timestamp names manifest version \(named.version) of \(named.length) bytes with SHA-256 \(named.sha256.prefix(12))…; the manifest served is version \(version) of \(manifestLength) bytes with SHA-256 \(manifestSHA256.prefix(12))…"
            )
        }
        try OnlineRoleBounds.checkTimes(
            signedAt: part.signedAt,
            expires: part.expires,
            releaseSignedAt: authority.releaseSignedAt,
            bound: authority.expiryBound,
            part: "the timestamp",
            code: .timestampRoleExceeded
        )
        guard now < part.expires else {
            throw HotUpdateError(
                .timestampExpired,
                "the timestamp expired at \(SignedManifestBody.rfc3339(part.expires)) (now \(SignedManifestBody.rfc3339(now))); the publisher's timestamp signer must sign it again (hot timestamp)"
            )
        }
    }
}

/// What a release manifest delegates its timestamp to, kept with the trust state so that a
/// timestamp naming the manifest a client holds is checked without reading the manifest: the
/// timestamp role's keys, threshold and expiry bound (``OnlineRoleBounds``), or the release
/// keys and threshold where no role is declared; the release's signing time and channel.
package struct TimestampAuthority: Codable, Sendable, Hashable {
    /// The keys whose signatures count, by key id.
    package var keys: [String: SignedManifestBody.Key]
    /// How many of them must sign.
    package var threshold: Int
    /// Whether they are a timestamp role's (false: the release keys).
    package var isRole: Bool
    /// The latest a timestamp may expire, for a role; nil for the release keys.
    package var expiryBound: Date?
    /// The release manifest's signing time: no timestamp is signed before it.
    package var releaseSignedAt: Date?
    /// The release's channel.
    package var channel: String?

    /// What `release` delegates.
    package init(release: SignedManifestBody) {
        if let role = release.timestampRole {
            (keys, threshold, isRole, expiryBound) = (role.keys, role.threshold, true, role.expiryBound(of: release))
        } else {
            (keys, threshold, isRole, expiryBound) = (release.keys, release.threshold, false, nil)
        }
        releaseSignedAt = release.signedAt
        channel = release.channel
    }
}
