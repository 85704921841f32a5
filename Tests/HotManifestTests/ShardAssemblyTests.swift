import Foundation
import HotCore
import HotManifest
import HotTesting
import Testing

/// A sharded manifest's top document with its shards: what is assembled, what is refused.
@Suite("Shard assembly")
struct ShardAssemblyTests {
    let verifier = FakeVerifier()

    /// A package of one version.
    func package(_ id: String) -> SignedManifestBody.Package {
        SignedManifestBody.Package(
            id: id,
            releases: ["1"],
            versions: [
                VersionEntry(
                    version: "1",
                    url: "packages/\(id).zip",
                    size: 1,
                    sha256: String(repeating: "a", count: 64)
                )
            ]
        )
    }

    /// A top document over `ids`, filed by bin, and its shards' bytes by SHA-256.
    func sharded(_ ids: [String]) throws -> (top: SignedManifestBody, shards: [String: Data]) {
        var bins: [String: [SignedManifestBody.Package]] = [:]
        for id in ids { bins[try ManifestShard.bin(of: id, verifier: verifier), default: []].append(package(id)) }
        var top = SignedManifestBody(version: 3, expires: Date(timeIntervalSince1970: 2_000_000_000))
        top.schema = SignedManifestBody.shardedSchema
        top.shards = []
        var shards: [String: Data] = [:]
        for (bin, packages) in bins.sorted(by: { $0.key < $1.key }) {
            let shard = ManifestShard(bin: bin, packages: packages)
            let bytes = try shard.canonicalBytes()
            let reference = try ShardReference(shard, bytes: bytes, verifier: verifier)
            top.shards?.append(reference)
            shards[reference.sha256] = bytes
        }
        return (top, shards)
    }

    @Test("the shards' packages make the manifest; its bytes decode as a schema 3 top document")
    func assembles() throws {
        let ids = (1...50).map { "pack\($0)" }
        let (top, shards) = try sharded(ids)
        let decoded = try SignedManifestBody.decode(try top.canonicalBytes())
        #expect(decoded.isSharded && decoded.packages.isEmpty && decoded.schema == 3)
        let body = try decoded.assembled(from: shards, verifier: verifier)
        #expect(Set(body.packages.map(\.id)) == Set(ids) && body.packages.count == 50)
        #expect(body.shards == nil && body.schema == SignedManifestBody.currentSchema)
    }

    @Test("ids that differ only by case or normalization share a bin")
    func twinsShareABin() throws {
        #expect(
            try ManifestShard.bin(of: "Fonts", verifier: verifier) == ManifestShard.bin(of: "fonts", verifier: verifier)
        )
        #expect(
            try ManifestShard.bin(of: "caf\u{E9}", verifier: verifier)
                == ManifestShard.bin(of: "cafe\u{301}", verifier: verifier)
        )
    }

    /// How a shard is made to lie.
    enum Lie: String, CaseIterable, CustomTestStringConvertible {
        case otherBytes, missing, wrongBin, twice, otherCount
        var testDescription: String { rawValue }
    }

    @Test("a shard that is not what the top document names is refused with shardMismatch", arguments: Lie.allCases)
    func refused(_ lie: Lie) throws {
        var (top, shards) = try sharded(["a", "b", "c", "d", "e", "f"])
        let first = try #require(top.shards?.first)
        switch lie {
        case .otherBytes:
            var bytes = try #require(shards[first.sha256])
            bytes[bytes.count - 3] ^= 0x01
            shards[first.sha256] = bytes
        case .missing:
            shards[first.sha256] = nil
        case .wrongBin, .twice, .otherCount:
            // A shard re-made and named anew, as a publisher's bug or a signer's would make it.
            var shard = try ManifestShard.decode(try #require(shards[first.sha256]))
            if lie == .wrongBin {
                let stranger = try #require(
                    (1...500).map { "x\($0)" }.first { try ManifestShard.bin(of: $0, verifier: verifier) != shard.bin }
                )
                shard.packages.append(package(stranger))
            } else if lie == .twice {
                let other = try #require(top.shards?.last)
                let neighbour = try ManifestShard.decode(try #require(shards[other.sha256]))
                shard.packages.append(contentsOf: neighbour.packages)
                // The neighbour's packages filed under this bin too: refused as out of their bin
                // or listed twice, whichever comes first; both are shardMismatch.
            }
            let bytes = try shard.canonicalBytes()
            var reference = try ShardReference(shard, bytes: bytes, verifier: verifier)
            if lie == .otherCount { reference.count += 1 }
            shards[reference.sha256] = bytes
            top.shards?[0] = reference
        }
        #expect(throws: HotUpdateError(.shardMismatch, "")) { try top.assembled(from: shards, verifier: verifier) }
    }

    @Test("a schema 2 body naming shards, or a top document listing packages, is refused as invalid")
    func schemas() throws {
        var (top, _) = try sharded(["a"])
        top.schema = SignedManifestBody.currentSchema
        #expect(throws: HotUpdateError(.manifestInvalid, "")) {
            try SignedManifestBody.decode(try top.canonicalBytes())
        }
        top.schema = SignedManifestBody.shardedSchema
        top.packages = [package("z")]
        #expect(throws: HotUpdateError(.manifestInvalid, "")) {
            try SignedManifestBody.decode(try top.canonicalBytes())
        }
        var plain = SignedManifestBody(version: 1)
        plain.schema = SignedManifestBody.shardedSchema
        #expect(throws: HotUpdateError(.manifestInvalid, "")) {
            try SignedManifestBody.decode(try plain.canonicalBytes())
        }
    }

    @Test(
        "a shard named by anything but 64 lower-case hex digits is refused: the hash names a file",
        arguments: [
            "../../../../etc/" + String(repeating: "a", count: 48),
            String(repeating: "A", count: 64),
            String(repeating: "a", count: 63) + "/",
            String(repeating: "a", count: 63),
        ]
    )
    func malformedHash(_ sha256: String) throws {
        var (top, _) = try sharded(["a", "b"])
        top.shards?[0].sha256 = sha256
        let error = #expect(throws: HotUpdateError.self) { try SignedManifestBody.decode(try top.canonicalBytes()) }
        #expect(error?.code == .manifestInvalid, "\(String(describing: error))")
        // The same document with a well-formed hash decodes.
        top.shards?[0].sha256 = String(repeating: "0", count: 64)
        #expect(try SignedManifestBody.decode(try top.canonicalBytes()).shards?.count == top.shards?.count)
    }
}
