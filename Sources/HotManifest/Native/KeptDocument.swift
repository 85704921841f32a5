import Foundation
import HotCore

/// A signed document a ``SignedManifestSource`` accepted (the manifest, or the channel's
/// timestamp), kept under the store root with the validators it was served with, so the next
/// check asks the server whether it changed (`If-None-Match`, `If-Modified-Since`) and a
/// `304 Not Modified` costs no body. A kept manifest also stands for the manifest a timestamp
/// names by its SHA-256, with no request at all.
///
/// The bytes stand for an answer only: each time they are used, their signatures, version
/// and expiry are checked again as if just downloaded, so a 304 never extends trust, and a
/// server that answers 304 for ever freezes nothing past the document's expiry. Kept bytes
/// that no longer match their recorded SHA-256 are ignored (the next request asks for the
/// whole document). The store writes the files, under its lock, only when they change.
struct KeptDocument: Sendable, Hashable {
    /// Which document, and the two files it is kept in.
    struct Kind: Sendable, Hashable {
        /// The bytes as served.
        var bytes: StoreStateFile
        /// ``Validators``, JSON.
        var validators: StoreStateFile

        static func == (lhs: Kind, rhs: Kind) -> Bool { lhs.bytes.name == rhs.bytes.name }
        func hash(into hasher: inout Hasher) { hasher.combine(bytes.name) }

        /// The manifest (`manifest.kept`, `manifest.kept.json`).
        static let manifest = Kind(bytes: .keptManifest, validators: .keptManifestValidators)
        /// The timestamp (`timestamp.kept`, `timestamp.kept.json`).
        static let timestamp = Kind(bytes: .keptTimestamp, validators: .keptTimestampValidators)
    }

    /// What is recorded beside the bytes.
    struct Validators: Codable, Sendable, Hashable {
        /// The URL the bytes were served at.
        var url: String
        /// The `ETag` they were served with.
        var etag: String?
        /// The `Last-Modified` they were served with.
        var lastModified: String?
        /// The SHA-256 of the bytes, hex.
        var sha256: String
    }

    /// The validators.
    var validators: Validators
    /// The document's bytes as served.
    var bytes: Data

    /// The kept document of `kind` for `url` under `root`, or nil when there is none, it was
    /// served at another URL, or its bytes do not match their SHA-256.
    static func load(_ kind: Kind, root: URL, url: URL, verifier: any Verifier) -> KeptDocument? {
        guard let recorded = try? kind.validators.read(root: root),
            let validators = try? JSONDecoder().decode(Validators.self, from: recorded),
            validators.url == url.absoluteString,
            let bytes = try? kind.bytes.read(root: root),
            (try? verifier.digest(of: bytes, using: .sha256).hex) == validators.sha256
        else { return nil }
        return KeptDocument(validators: validators, bytes: bytes)
    }

    /// The headers that ask the server for the document only if it changed; empty when it was
    /// served with neither an `ETag` nor a `Last-Modified`.
    var conditionalHeaders: [String: String] {
        var headers: [String: String] = [:]
        if let etag = validators.etag { headers["If-None-Match"] = etag }
        if let lastModified = validators.lastModified { headers["If-Modified-Since"] = lastModified }
        return headers
    }

    /// What to write so that `bytes`, accepted from `url` with `headers`, are kept: nothing
    /// when they and their validators are what is kept already, or when the response carried
    /// no validator and `evenWithoutValidators` is false.
    ///
    /// - Throws: `HotUpdateError.Code.internalInconsistency` when a digest cannot be made.
    static func writes(
        _ kind: Kind,
        bytes: Data,
        from url: URL,
        headers: [String: String],
        evenWithoutValidators: Bool = false,
        root: URL,
        verifier: any Verifier
    ) throws -> [(StoreStateFile, Data)] {
        let validators = Validators(
            url: url.absoluteString,
            etag: headers["etag"],
            lastModified: headers["last-modified"],
            sha256: try verifier.digest(of: bytes, using: .sha256).hex
        )
        guard evenWithoutValidators || validators.etag != nil || validators.lastModified != nil else { return [] }
        if let kept = load(kind, root: root, url: url, verifier: verifier), kept.validators == validators { return [] }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // The bytes first: validators naming bytes that are not there yet are ignored.
        return [(kind.bytes, bytes), (kind.validators, try encoder.encode(validators))]
    }
}
