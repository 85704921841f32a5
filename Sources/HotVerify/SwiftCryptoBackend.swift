// The backend Apple platforms compile, and Linux with the `SwiftCrypto` trait: swift-crypto's
// `Crypto` (CryptoKit itself on Apple platforms, the same API over BoringSSL elsewhere) and
// `_CryptoExtras` (RSA). One file for both, so the code an iOS app runs is the code tested here.
#if SwiftCrypto || canImport(Darwin)
import Crypto
import Foundation
import HotCore
import _CryptoExtras

/// An incremental MD5 or SHA-256 over swift-crypto (CryptoKit on Apple platforms).
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
    public let algorithm: HotCore.Digest.Algorithm
    private var md5: Insecure.MD5?
    private var sha256: SHA256?
    private var result: HotCore.Digest?

    /// Creates a hasher.
    ///
    /// - Parameter algorithm: `Digest.Algorithm.md5` or `Digest.Algorithm.sha256`.
    /// - Throws: `HotUpdateError.Code.unsupported` for another algorithm.
    public init(algorithm: HotCore.Digest.Algorithm) throws {
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
    public func finalize() -> HotCore.Digest {
        if let result { return result }
        let bytes: [UInt8]
        if let sha256 {
            bytes = Array(sha256.finalize())
        } else if let md5 {
            bytes = Array(md5.finalize())
        } else {
            bytes = []
        }
        guard let digest = try? HotCore.Digest(algorithm: algorithm, bytes: bytes) else {
            preconditionFailure("swift-crypto returned \(bytes.count) bytes for a \(algorithm) digest")
        }
        result = digest
        return digest
    }
}

/// Signatures and key ids over swift-crypto: Ed25519 from `Crypto`, RSA PSS and PKCS#1 v1.5
/// from `_CryptoExtras`, and the raw PKCS#1 check of older patch lists in ``RawPKCS1Verifier``.
enum CryptoBackend {
    /// The library behind ``CryptoVerifier`` and ``CryptoSigner`` in this build.
    static let name = "swift-crypto"

    static let supportedDigests: Set<HotCore.Digest.Algorithm> = [.md5, .sha256]

    static func verify(signature: Data, of message: Data, with key: PublicKey) throws -> Bool {
        let info = try SubjectPublicKeyInfo(pem: key.pem)
        guard info.fits(key.scheme) else {
            throw CryptoVerifier.keyTypeMismatch(key.scheme, found: info.algorithmName)
        }
        switch key.scheme {
        case .ed25519:
            let publicKey: Curve25519.Signing.PublicKey
            do {
                publicKey = try Curve25519.Signing.PublicKey(rawRepresentation: info.keyBits)
            } catch {
                throw HotUpdateError.wrap(error, as: .signatureInvalid, "the Ed25519 key is malformed")
            }
            return publicKey.isValidSignature(signature, for: message)
        case .rsaPKCS1Raw:
            return try RawPKCS1Verifier(rsaPublicKeyDER: info.rsaPublicKeyDER()).isValid(
                signature: signature,
                of: message
            )
        default:
            // PSS: MGF1 with SHA-256 and a salt as long as the digest, as libcrypto's
            // RSA_PSS_SALTLEN_DIGEST. Keys from 1,024 bits, as libcrypto accepts them.
            let publicKey: _RSA.Signing.PublicKey
            do {
                publicKey = try _RSA.Signing.PublicKey(unsafeDERRepresentation: info.der)
            } catch {
                throw HotUpdateError.wrap(error, as: .signatureInvalid, "swift-crypto cannot read the RSA key")
            }
            let padding: _RSA.Signing.Padding = key.scheme == .rsaPSSSHA256 ? .PSS : .insecurePKCS1v1_5
            return publicKey.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature),
                for: message,
                padding: padding
            )
        }
    }

    static func keyID(ofPEM pem: String) throws -> String {
        let info = try SubjectPublicKeyInfo(pem: pem)
        let hasher = try CryptoHasher(algorithm: .sha256)
        info.der.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize().hex
    }
}

/// Key generation and signing over swift-crypto. Keys are read and written as PEM PKCS#8,
/// the same bytes `openssl genpkey` and the libcrypto backend write.
enum SigningBackend {
    static func generate(_ kind: KeyKind) throws -> String {
        if kind.scheme == .ed25519 {
            return PEM.encode(
                PrivateKeyInfo.ed25519(seed: Array(Curve25519.Signing.PrivateKey().rawRepresentation)),
                label: "PRIVATE KEY"
            )
        }
        do {
            let key = try _RSA.Signing.PrivateKey(keySize: _RSA.Signing.KeySize(bitCount: kind.bits))
            return PEM.encode(Array(key.pkcs8DERRepresentation), label: "PRIVATE KEY")
        } catch {
            throw HotUpdateError.wrap(error, as: .unsupported, "swift-crypto cannot generate \(kind) keys")
        }
    }

    /// The public PEM of a private key, and whether it is RSA.
    static func publicKey(ofPrivatePEM pem: String) throws -> (String, Bool) {
        switch try PrivateSigningKey(pem: pem) {
        case .ed25519(let key):
            return (
                PEM.encode(
                    SubjectPublicKeyInfo.ed25519DER(Array(key.publicKey.rawRepresentation)),
                    label: "PUBLIC KEY"
                ), false
            )
        case .rsa(let key):
            return (PEM.encode(Array(key.publicKey.derRepresentation), label: "PUBLIC KEY"), true)
        }
    }

    static func sign(_ message: Data, privatePEM: String, scheme: PublicKey.Scheme) throws -> Data {
        do {
            switch try PrivateSigningKey(pem: privatePEM) {
            case .ed25519(let key):
                guard scheme == .ed25519 else { throw CryptoVerifier.keyTypeMismatch(scheme, found: "Ed25519") }
                return try key.signature(for: message)
            case .rsa(let key):
                let padding: _RSA.Signing.Padding
                switch scheme {
                case .rsaPSSSHA256: padding = .PSS
                case .rsaPKCS1SHA256: padding = .insecurePKCS1v1_5
                default: throw CryptoVerifier.keyTypeMismatch(scheme, found: "RSA")
                }
                return try key.signature(for: message, padding: padding).rawRepresentation
            }
        } catch {
            throw HotUpdateError.wrap(error, as: .signatureInvalid, "swift-crypto failed to sign with \(scheme)")
        }
    }
}

/// A private key read from PEM: PKCS#8 Ed25519 or RSA, or PKCS#1 RSA.
private enum PrivateSigningKey {
    case ed25519(Curve25519.Signing.PrivateKey)
    case rsa(_RSA.Signing.PrivateKey)

    init(pem: String) throws {
        let block = try PEM.decode(pem, what: "private key")
        let rsaDER: [UInt8]
        switch block.label {
        case "PRIVATE KEY":
            let info = try PrivateKeyInfo(der: block.der)
            switch info.algorithmOID {
            case SubjectPublicKeyInfo.ed25519OID:
                do {
                    self = .ed25519(try Curve25519.Signing.PrivateKey(rawRepresentation: try info.ed25519Seed()))
                } catch {
                    throw HotUpdateError.wrap(error, as: .signatureInvalid, "the Ed25519 private key is malformed")
                }
                return
            case SubjectPublicKeyInfo.rsaEncryptionOID:
                rsaDER = block.der
            default:
                throw HotUpdateError(
                    .signatureInvalid,
                    "the private key is OID \(info.algorithmOID), not Ed25519 or RSA"
                )
            }
        case "RSA PRIVATE KEY":
            rsaDER = block.der
        default:
            throw HotUpdateError(
                .signatureInvalid,
                "the key is not an unencrypted PEM private key ('-----BEGIN PRIVATE KEY-----'): it is '\(block.label)'"
            )
        }
        do {
            self = .rsa(try _RSA.Signing.PrivateKey(derRepresentation: rsaDER))
        } catch {
            throw HotUpdateError.wrap(error, as: .signatureInvalid, "swift-crypto cannot read the RSA private key")
        }
    }
}
#endif
