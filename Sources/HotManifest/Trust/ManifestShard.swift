import Foundation
import HotCore

/// One bin of a sharded manifest's packages: the packages whose id falls in ``bin``.
///
/// A catalogue of thousands of packages is signed as a small top document (a
/// ``SignedManifestBody`` of schema 3) that lists its shards by SHA-256 and length
/// (``ShardReference``) instead of its packages. Each shard is a file of its own,
/// content-addressed (`manifests/shards/<sha256>.json`, cacheable for ever), so a change to one
/// package re-writes, and clients re-download, one shard and the top document. A shard is not
/// signed: the top document's signatures cover its hash.
///
/// ```json
/// {"_type": "hot-manifest-shard", "schema": 1, "bin": "3f",
///  "packages": [{"id": "fonts-cjk", "releases": ["4"], "versions": [ … ]}]}
/// ```
///
/// A package's bin is the first two hex digits of the SHA-256 of its id as file systems that
/// ignore case compare it (``bin(of:verifier:)``): 256 bins, and ids that only differ by case
/// or Unicode normalization share one, so a publisher's clash check reads one shard.
public struct ManifestShard: Codable, Sendable, Hashable, SignedPart {
    /// The `_type` of a shard.
    public static let type = "hot-manifest-shard"
    /// The schema this code reads and writes.
    public static let currentSchema = 1
    static let what = "the manifest shard"
    /// How many bins a sharded manifest has at most: ids are filed by the first two hex digits
    /// of a SHA-256.
    public static let binCount = 256

    /// Always ``type``.
    public var type: String
    /// Always ``currentSchema``.
    public var schema: Int
    /// The bin: two lower-case hex digits.
    public var bin: String
    /// The packages of the bin, in the order the publisher keeps them.
    public var packages: [SignedManifestBody.Package]

    private enum CodingKeys: String, CodingKey {
        case type = "_type"
        case schema, bin, packages
    }

    /// A shard of `bin` holding `packages`.
    public init(bin: String, packages: [SignedManifestBody.Package]) {
        self.type = Self.type
        self.schema = Self.currentSchema
        self.bin = bin
        self.packages = packages
    }

    /// The bin of package `id`: the first two hex digits of the SHA-256 of the id with case
    /// and Unicode normalization folded, as clients compare package ids and paths.
    ///
    /// - Throws: `HotUpdateError.Code.internalInconsistency` when the digest cannot be made.
    public static func bin(of id: String, verifier: any Verifier) throws -> String {
        let folded = PathCollision.key(id, caseSensitive: false)
        return String(try verifier.digest(of: Data(folded.utf8), using: .sha256).hex.prefix(2))
    }

    /// The bytes to publish: sorted keys, indented, as signed documents are written.
    public func canonicalBytes() throws -> Data {
        try SignedManifestBody.canonicalEncoding(self, what: "the manifest shard")
    }

    /// Parses a shard's bytes (the strict reader first) and checks its type and schema.
    ///
    /// - Throws: `HotUpdateError.Code.manifestInvalid`, and the strict reader's codes.
    public static func decode(_ data: Data) throws -> ManifestShard {
        try decodeSignedPart(data)
    }
}

/// What a sharded manifest's top document names of one shard: its bin, and the SHA-256, length
/// and number of packages of its bytes. The shard is published at `shards/<sha256>.json`
/// beside the top document (``path``).
public struct ShardReference: Codable, Sendable, Hashable {
    /// The bin: two lower-case hex digits.
    public var bin: String
    /// The SHA-256 of the shard's bytes, hex.
    public var sha256: String
    /// The length of the shard's bytes.
    public var length: Int64
    /// How many packages the shard lists.
    public var count: Int

    /// Names a shard.
    public init(bin: String, sha256: String, length: Int64, count: Int) {
        self.bin = bin
        self.sha256 = sha256
        self.length = length
        self.count = count
    }

    /// The shard's bytes named: their bin, SHA-256, length and count.
    ///
    /// - Throws: `HotUpdateError.Code.internalInconsistency` when the digest cannot be made.
    public init(_ shard: ManifestShard, bytes: Data, verifier: any Verifier) throws {
        self.init(
            bin: shard.bin,
            sha256: try verifier.digest(of: bytes, using: .sha256).hex,
            length: Int64(bytes.count),
            count: shard.packages.count
        )
    }

    /// Where the shard is, relative to the top document: `shards/<sha256>.json`.
    public var path: String { "shards/\(sha256).json" }
}

extension SignedManifestBody {
    /// The schema of a sharded manifest's top document: ``shards`` instead of ``packages``.
    /// Clients that predate shards refuse it by its schema rather than read no packages.
    public static let shardedSchema = 3

    /// Whether the body is a sharded manifest's top document.
    public var isSharded: Bool { shards != nil }

    /// The top document's body with the packages of `shards` (SHA-256 → bytes) in place of
    /// their references: what a manifest listing every package would say. Each shard must be
    /// exactly the bytes named (length, then SHA-256, before a byte is parsed), of the bin
    /// named, with the count named, every package in its own bin, and no id twice.
    ///
    /// - Throws: `HotUpdateError.Code.shardMismatch`, and `HotUpdateError.Code.manifestInvalid`
    ///   for a shard that is not one.
    public func assembled(from shards: [String: Data], verifier: any Verifier) throws -> SignedManifestBody {
        guard let references = self.shards else { return self }
        var body = self
        body.shards = nil
        body.schema = Self.currentSchema
        body.packages = []
        var seen = Set<String>()
        for reference in references {
            guard let bytes = shards[reference.sha256] else {
                throw HotUpdateError(
                    .shardMismatch,
                    "the shard of bin \(reference.bin) (SHA-256 \(reference.sha256.prefix(12))…) is missing"
                )
            }
            try reference.check(bytes, verifier: verifier)
            let shard = try ManifestShard.decode(bytes)
            guard shard.bin == reference.bin, shard.packages.count == reference.count else {
                throw HotUpdateError(
                    .shardMismatch,
                    "the shard named for bin \(reference.bin) with \(reference.count) packages is bin \(shard.bin) with \(shard.packages.count)"
                )
            }
            for package in shard.packages {
                guard try ManifestShard.bin(of: package.id, verifier: verifier) == shard.bin else {
                    throw HotUpdateError(
                        .shardMismatch,
                        "package '\(package.id)' is listed in bin \(shard.bin), which is not its bin",
                        packageID: package.id
                    )
                }
                guard seen.insert(package.id).inserted else {
                    throw HotUpdateError(
                        .shardMismatch,
                        "package '\(package.id)' is listed twice",
                        packageID: package.id
                    )
                }
                body.packages.append(package)
            }
        }
        return body
    }

    /// Checks the shard references of a top document: each bin named once, as two hex digits.
    func validateShards() throws {
        guard let shards else { return }
        var bins = Set<String>()
        for reference in shards {
            let hex = reference.bin.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
            guard reference.bin.utf8.count == 2, hex, bins.insert(reference.bin).inserted else {
                throw HotUpdateError(
                    .manifestInvalid,
                    "the manifest names bin '\(reference.bin)' twice or not as two lower-case hex digits"
                )
            }
            // Lower-case hex only: the hash names a file, here and on every client.
            let sha = reference.sha256.utf8
            guard sha.count == 64, sha.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }),
                reference.length >= 0, reference.count >= 0
            else {
                throw HotUpdateError(
                    .manifestInvalid,
                    "the manifest names the shard of bin \(reference.bin) with a malformed SHA-256 or length"
                )
            }
        }
    }
}

extension ShardReference {
    /// Refuses bytes other than those named: another length, or another SHA-256.
    ///
    /// - Throws: `HotUpdateError.Code.shardMismatch`.
    public func check(_ bytes: Data, verifier: any Verifier) throws {
        guard Int64(bytes.count) == length else {
            throw HotUpdateError(
                .shardMismatch,
                "the shard of bin \(bin) is \(bytes.count) bytes, the manifest names \(length)"
            )
        }
        let digest = try verifier.digest(of: bytes, using: .sha256).hex
        guard digest == sha256 else {
            throw HotUpdateError(
                .shardMismatch,
                "the shard of bin \(bin) has SHA-256 \(digest.prefix(12))…, the manifest names \(sha256.prefix(12))…"
            )
        }
    }
}
