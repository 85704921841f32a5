import Foundation
import HotCore

/// The role the release keys delegate rollout steps to (``RolloutPart``): it may raise or
/// lower a release's rollout percentage and roll a package back to a release the release
/// manifest names, and nothing else.
///
/// The release manifest declares it under `rolloutRole`, signed by the release keys:
///
/// ```json
/// "rolloutRole": {"keys": {"7c0a…": {"scheme": "ed25519", "public": "…"}},
///                 "threshold": 1, "maxLifetime": 1209600, "maxVersionLead": 1000}
/// ```
///
/// A machine that advances rollouts on its own (`hot-server rollout advance`, a cron job)
/// then holds a rollout key, never a release key. The client checks each part against the
/// release manifest it comes with, so a stolen rollout key cannot add a package, change a
/// digest or a URL, name a release the release keys did not list, rotate keys, keep a
/// manifest valid past the role's bound, or sign a version more than the role's
/// ``OnlineRole/maxVersionLead`` above the release's (``OnlineRoleBounds``). The client also
/// records the release manifest a part wraps and refuses a part that wraps an older one, and a
/// part's signing time raises no time floor: only the release keys' does.
public typealias RolloutRole = OnlineRole

/// What the rollout role signs: for some packages of one release manifest, which of its
/// releases is current and to what percentage of clients, with a manifest version and an
/// expiry of its own.
///
/// ```json
/// {"_type": "hot-rollout", "schema": 1, "release": "<SHA-256 of the release's signed bytes>",
///  "version": 9, "signedAt": "2026-11-27T09:00:00Z", "expires": "2026-12-04T09:00:00Z",
///  "packages": [{"id": "images", "current": "3", "rollout": 25}]}
/// ```
///
/// It is served inside the manifest's envelope, under `rollout`, with its own signatures.
/// ``apply(to:releaseSHA256:role:)`` gives the manifest clients act on, and refuses
/// everything the role may not do.
public struct RolloutPart: Codable, Sendable, Hashable, SignedPart {
    /// The `_type` of a rollout part.
    public static let type = "hot-rollout"
    /// The schema this code reads and writes.
    public static let currentSchema = 1
    /// What messages call it.
    static let what = "the rollout part"

    /// One package's rollout.
    public struct Package: Codable, Sendable, Hashable {
        /// The package id; the release manifest must list it.
        public var id: String
        /// The release that is current: one the release manifest lists in `releases`. The
        /// releases after its last occurrence are dropped (a rollback).
        public var current: String
        /// The percentage (0–100) of clients that get ``current``; the others get the release
        /// before it. Nil means everyone.
        public var rollout: Int?

        /// Creates an entry.
        public init(id: String, current: String, rollout: Int?) {
            self.id = id
            self.current = current
            self.rollout = rollout
        }
    }

    /// Always ``type``.
    public var type: String
    /// The schema number; ``currentSchema``.
    public var schema: Int
    /// The SHA-256, hex, of the release manifest's signed bytes this part applies to.
    public var release: String
    /// The manifest version clients see; above the release manifest's, by at most the
    /// role's ``OnlineRole/maxVersionLead``.
    public var version: Int
    /// When the rollout role signed it: no earlier than the release manifest. It raises no
    /// client's time floor; only the release manifest's signing time does.
    public var signedAt: Date
    /// After this instant clients refuse the manifest; at most the role's bound.
    public var expires: Date
    /// The packages whose rollout it sets; the others stay as the release manifest has them.
    public var packages: [Package]

    private enum CodingKeys: String, CodingKey {
        case type = "_type"
        case schema, release, version, signedAt, expires, packages
    }

    /// Creates a rollout part.
    public init(release: String, version: Int, signedAt: Date, expires: Date, packages: [Package]) {
        self.type = Self.type
        self.schema = Self.currentSchema
        self.release = release
        self.version = version
        self.signedAt = signedAt
        self.expires = expires
        self.packages = packages
    }

    /// Parses the signed bytes of a rollout part and checks its type and schema.
    ///
    /// - Throws: `HotUpdateError.Code.manifestInvalid`, and the strict reader's codes.
    public static func decode(_ data: Data) throws -> RolloutPart {
        try decodeSignedPart(data)
    }

    /// The bytes to sign and serve: sorted keys, indented, RFC 3339 UTC dates.
    public func canonicalBytes() throws -> Data {
        try SignedManifestBody.canonicalEncoding(self, what: "the rollout part")
    }

    /// The manifest clients act on: `release` with this part's packages, version and expiry.
    ///
    /// - Parameters:
    ///   - release: The release manifest, whose signatures the caller checked.
    ///   - releaseSHA256: The SHA-256, hex, of its signed bytes.
    ///   - role: The rollout role it declares.
    /// - Throws: `HotUpdateError.Code.rolloutRoleExceeded` naming the first thing the role
    ///   may not do: a part for another release manifest, a version not above it or more than
    ///   the role's ``OnlineRole/maxVersionLead`` above it, a signing time before it, an
    ///   expiry past the role's bound, a package it does not list, a
    ///   package twice, a release it does not name, a percentage outside 0–100.
    public func apply(
        to release: SignedManifestBody,
        releaseSHA256: String,
        role: RolloutRole
    ) throws -> SignedManifestBody {
        func refuse(_ message: String, packageID: String? = nil) -> HotUpdateError {
            HotUpdateError(.rolloutRoleExceeded, message, packageID: packageID)
        }
        guard self.release == releaseSHA256 else {
            throw refuse(
                "the rollout part was signed for another release manifest (\(self.release.prefix(12))…, this one is \(releaseSHA256.prefix(12))…)"
            )
        }
        try role.bounds.check(
            version: version,
            signedAt: signedAt,
            expires: expires,
            over: release,
            part: "the rollout part",
            code: .rolloutRoleExceeded
        )
        var result = release
        var seen = Set<String>()
        for entry in packages {
            guard seen.insert(entry.id).inserted else {
                throw refuse("the rollout part names \(entry.id) twice", packageID: entry.id)
            }
            guard let index = result.packages.firstIndex(where: { $0.id == entry.id }) else {
                throw refuse(
                    "the rollout part names \(entry.id), which the release manifest does not list",
                    packageID: entry.id
                )
            }
            let releases = result.packages[index].releases
            guard let last = releases.lastIndex(of: entry.current) else {
                throw refuse(
                    "the rollout part makes \(entry.current) current, which the release manifest does not release (\(releases.joined(separator: ", ")))",
                    packageID: entry.id
                )
            }
            if let rollout = entry.rollout, !(0...100).contains(rollout) {
                throw refuse("the rollout part sets a rollout of \(rollout)%, outside 0–100", packageID: entry.id)
            }
            result.packages[index].releases = Array(releases[...last])
            result.packages[index].rollout = entry.rollout
        }
        result.version = version
        result.signedAt = signedAt
        result.expires = expires
        return result
    }
}
