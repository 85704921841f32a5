import Foundation
import HotCore

/// The signed part of a schema-2 manifest: what is released, to whom, until when, and
/// which keys may sign the next one.
///
/// ```json
/// {"_type": "hot-manifest", "schema": 2, "version": 8, "expires": "2026-12-23T18:00:00Z",
///  "channel": "production", "threshold": 1,
///  "keys": {"3b1f…": {"scheme": "ed25519", "public": "-----BEGIN PUBLIC KEY-----…"}},
///  "packages": [
///    {"id": "images", "releases": ["2", "3"], "rollout": 25, "minAppVersion": "5.2",
///     "versions": [
///       {"version": "2", "url": "packages/images-2-9f86d081884c.zip", "size": 48213, "sha256": "…"},
///       {"version": "3", "url": "packages/images-3-2c26b46b68ff.zip", "size": 49002, "sha256": "…"}]}]}
/// ```
///
/// `releases` lists the released versions oldest first; the last is current and the one
/// before it is what clients outside a staged rollout get. `versions` lists every packed
/// version the manifest may refer to, so an old release can come back without a new
/// upload. Publishers edit it with `hot release`, `hot rollback`, `hot disable`,
/// `hot enable` and sign it with `hot sign`; clients read it through ``SignedManifestSource``.
public struct SignedManifestBody: Codable, Sendable, Hashable {
    /// The `_type` of a manifest.
    public static let type = "hot-manifest"
    /// The schema this code reads and writes.
    public static let currentSchema = 2

    /// A key allowed to sign, as the manifest declares it.
    public struct Key: Codable, Sendable, Hashable {
        /// The signature scheme.
        public var scheme: PublicKey.Scheme
        /// The public key, PEM SubjectPublicKeyInfo.
        public var `public`: String

        /// Creates a key entry.
        public init(_ key: PublicKey) {
            self.scheme = key.scheme
            self.public = key.pem
        }

        /// The key as a `PublicKey`.
        public var publicKey: PublicKey { PublicKey(scheme: scheme, pem: self.public) }
    }

    /// One packed version of a package: where its archive is and how to check it. The same
    /// entry an unsigned manifest lists (``ManifestDocument/Entry``).
    public typealias Version = VersionEntry

    /// One package: its versions, what is released, and the policy the client applies.
    public struct Package: Codable, Sendable, Hashable {
        /// The package id.
        public var id: String
        /// Released versions, oldest first; the last is current.
        public var releases: [String]
        /// Every version the manifest may refer to.
        public var versions: [Version]
        /// When true, clients stop using the package (its files stay) and fall back to the bundle.
        public var disabled: Bool
        /// The lowest app version the current release is for (dotted numbers, inclusive).
        public var minAppVersion: String?
        /// The highest app version the current release is for (inclusive).
        public var maxAppVersion: String?
        /// The percentage (0–100) of clients that get the current release; the others
        /// get the previous one. Nil means everyone.
        public var rollout: Int?
        /// When clients download the package (`hot pack --delivery`, `hot release --delivery`);
        /// absent means `DeliveryMode.prefetch`, and manifests that never set it stay
        /// byte-identical. Clients older than delivery modes ignore it and prefetch.
        public var delivery: DeliveryMode?

        /// Creates a package entry.
        public init(
            id: String,
            releases: [String] = [],
            versions: [Version] = [],
            disabled: Bool = false,
            minAppVersion: String? = nil,
            maxAppVersion: String? = nil,
            rollout: Int? = nil
        ) {
            self.id = id
            self.releases = releases
            self.versions = versions
            self.disabled = disabled
            self.minAppVersion = minAppVersion
            self.maxAppVersion = maxAppVersion
            self.rollout = rollout
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            releases = try container.decodeIfPresent([String].self, forKey: .releases) ?? []
            versions = try container.decodeIfPresent([Version].self, forKey: .versions) ?? []
            disabled = try container.decodeIfPresent(Bool.self, forKey: .disabled) ?? false
            minAppVersion = try container.decodeIfPresent(String.self, forKey: .minAppVersion)
            maxAppVersion = try container.decodeIfPresent(String.self, forKey: .maxAppVersion)
            rollout = try container.decodeIfPresent(Int.self, forKey: .rollout)
            delivery = try container.decodeIfPresent(DeliveryMode.self, forKey: .delivery)
        }

        /// The current release, if any.
        public var current: String? { releases.last }
        /// The release before the current one, if any.
        public var previous: String? { releases.count >= 2 ? releases[releases.count - 2] : nil }

        /// The entry of `version`, if the manifest lists it.
        public func entry(for version: String) -> Version? {
            versions.last { $0.version == version }
        }
    }

    /// Always ``type``.
    public var type: String
    /// The schema number; ``currentSchema``.
    public var schema: Int
    /// Increases with every signing; a client never accepts a lower one.
    public var version: Int
    /// After this instant clients refuse the manifest.
    public var expires: Date
    /// When the manifest was signed, by the signer's clock (`hot sign` sets it); nil in
    /// manifests signed before it was written. A client never believes it is earlier than a
    /// signing time it accepted, so a device clock set back cannot revive an expired
    /// manifest (see ``ManifestTrust/clockLead``).
    public var signedAt: Date?
    /// The channel this manifest is for (`production`, `staging`), or nil for a repository
    /// with one manifest.
    public var channel: String?
    /// The keys allowed to sign the next manifest, by key id.
    public var keys: [String: Key]
    /// How many of ``keys`` must sign.
    public var threshold: Int
    /// The packages.
    public var packages: [Package]
    /// The keys that may sign rollout steps of this manifest (``RolloutPart``), and their
    /// bounds; nil when only the release keys sign. Manifests without it stay byte-identical.
    public var rolloutRole: RolloutRole?
    /// The keys that may sign the channel's timestamp (``TimestampPart``), and their bounds;
    /// nil when the release keys sign it. A manifest that declares one is accepted only with a
    /// timestamp beside it. Manifests without it stay byte-identical.
    public var timestampRole: TimestampRole?
    /// In a sharded manifest's top document (schema ``shardedSchema``), the shards that list
    /// the packages, by bin (``ShardReference``), and ``packages`` is empty; nil otherwise.
    /// Manifests without it stay byte-identical.
    public var shards: [ShardReference]?

    private enum CodingKeys: String, CodingKey {
        case type = "_type"
        case schema, version, expires, signedAt, channel, keys, threshold, packages, rolloutRole, timestampRole
        case shards
    }

    /// Creates a body.
    public init(
        version: Int = 0,
        expires: Date = Date(timeIntervalSince1970: 0),
        channel: String? = nil,
        keys: [String: Key] = [:],
        threshold: Int = 1,
        packages: [Package] = []
    ) {
        self.type = Self.type
        self.schema = Self.currentSchema
        self.version = version
        self.expires = expires
        self.channel = channel
        self.keys = keys
        self.threshold = threshold
        self.packages = packages
    }

    /// Parses the signed bytes and checks the type and schema.
    ///
    /// - Throws: `HotUpdateError.Code.manifestInvalid`.
    public static func decode(_ data: Data) throws -> SignedManifestBody {
        // The strict reader first: duplicate keys, inexact numbers, trailing bytes.
        _ = try StrictJSON.read(data, what: "the signed manifest")
        let body: SignedManifestBody
        do {
            body = try jsonDecoder.decode(SignedManifestBody.self, from: data)
        } catch {
            throw HotUpdateError.wrap(error, as: .manifestInvalid, "the signed manifest is not valid schema-2 JSON")
        }
        guard body.type == type, body.schema == (body.isSharded ? shardedSchema : currentSchema) else {
            throw HotUpdateError(
                .manifestInvalid,
                "the signed part is '\(body.type)' schema \(body.schema)\(body.isSharded ? " with shards" : ""), expected '\(type)' schema \(currentSchema), or \(shardedSchema) with shards"
            )
        }
        guard !body.isSharded || body.packages.isEmpty else {
            throw HotUpdateError(.manifestInvalid, "the sharded manifest lists packages beside its shards")
        }
        try body.validateShards()
        guard body.threshold >= 1 else {
            throw HotUpdateError(.manifestInvalid, "the manifest's threshold \(body.threshold) is below 1")
        }
        try body.rolloutRole?.validate(role: "the rollout role")
        try body.timestampRole?.validate(role: "the timestamp role")
        if let signedAt = body.signedAt, signedAt > body.expires {
            throw HotUpdateError(
                .manifestInvalid,
                "the manifest was signed at \(rfc3339(signedAt)), after it expires (\(rfc3339(body.expires)))"
            )
        }
        return body
    }

    /// The bytes to sign and serve: sorted keys, indented, RFC 3339 UTC dates.
    public func canonicalBytes() throws -> Data {
        try Self.canonicalEncoding(self, what: "the manifest")
    }

    /// `value` as signed documents are written: sorted keys, indented, RFC 3339 UTC dates.
    static func canonicalEncoding(_ value: some Encodable, what: String) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(SignedManifestBody.rfc3339(date))
        }
        do {
            return try encoder.encode(value)
        } catch {
            throw HotUpdateError.wrap(error, as: .internalInconsistency, "cannot encode \(what)")
        }
    }

    /// The declared keys by id, checking each id is derived from its key.
    ///
    /// - Throws: `HotUpdateError.Code.manifestInvalid` for an id that does not match its key.
    public func keyTable(verifier: any Verifier) throws -> [String: PublicKey] {
        try Self.keyTable(keys, verifier: verifier)
    }

    /// Key id → key, checking each id is derived from its key.
    static func keyTable(_ keys: [String: Key], verifier: any Verifier) throws -> [String: PublicKey] {
        var table: [String: PublicKey] = [:]
        for (keyID, entry) in keys {
            let derived = try verifier.keyID(of: entry.publicKey)
            guard derived == keyID else {
                throw HotUpdateError(
                    .manifestInvalid,
                    "key id \(keyID) does not match its key (which has id \(derived))"
                )
            }
            table[keyID] = entry.publicKey
        }
        return table
    }

    /// The package with `id`, if listed.
    public func package(_ id: String) -> Package? { packages.first { $0.id == id } }

    /// Edits the package `id`, creating it when missing.
    public mutating func editPackage(_ id: String, _ edit: (inout Package) throws -> Void) rethrows {
        if let index = packages.firstIndex(where: { $0.id == id }) {
            try edit(&packages[index])
        } else {
            var package = Package(id: id)
            try edit(&package)
            packages.append(package)
        }
    }

    /// `date` as RFC 3339 UTC with whole seconds: `2026-12-23T18:00:00Z`.
    public static func rfc3339(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down)))
    }

    /// Reads an RFC 3339 / ISO 8601 instant (`2026-12-23T18:00:00Z`, with or without
    /// fractional seconds, with an offset or `Z`).
    public static func parseDate(_ text: String) -> Date? {
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        if let date = plain.date(from: text) { return date }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return fractional.date(from: text)
    }

    /// Reads signed documents: RFC 3339 dates.
    static var jsonDecoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = parseDate(text) else {
                throw DecodingError.dataCorruptedError(
                    in: container,
                    debugDescription: "'\(text)' is not an RFC 3339 time"
                )
            }
            return date
        }
        return decoder
    }
}
