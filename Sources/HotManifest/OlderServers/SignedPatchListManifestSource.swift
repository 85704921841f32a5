import Foundation
import HotCore

/// Reads the older script-patch list whose MD5s the server signs with RSA, as JSPatch-era
/// patch servers publish it, and checks every signature before the list is used.
///
/// ## The format
///
/// The list is JSON, either a bare array or an object with a `patches` array:
///
/// ```json
/// [{"patchId": "fix-login", "url": "patches/fix-login-3.zip",
///   "md5": "5d41402abc4b2a76b9719d911017c592", "signature": "<base64>"}]
/// ```
///
/// - `patchId`: the patch's stable id, installed as the package id;
/// - `url`: the patch archive, absolute or relative to the list;
/// - `md5`: the MD5 of the archive, 32 hex digits;
/// - `signature`: base64 of the server's RSA "encryption" of that MD5 with its private key.
///
/// What is signed, exactly: the 32 **lowercase** ASCII hex digits of the archive's MD5, and
/// nothing else, padded with PKCS#1 v1.5 block type 1 and no hash or DigestInfo — what
/// `openssl_private_encrypt(md5_file($zip), …)` (JSPatch's packer) and
/// `printf %s "$md5" | openssl pkeyutl -sign -inkey private.pem` produce. The client
/// recovers the MD5 with the public key and compares it with the MD5 it computes over the
/// downloaded file: here the signature is checked against the list's `md5` (scheme
/// `PublicKey.Scheme.rsaPKCS1Raw`), and the engine then refuses an archive whose MD5
/// differs from it, before the archive is parsed.
///
/// A list with any bad or missing signature, unknown key, malformed MD5 or duplicate id is
/// refused whole: nothing is installed or removed, and the installed patches stay active.
/// Patch versions are their MD5s; a patch the list no longer names is removed (the list
/// replaces the client's list, as in the format's reference client), unless
/// ``removesUnlistedPatches`` is false. The archives' sizes are unknown, so each download is
/// bounded by the updater's `maxPackageBytes`.
///
/// ## What this format cannot protect against
///
/// The signatures cover each patch's MD5 only — not the list, its order, the patch ids,
/// the URLs, an app version or a date. Someone who can change the list (a compromised
/// server or CDN, or a network attacker where TLS is absent or broken) can therefore:
/// - **remove** any patch, or all of them, by leaving it out (the app runs unpatched);
/// - **roll back**: replay any patch ever signed with the key, under its own id or another;
/// - **freeze** the client on an old list forever: nothing expires;
/// - **stall or flood** the download: bounded here only by the updater's timeouts and
///   `maxPackageBytes`, since the list gives no size;
/// - exploit **MD5 collisions**: chosen-prefix collisions are cheap, so whoever can get the
///   publisher to sign one file (a contributed "harmless" patch) can substitute a second file
///   with the same MD5. MD5 also gives no second-preimage margin for the future.
///
/// RSA keys shorter than 2048 bits (JSPatch's example used 1024) are factorable by a
/// determined attacker. Use the signed native manifest for anything new; this source exists
/// to update apps already in the field that talk to such a server.
///
/// ```swift
/// let key = PublicKey(scheme: .rsaPKCS1Raw, pem: patchServerPublicPEM)
/// let source = SignedPatchListManifestSource(
///     url: URL(string: "https://patch.example.com/ios/3.2.0/patches.json")!,
///     transport: CurlTransport(), verifier: CryptoVerifier(), trustedKeys: [key])
/// let report = try await updater.sync(from: source)
/// ```
public struct SignedPatchListManifestSource: ManifestSource {
    /// One patch of a list, after its signature was checked.
    public struct Patch: Sendable, Hashable {
        /// The patch id.
        public var id: String
        /// The archive, absolute.
        public var url: URL
        /// The archive's MD5, as signed.
        public var md5: Digest
        /// The id (`Verifier.keyID(of:)`) of the trusted key whose signature verified.
        public var keyID: String
    }

    /// Where the list is.
    public var url: URL
    /// How to fetch it.
    public var transport: any Transport
    /// Checks the signatures.
    public var verifier: any Verifier
    /// The keys whose signatures are accepted; one valid signature by any of them suffices,
    /// so a server can move to a new key while clients still trust the old one. Keys
    /// normally use `PublicKey.Scheme.rsaPKCS1Raw`.
    public var trustedKeys: [PublicKey]
    /// Whether installed patches the list does not name are removed.
    public var removesUnlistedPatches: Bool
    /// The largest list accepted.
    public var maxBytes: Int64
    /// Time limits for fetching the list.
    public var timeouts: TransportRequest.Timeouts

    /// Creates a source.
    ///
    /// - Parameters:
    ///   - url: Where the list is.
    ///   - transport: How to fetch it.
    ///   - verifier: Checks the signatures, e.g. `CryptoVerifier()`.
    ///   - trustedKeys: The server's public keys (PEM), at least one.
    ///   - removesUnlistedPatches: Whether patches missing from the list are removed.
    ///   - maxBytes: The largest list accepted.
    ///   - timeouts: Time limits for fetching the list.
    public init(
        url: URL,
        transport: any Transport,
        verifier: any Verifier,
        trustedKeys: [PublicKey],
        removesUnlistedPatches: Bool = true,
        maxBytes: Int64 = 1 << 20,
        timeouts: TransportRequest.Timeouts = TransportRequest.Timeouts()
    ) {
        self.url = url
        self.transport = transport
        self.verifier = verifier
        self.trustedKeys = trustedKeys
        self.removesUnlistedPatches = removesUnlistedPatches
        self.maxBytes = maxBytes
        self.timeouts = timeouts
    }

    /// Fetches the list, checks every signature and returns the patches as a manifest.
    ///
    /// - Throws: `HotUpdateError.Code.signatureInvalid` when a signature is missing, does not
    ///   verify with any trusted key, or no key is trusted; `HotUpdateError.Code.manifestInvalid`
    ///   for a malformed list; the transport's errors.
    public func fetchManifest() async throws -> Manifest {
        let data = try await transport.fetchDocument(url: url, maxBytes: maxBytes, timeouts: timeouts)
        let patches = try verifiedPatches(in: data)
        let descriptors = try patches.map {
            try PackageDescriptor(id: $0.id, version: $0.md5.hex, url: $0.url, md5: $0.md5)
        }
        return try Manifest(schema: 0, packages: descriptors, isComplete: removesUnlistedPatches)
    }

    private struct Entry: Decodable {
        var patchId: String?
        var url: String?
        var md5: String?
        var signature: String?
    }

    private struct Wrapped: Decodable {
        var patches: [Entry]
    }

    /// Parses list bytes and checks every patch's signature.
    ///
    /// - Parameter data: The list as the server sent it.
    /// - Returns: The patches, in list order.
    /// - Throws: `HotUpdateError.Code.manifestInvalid` or `HotUpdateError.Code.signatureInvalid`,
    ///   naming the patch.
    public func verifiedPatches(in data: Data) throws -> [Patch] {
        guard !trustedKeys.isEmpty else {
            throw HotUpdateError(
                .signatureInvalid,
                "no trusted key is configured for the patch list",
                subject: url.absoluteString
            )
        }
        let entries: [Entry]
        if let list = try? JSONDecoder().decode([Entry].self, from: data) {
            entries = list
        } else {
            do {
                entries = try JSONDecoder().decode(Wrapped.self, from: data).patches
            } catch {
                throw HotUpdateError(
                    .manifestInvalid,
                    "the patch list is neither a JSON array of patches nor {\"patches\": […]}",
                    subject: url.absoluteString,
                    cause: SendableErrorBox(error)
                )
            }
        }
        let keyIDs = try trustedKeys.map { try verifier.keyID(of: $0) }
        return try entries.enumerated().map { index, entry in
            try verify(entry, at: index, keyIDs: keyIDs)
        }
    }

    private func verify(_ entry: Entry, at index: Int, keyIDs: [String]) throws -> Patch {
        guard let id = entry.patchId, !id.isEmpty else {
            throw HotUpdateError(
                .manifestInvalid,
                "patch \(index + 1) of the list has no patchId",
                subject: url.absoluteString
            )
        }
        try PackageDescriptor.validateComponent(id, what: "patchId")
        guard let urlString = entry.url, !urlString.isEmpty,
            let patchURL = URL(string: urlString, relativeTo: url)?.absoluteURL
        else {
            throw HotUpdateError(.manifestInvalid, "the patch has no usable url", packageID: id)
        }
        let md5: Digest
        do {
            md5 = try Digest(algorithm: .md5, hex: entry.md5 ?? "")
        } catch {
            throw HotUpdateError(
                .manifestInvalid,
                "md5 '\(entry.md5 ?? "")' is not 32 hex digits",
                packageID: id,
                cause: SendableErrorBox(error)
            )
        }
        guard let encoded = entry.signature, !encoded.isEmpty else {
            throw HotUpdateError(.signatureInvalid, "the patch has no signature", packageID: id)
        }
        guard let signature = Data(base64Encoded: encoded, options: .ignoreUnknownCharacters), !signature.isEmpty else {
            throw HotUpdateError(.signatureInvalid, "the signature is not base64", packageID: id)
        }
        let message = Data(md5.hex.utf8)
        for (key, keyID) in zip(trustedKeys, keyIDs)
        where try verifier.verify(signature: signature, of: message, with: key) {
            return Patch(id: id, url: patchURL, md5: md5, keyID: keyID)
        }
        throw HotUpdateError(
            .signatureInvalid,
            "the signature of md5 \(md5.hex) does not verify with any of the \(trustedKeys.count) trusted key(s)",
            packageID: id,
            subject: url.absoluteString
        )
    }
}
