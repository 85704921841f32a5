import Foundation
import HotCore

/// A key set the release keys delegate one kind of signing to, for a machine that signs on
/// its own and must not hold a release key: the rollout role (``RolloutRole``, steps of a
/// staged rollout) and the timestamp role (``TimestampRole``, the channel's timestamp).
///
/// The release manifest declares each, signed by the release keys:
///
/// ```json
/// "rolloutRole": {"keys": {"7c0a…": {"scheme": "ed25519", "public": "…"}},
///                 "threshold": 1, "maxLifetime": 1209600, "maxVersionLead": 1000}
/// ```
///
/// What each role's key can sign is checked against the release manifest it comes with, within
/// ``bounds``: nothing the release keys did not sign, no signing time before the release, no
/// expiry past its bound, and for the rollout role, no version more than ``maxVersionLead``
/// above the release's. So a key stolen from the online machine can do only what its role
/// does, for as long as the release keys allow, and the release keys' next signing replaces
/// it. A role's key is never a release key.
public struct OnlineRole: Codable, Sendable, Hashable {
    /// The keys allowed to sign for the role, by key id.
    public var keys: [String: SignedManifestBody.Key]
    /// How many of ``keys`` must sign.
    public var threshold: Int
    /// How long after the release manifest's signing time (``SignedManifestBody/signedAt``)
    /// what the role signs may keep the manifest valid, in seconds; it may always expire as
    /// late as the release manifest itself.
    public var maxLifetime: Int
    /// How far above the release manifest's version a rollout part's version may go: the
    /// steps the role can sign for one release. 1000 when the manifest does not say (those
    /// written before it existed). `hot sign` signs the next release above it. A timestamp
    /// carries the version of the manifest it names, so this bounds nothing it signs.
    public var maxVersionLead: Int

    /// The bounds what the role signs is checked against.
    public var bounds: OnlineRoleBounds {
        OnlineRoleBounds(maxLifetime: maxLifetime, maxVersionLead: maxVersionLead)
    }

    private enum CodingKeys: String, CodingKey {
        case keys, threshold, maxLifetime, maxVersionLead
    }

    /// Creates a role.
    public init(
        keys: [String: SignedManifestBody.Key],
        threshold: Int = 1,
        maxLifetime: Int = OnlineRoleBounds.defaultMaxLifetime,
        maxVersionLead: Int = OnlineRoleBounds.defaultMaxVersionLead
    ) {
        self.keys = keys
        self.threshold = threshold
        self.maxLifetime = maxLifetime
        self.maxVersionLead = maxVersionLead
    }

    /// Reads a role; a role without `maxVersionLead` (written before it existed) gets
    /// ``OnlineRoleBounds/defaultMaxVersionLead``.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        keys = try container.decode([String: SignedManifestBody.Key].self, forKey: .keys)
        threshold = try container.decode(Int.self, forKey: .threshold)
        maxLifetime = try container.decode(Int.self, forKey: .maxLifetime)
        maxVersionLead =
            try container.decodeIfPresent(Int.self, forKey: .maxVersionLead) ?? OnlineRoleBounds.defaultMaxVersionLead
    }

    /// The role's keys by id, checking each id is derived from its key.
    ///
    /// - Throws: `HotUpdateError.Code.manifestInvalid` for an id that does not match its key.
    public func keyTable(verifier: any Verifier) throws -> [String: PublicKey] {
        try SignedManifestBody.keyTable(keys, verifier: verifier)
    }

    /// The latest instant what the role signs over the release manifest `release` may
    /// expire: the later of its own expiry and its signing time plus ``maxLifetime``.
    public func expiryBound(of release: SignedManifestBody) -> Date {
        bounds.expiryBound(of: release)
    }

    /// Refuses a role whose threshold is not between 1 and its number of keys, or whose
    /// bounds the strict reader would refuse.
    ///
    /// - Parameter role: Names the role in the message ("the rollout role").
    /// - Throws: `HotUpdateError.Code.manifestInvalid`.
    public func validate(role: String) throws {
        guard threshold >= 1, threshold <= keys.count else {
            throw HotUpdateError(
                .manifestInvalid,
                "\(role)'s threshold \(threshold) is not between 1 and its \(keys.count) keys"
            )
        }
        try bounds.validate(role: role)
    }
}
