#if !canImport(CHotCrypto) && canImport(CryptoKit)
import CryptoKit
import Foundation
import HotCore
#if canImport(Security)
import Security
#endif

/// An incremental MD5 or SHA-256 over CryptoKit.
///
/// Used by one task at a time. ``finalize()`` may be called again and returns the same
/// digest; bytes added after it are ignored.
///
/// ```swift
/// let hasher = try CryptoHasher(algorithm: .sha256)
/// for try await chunk in response.body { hasher.update(chunk) }
/// let digest = hasher.finalize()
/// ```
public final class CryptoHasher: DigestHasher {
    /// The algorithm this hasher computes.
    public let algorithm: Digest.Algorithm
    private var md5: Insecure.MD5?
    private var sha256: SHA256?
    private var result: Digest?

    /// Creates a hasher.
    ///
    /// - Parameter algorithm: ``Digest/Algorithm/md5`` or ``Digest/Algorithm/sha256``.
    /// - Throws: `HotUpdateError.Code.unsupported` for another algorithm.
    public init(algorithm: Digest.Algorithm) throws {
        switch algorithm {
        case .sha256: sha256 = SHA256()
        case .md5: md5 = Insecure.MD5()
        default: throw CryptoVerifier.unsupportedDigest(algorithm)
        }
        self.algorithm = algorithm
    }

    /// Adds bytes.
    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard result == nil, !bytes.isEmpty else { return }
        sha256?.update(bufferPointer: bytes)
        md5?.update(bufferPointer: bytes)
    }

    /// Returns the digest of everything added.
    public func finalize() -> Digest {
        if let result { return result }
        let bytes: [UInt8]
        if let sha256 {
            bytes = Array(sha256.finalize())
        } else if let md5 {
            bytes = Array(md5.finalize())
        } else {
            bytes = []
        }
        guard let digest = try? Digest(algorithm: algorithm, bytes: bytes) else {
            preconditionFailure("CryptoKit returned \(bytes.count) bytes for a \(algorithm) digest")
        }
        result = digest
        return digest
    }
}

/// Signatures and key ids over CryptoKit (Ed25519) and Security (RSA).
enum CryptoBackend {
    static let supportedDigests: Set<Digest.Algorithm> = [.md5, .sha256]

    static func verify(signature: Data, of message: Data, with key: PublicKey) throws -> Bool {
        let info = try SubjectPublicKeyInfo(pem: key.pem)
        guard info.fits(key.scheme) else {
            throw CryptoVerifier.keyTypeMismatch(key.scheme, found: info.algorithmName)
        }
        if key.scheme == .ed25519 {
            let publicKey: Curve25519.Signing.PublicKey
            do {
                publicKey = try Curve25519.Signing.PublicKey(rawRepresentation: info.keyBits)
            } catch {
                throw HotUpdateError.wrap(error, as: .signatureInvalid, "the Ed25519 key is malformed")
            }
            return publicKey.isValidSignature(signature, for: message)
        }
        #if canImport(Security)
        let attributes: [CFString: Any] = [
            kSecAttrKeyType: kSecAttrKeyTypeRSA,
            kSecAttrKeyClass: kSecAttrKeyClassPublic,
        ]
        let der = Data(try info.rsaPublicKeyDER())
        var error: Unmanaged<CFError>?
        guard let secKey = SecKeyCreateWithData(der as CFData, attributes as CFDictionary, &error) else {
            let reason = error.map { String(describing: $0.takeRetainedValue()) } ?? "no detail"
            throw HotUpdateError(.signatureInvalid, "Security cannot read the RSA key: \(reason)")
        }
        // Security's PSS uses MGF1 with the same hash and a salt as long as the digest.
        // rsa-pkcs1-raw: PKCS#1 v1.5 padding over the message as given, no DigestInfo.
        let algorithm: SecKeyAlgorithm =
            switch key.scheme {
            case .rsaPSSSHA256: .rsaSignatureMessagePSSSHA256
            case .rsaPKCS1Raw: .rsaSignatureDigestPKCS1v15Raw
            default: .rsaSignatureMessagePKCS1v15SHA256
            }
        var verifyError: Unmanaged<CFError>?
        let valid = SecKeyVerifySignature(secKey, algorithm, message as CFData, signature as CFData, &verifyError)
        verifyError?.release()
        return valid
        #else
        throw HotUpdateError(.unsupported, "RSA signatures need the Security framework, absent on this platform")
        #endif
    }

    static func keyID(ofPEM pem: String) throws -> String {
        let info = try SubjectPublicKeyInfo(pem: pem)
        let hasher = try CryptoHasher(algorithm: .sha256)
        info.der.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize().hex
    }
}
#endif
