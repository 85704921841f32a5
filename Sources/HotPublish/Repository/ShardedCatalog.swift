import Foundation
import HotCore
import HotManifest
import HotStore
import HotVerify

/// A sharded channel on disk: its packages in content-addressed shards, one per bin of package
/// ids (``ManifestShard``), named by a small top document, so that a change to one package
/// re-writes one shard and the top document, and a client downloads those two.
///
/// ```
/// channels/<name>/top.json           the top document: the manifest with shard references
///                                    instead of packages (the publisher's working copy,
///                                    unsigned after an edit, signed by `hot sign`)
/// manifests/shards/<sha256>.json     one shard, immutable, shared by every channel
/// manifests/<sha256>.json            the signed top document's copy, which the timestamp names
/// channels/<name>/manifest.json      every package in one manifest, for clients that predate
///                                    shards: spliced from the shards' bytes, not re-encoded
/// ```
///
/// A channel becomes sharded with `hot shard`, or on its own once an edit leaves it with
/// ``threshold`` packages or more; it stays sharded.
extension RepositoryFiles {
    /// How many packages make an edit shard a channel on its own.
    package static let shardThreshold = 1_000

    /// The top document of a sharded channel: `top.json` beside its manifest.
    package func topURL(channel: String?) -> URL {
        manifestURL(channel: channel).deletingLastPathComponent().appendingPathComponent("top.json")
    }

    /// The top document's path relative to the repository, for messages.
    package func topPath(channel: String?) -> String {
        channel.map { "channels/\($0)/top.json" } ?? "top.json"
    }

    /// Whether the channel is sharded.
    package func isSharded(channel: String?) -> Bool {
        FileManager.default.fileExists(atPath: topURL(channel: channel).path)
    }

    /// Where shard `sha256` is: `manifests/shards/<sha256>.json`, beside the top documents'
    /// copies, so the path a top document names (`shards/<sha256>.json`) resolves to it.
    package func shardURL(sha256: String) -> URL {
        root.appendingPathComponent("manifests/shards/\(sha256).json")
    }

    /// The top document as written, and its signed part decoded.
    package func loadTop(channel: String?) throws -> (envelope: SignedEnvelope, top: SignedManifestBody) {
        let path = topPath(channel: channel)
        let data: Data
        do {
            data = try Data(contentsOf: topURL(channel: channel))
        } catch {
            throw HotUpdateError.wrap(error, as: .notFound, "cannot read \(path)")
        }
        let envelope = try SignedEnvelope.parse(data)
        let top = try SignedManifestBody.decode(envelope.signed)
        guard top.isSharded else {
            throw HotUpdateError(.manifestInvalid, "\(path) names no shards", subject: path)
        }
        return (envelope, top)
    }

    /// The bytes of the shard `reference` names, checked against it.
    package func shardBytes(_ reference: ShardReference) throws -> Data {
        var bytes = Data()
        try forEachShard([reference]) { _, shard in bytes = shard.withUnsafeBytes { Data($0) } }
        return bytes
    }

    /// The bytes of every shard `top` names, by SHA-256.
    package func shardBytes(of top: SignedManifestBody) throws -> [String: Data] {
        try shardBytes(of: top.shards ?? [])
    }

    /// The bytes of the shards `references` name, by SHA-256, each checked against its
    /// reference.
    ///
    /// - Throws: As ``forEachShard(_:_:)``.
    private func shardBytes(of references: [ShardReference]) throws -> [String: Data] {
        var shards: [String: Data] = [:]
        // Copied out of the view: its buffer is reused for the next shard.
        try forEachShard(references) { reference, bytes in
            shards[reference.sha256] = bytes.withUnsafeBytes { Data($0) }
        }
        return shards
    }

    /// Calls `body` with each shard `references` name, in their order, once its bytes are
    /// checked against its reference: each is read into one reused buffer and handed over as
    /// a view of it, valid during the call, so the megabytes of a catalogue are not copied to
    /// be read.
    ///
    /// - Throws: `HotUpdateError.Code.notFound` for a shard that cannot be read,
    ///   `HotUpdateError.Code.shardMismatch` for one with other bytes than its reference names,
    ///   and what `body` throws.
    package func forEachShard(_ references: [ShardReference], _ body: (ShardReference, Data) throws -> Void) throws {
        var longest = 0
        for reference in references {
            guard reference.length >= 0, reference.length <= Int64(Int32.max) else {
                throw HotUpdateError(
                    .manifestInvalid,
                    "the shard of bin \(reference.bin) names \(reference.length) bytes"
                )
            }
            longest = max(longest, Int(reference.length))
        }
        let directory = root.appendingPathComponent("manifests/shards").path + "/"
        let verifier = CryptoVerifier()
        var scratch = [UInt8](repeating: 0, count: longest)
        for reference in references {
            let name = "manifests/shards/\(reference.sha256).json (bin \(reference.bin))"
            let length = Int(reference.length)
            try scratch.withUnsafeMutableBytes { raw in
                let buffer = UnsafeMutableRawBufferPointer(rebasing: raw[0..<length])
                let size = try Self.readFile(directory + reference.sha256 + ".json", into: buffer, name: name)
                guard let size, size == length else {
                    throw HotUpdateError(
                        .shardMismatch,
                        "\(name) is \(size.map { "\($0)" } ?? "more than \(length)") bytes, the top document names \(length)"
                    )
                }
                let shard =
                    buffer.baseAddress.map { Data(bytesNoCopy: $0, count: length, deallocator: .none) } ?? Data()
                try reference.check(shard, verifier: verifier)
                try body(reference, shard)
            }
        }
    }

    /// Reads the file at `path` into `buffer`: its size when it fits, nil when it is longer.
    ///
    /// - Throws: `HotUpdateError.Code.notFound`, naming `name`, when it cannot be opened or read.
    private static func readFile(
        _ path: String,
        into buffer: UnsafeMutableRawBufferPointer,
        name: String
    ) throws -> Int? {
        let failure = { HotUpdateError(.notFound, "cannot read \(name): \(String(cString: strerror(errno)))") }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure() }
        defer { close(descriptor) }
        var filled = 0
        while true {
            var extra: UInt8 = 0
            let count =
                filled < buffer.count
                ? read(descriptor, buffer.baseAddress.map { $0 + filled }, buffer.count - filled)
                : read(descriptor, &extra, 1)
            if count < 0 {
                if errno == EINTR { continue }
                throw failure()
            }
            if count == 0 { return filled }
            if filled == buffer.count { return nil }
            filled += count
        }
    }

    /// Writes `shard` at its content address unless it is there, and names it.
    package func writeShard(_ shard: ManifestShard) throws -> (ShardReference, Data) {
        let data = try shard.canonicalBytes()
        let reference = try ShardReference(shard, bytes: data, verifier: CryptoVerifier())
        let url = shardURL(sha256: reference.sha256)
        if !FileManager.default.fileExists(atPath: url.path) {
            try FileSystem.createDirectory(url.deletingLastPathComponent())
            try DurableFile.write(data, to: url)
        }
        return (reference, data)
    }

    /// The sharded channel's manifest as clients act on it: its shards' packages in the top
    /// document, the rollout part applied.
    package func loadShardedBody(channel: String?) throws -> SignedManifestBody {
        let (envelope, top) = try loadTop(channel: channel)
        return try envelope.effectiveBody(verifier: CryptoVerifier(), shards: try shardBytes(of: top))
    }

    /// Writes `body` as the sharded channel's working copy, unsigned: each bin's shard (those
    /// already written stay as they are) and the top document naming them. The manifest of
    /// every package is written by `hot sign`.
    package func saveSharded(_ body: SignedManifestBody, channel: String?) throws {
        let verifier = CryptoVerifier()
        var bins: [String: [SignedManifestBody.Package]] = [:]
        for package in body.packages {
            bins[try ManifestShard.bin(of: package.id, verifier: verifier), default: []].append(package)
        }
        var top = body
        top.packages = []
        top.shards = []
        for (bin, packages) in bins.sorted(by: { $0.key < $1.key }) {
            top.shards?.append(try writeShard(ManifestShard(bin: bin, packages: packages)).0)
        }
        try saveTop(top, channel: channel)
    }

    /// Writes the top document `top` unsigned. The channel's `manifest.json` stays as it was
    /// signed last, so clients and tools that read it see the last signed release, and
    /// `hot publish` refuses the channel until `hot sign` signs the top document and writes
    /// the manifest of every package from its shards.
    package func saveTop(_ top: SignedManifestBody, channel: String?) throws {
        var top = top
        top.schema = SignedManifestBody.shardedSchema
        let url = topURL(channel: channel)
        try FileSystem.createDirectory(url.deletingLastPathComponent())
        try Self.replaceServed(
            url,
            with: try SignedEnvelope(signed: try top.canonicalBytes(), signatures: []).encoded()
        )
    }

    /// The signed part of the manifest listing every package of `top`: the top document
    /// without its shard references, with the packages of its shards spliced in as bytes.
    /// The shards are written as this encoder writes a manifest, so the result is the
    /// manifest's canonical encoding, and ten thousand packages are never decoded and encoded
    /// again. Each shard is read into one reused buffer and checked against its reference
    /// before its packages are copied: the megabytes of a catalogue are copied once.
    ///
    /// - Throws: `HotUpdateError.Code.notFound` for a shard that cannot be read,
    ///   `HotUpdateError.Code.shardMismatch` for one with other bytes than its reference names,
    ///   `HotUpdateError.Code.internalInconsistency` for one not in the form the encoder writes.
    package func wholeManifest(_ top: SignedManifestBody) throws -> Data {
        var header = top
        header.shards = nil
        header.schema = SignedManifestBody.currentSchema
        header.packages = []
        let encoded = try header.canonicalBytes()
        let references = top.shards ?? []
        guard !references.isEmpty else { return encoded }
        let emptyList = Data("\n  \"packages\" : [\n\n  ]".utf8)
        guard let slot = encoded.range(of: emptyList) else {
            throw HotUpdateError(.internalInconsistency, "the manifest's encoding has no empty package list to fill")
        }
        let opening = Data("\n  \"packages\" : [\n".utf8)
        let closing = Data("\n  ],\n  \"schema\" : ".utf8)
        // Room for every shard named (lengths past the bound are refused as each is read).
        let named = references.reduce(0) { $0 + Int(min(max($1.length, 0), Int64(Int32.max))) + 2 }
        var whole = Data()
        whole.reserveCapacity(encoded.count + min(named, 1 << 30))
        whole.append(encoded[..<slot.lowerBound])
        whole.append(opening)
        var first = true
        try forEachShard(references) { reference, shard in
            guard let start = shard.range(of: opening), let end = shard.range(of: closing, options: .backwards),
                start.upperBound <= end.lowerBound
            else {
                throw HotUpdateError(
                    .internalInconsistency,
                    "manifests/shards/\(reference.sha256).json is not in the form the encoder writes"
                )
            }
            if !first { whole.append(contentsOf: [0x2C, 0x0A]) }  // ",\n"
            first = false
            whole.append(shard[start.upperBound..<end.lowerBound])
        }
        whole.append(contentsOf: Array("\n  ]".utf8))
        whole.append(encoded[slot.upperBound...])
        return whole
    }

    /// One package of the channel, for an edit of that package alone: in a sharded channel
    /// only its shard is read (ids that differ only by case share it, so `others` holds every
    /// id it could clash with); otherwise the whole manifest.
    package func loadPackage(_ id: String, channel: String?) throws -> PackageEdit {
        // Not sharded, or a rollout step that changes packages across shards: the whole
        // catalogue is edited.
        let loaded = isSharded(channel: channel) ? try loadTop(channel: channel) : nil
        guard let (envelope, top) = loaded, envelope.rollout == nil else {
            let body = try loadBody(channel: channel)
            return PackageEdit(id: id, package: body.package(id), others: body.packages.map(\.id), place: .whole(body))
        }
        let bin = try ManifestShard.bin(of: id, verifier: CryptoVerifier())
        let shard = try top.shards?.first { $0.bin == bin }.map { try ManifestShard.decode(try shardBytes($0)) }
        let packages = shard?.packages ?? []
        return PackageEdit(
            id: id,
            package: packages.first { $0.id == id },
            others: packages.map(\.id),
            place: .shard(top: top, bin: bin, packages: packages)
        )
    }

    /// Writes `edit` back, unsigned: its shard and the top document in a sharded channel, the
    /// whole manifest otherwise (which shards it once it reaches ``shardThreshold``).
    package func save(_ edit: PackageEdit, channel: String?) throws {
        switch edit.place {
        case .whole(var body):
            if let package = edit.package {
                body.editPackage(edit.id) { $0 = package }
            }
            try saveUnsigned(body, channel: channel)
        case .shard(var top, let bin, var packages):
            if let package = edit.package {
                if let index = packages.firstIndex(where: { $0.id == edit.id }) {
                    packages[index] = package
                } else {
                    packages.append(package)
                }
            }
            var references = (top.shards ?? []).filter { $0.bin != bin }
            if !packages.isEmpty {
                references.append(try writeShard(ManifestShard(bin: bin, packages: packages)).0)
            }
            top.shards = references.sorted { $0.bin < $1.bin }
            try saveTop(top, channel: channel)
        }
    }
}

/// One package of a channel being edited (``RepositoryFiles/loadPackage(_:channel:)``).
package struct PackageEdit {
    /// Where the package lives: the whole manifest, or one shard of a sharded channel.
    package enum Place {
        case whole(SignedManifestBody)
        case shard(top: SignedManifestBody, bin: String, packages: [SignedManifestBody.Package])
    }

    /// The package id.
    package var id: String
    /// The package as listed; nil until it is.
    package var package: SignedManifestBody.Package?
    /// The ids a new spelling of `id` could clash with.
    package var others: [String]
    package var place: Place

    /// An edit of package `id`, listed as `package` (nil when it is not) in `place`.
    package init(id: String, package: SignedManifestBody.Package?, others: [String], place: Place) {
        (self.id, self.package, self.others, self.place) = (id, package, others, place)
    }

    /// Edits the package, creating it when it is not listed.
    package mutating func edit(_ change: (inout SignedManifestBody.Package) throws -> Void) rethrows {
        var package = self.package ?? SignedManifestBody.Package(id: id)
        try change(&package)
        self.package = package
    }
}
