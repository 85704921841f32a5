import Foundation
import HotCore

/// The last signed manifest a ``SignedManifestSource`` accepted, kept under the store root
/// with the validators it was served with, so the next check asks the server whether it
/// changed (`If-None-Match`, `If-Modified-Since`) and a `304 Not Modified` costs no body.
///
/// The bytes stand for a 304 answer only: each time they are used, their signatures, version
/// and expiry are checked again as if just downloaded, so a 304 never extends trust, and a
/// server that answers 304 for ever freezes nothing past the manifest's expiry. Kept bytes
/// that no longer match their recorded SHA-256 are ignored (the next request asks for the
/// whole manifest). The store writes both files, under its lock, only when they change.
struct KeptManifest: Sendable, Hashable {
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
    /// The manifest's bytes as served.
    var bytes: Data

    /// The kept manifest for `url` under `root`, or nil when there is none, it was served at
    /// another URL, carries no validator, or its bytes do not match their SHA-256.
    static func load(root: URL, url: URL, verifier: any Verifier) -> KeptManifest? {
        guard let recorded = try? StoreStateFile.keptManifestValidators.read(root: root),
            let validators = try? JSONDecoder().decode(Validators.self, from: recorded),
            validators.url == url.absoluteString, validators.etag != nil || validators.lastModified != nil,
            let bytes = try? StoreStateFile.keptManifest.read(root: root),
            (try? verifier.digest(of: bytes, using: .sha256).hex) == validators.sha256
        else { return nil }
        return KeptManifest(validators: validators, bytes: bytes)
    }

    /// The headers that ask the server for the manifest only if it changed.
    var conditionalHeaders: [String: String] {
        var headers: [String: String] = [:]
        if let etag = validators.etag { headers["If-None-Match"] = etag }
        if let lastModified = validators.lastModified { headers["If-Modified-Since"] = lastModified }
        return headers
    }

    /// Keeps `bytes`, accepted from `url` with `headers`, when they or their validators differ
    /// from what is kept; nothing is written otherwise. A response with neither an `ETag` nor
    /// a `Last-Modified` keeps nothing.
    ///
    /// - Throws: `HotUpdateError.Code.fileSystem` when the store cannot write them.
    static func keep(
        _ bytes: Data,
        from url: URL,
        headers: [String: String],
        root: URL,
        verifier: any Verifier,
        wait: StoreLockWait
    ) throws {
        let validators = Validators(
            url: url.absoluteString,
            etag: headers["etag"],
            lastModified: headers["last-modified"],
            sha256: try verifier.digest(of: bytes, using: .sha256).hex
        )
        guard validators.etag != nil || validators.lastModified != nil else { return }
        if let kept = load(root: root, url: url, verifier: verifier), kept.validators == validators { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // The bytes first: validators naming bytes that are not there yet are ignored.
        try StoreStateFile.replace(
            [(.keptManifest, bytes), (.keptManifestValidators, try encoder.encode(validators))],
            root: root,
            wait: wait
        )
    }
}
