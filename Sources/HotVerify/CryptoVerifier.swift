import Foundation
import HotCore

/// Computes digests and checks signatures with the platform's crypto library:
/// libcrypto (OpenSSL 3) by default on Linux (the package's `Libcrypto` trait); swift-crypto on
/// Apple platforms (where it is CryptoKit) and, with the package's `SwiftCrypto` trait, on Linux
/// too. A Linux build with neither trait has no crypto library: every call throws
/// `HotUpdateError.Code.unsupported`.
///
/// Digests: MD5 (for older servers) and SHA-256. Signatures: Ed25519,
/// RSA PKCS#1 v1.5 with SHA-256, RSA-PSS with SHA-256, MGF1-SHA-256 and a 32-byte salt,
/// and, for older patch servers, RSA PKCS#1 v1.5 over the raw message (`PublicKey.Scheme.rsaPKCS1Raw`).
/// Keys are PEM SubjectPublicKeyInfo (`-----BEGIN PUBLIC KEY-----`), as
/// `openssl pkey -pubout` writes them.
///
/// ```swift
/// let verifier = CryptoVerifier()
/// let key = PublicKey(scheme: .ed25519, pem: trustedPEM)
/// guard try verifier.verify(signature: signature, of: manifestBytes, with: key) else {
///     throw HotUpdateError(.signatureInvalid, "the manifest is not signed by \(try verifier.keyID(of: key))")
/// }
/// let digest = try verifier.digest(ofFile: archive, using: .sha256)
/// ```
public struct CryptoVerifier: Verifier {
    /// The signature schemes ``verify(signature:of:with:)`` checks.
    public static let supportedSchemes: Set<PublicKey.Scheme> = [
        .ed25519, .rsaPKCS1SHA256, .rsaPSSSHA256, .rsaPKCS1Raw,
    ]

    /// The library this build verifies and signs with: `"libcrypto"`, `"swift-crypto"`, or
    /// `"none"` where HotVerify has no crypto library.
    public static let backendName: String = CryptoBackend.name

    /// Creates a verifier. It holds no state; make as many as you like.
    public init() {}

    /// MD5 and SHA-256 (empty on a platform with no crypto library).
    public var supportedDigests: Set<Digest.Algorithm> { CryptoBackend.supportedDigests }

    /// Returns a fresh ``CryptoHasher``.
    ///
    /// - Parameter algorithm: `Digest.Algorithm.md5` or `Digest.Algorithm.sha256`.
    /// - Throws: `HotUpdateError.Code.unsupported` for any other algorithm.
    public func makeHasher(for algorithm: Digest.Algorithm) throws -> any DigestHasher {
        try CryptoHasher(algorithm: algorithm)
    }

    /// Checks `signature` over exactly `message` with `key`.
    ///
    /// A signature that does not verify (wrong key, altered message, altered or malformed
    /// signature) returns `false`; only an unusable key throws.
    ///
    /// - Parameters:
    ///   - signature: The raw signature bytes (64 for Ed25519, the modulus size for RSA).
    ///   - message: The signed bytes.
    ///   - key: The trusted key and the scheme its signatures use.
    /// - Returns: Whether the signature is valid.
    /// - Throws: `HotUpdateError.Code.signatureInvalid` when the PEM cannot be read or the
    ///   key's type does not fit its scheme (an RSA key given as Ed25519, say);
    ///   `HotUpdateError.Code.unsupported` for a scheme not in ``supportedSchemes``.
    public func verify(signature: Data, of message: Data, with key: PublicKey) throws -> Bool {
        guard Self.supportedSchemes.contains(key.scheme) else {
            throw HotUpdateError(
                .unsupported,
                "signature scheme '\(key.scheme)' is not supported "
                    + "(supported: ed25519, rsa-pkcs1-sha256, rsa-pss-sha256, rsa-pkcs1-raw)"
            )
        }
        return try CryptoBackend.verify(signature: signature, of: message, with: key)
    }

    /// The SHA-256 of the key's DER SubjectPublicKeyInfo, in lowercase hex: the same as
    /// `openssl pkey -pubin -outform DER | sha256sum`.
    ///
    /// - Throws: `HotUpdateError.Code.signatureInvalid` when the PEM cannot be read.
    public func keyID(of key: PublicKey) throws -> String {
        try CryptoBackend.keyID(ofPEM: key.pem)
    }

    /// Digests a file, reading it in 1 MiB chunks into one reused buffer.
    ///
    /// The same result as the `Verifier` extension method, without a `Data` allocation per chunk.
    ///
    /// ```swift
    /// let sha = try CryptoVerifier().digest(ofFile: archiveURL, using: .sha256)
    /// ```
    ///
    /// - Throws: `HotUpdateError.Code.fileSystem` naming the file when it cannot be opened or
    ///   read; `HotUpdateError.Code.unsupported` for an algorithm not in ``supportedDigests``.
    public func digest(ofFile url: URL, using algorithm: Digest.Algorithm) throws -> Digest {
        let hasher = try CryptoHasher(algorithm: algorithm)
        try FileChunks.forEachChunk(of: url) { hasher.update($0) }
        return hasher.finalize()
    }

    /// The error for a key whose type does not fit its scheme.
    static func keyTypeMismatch(_ scheme: PublicKey.Scheme, found: String) -> HotUpdateError {
        HotUpdateError(
            .signatureInvalid,
            "the key is a \(found) key but its scheme '\(scheme)' needs \(scheme == .ed25519 ? "an Ed25519" : "an RSA") key"
        )
    }

    /// The error for an algorithm this verifier lacks.
    static func unsupportedDigest(_ algorithm: Digest.Algorithm) -> HotUpdateError {
        HotUpdateError(.unsupported, "digest algorithm '\(algorithm)' is not supported (supported: md5, sha256)")
    }
}
