import Foundation
import HotCore
import HotManifest

/// The kind of key ``CryptoSigner/generate(_:)`` makes.
public struct KeyKind: Sendable, Hashable, CustomStringConvertible {
    /// The scheme signatures by such a key use.
    public let scheme: PublicKey.Scheme
    /// The RSA modulus size in bits; 0 for Ed25519.
    public let bits: Int

    /// Ed25519: small keys and signatures, fast, the default.
    public static let ed25519 = KeyKind(scheme: .ed25519, bits: 0)
    /// RSA-3072 signing with RSA-PSS and SHA-256.
    public static let rsa3072 = KeyKind(scheme: .rsaPSSSHA256, bits: 3072)

    /// RSA of `bits` (2048 or more) signing with `scheme` (PSS or PKCS#1 v1.5, SHA-256).
    public static func rsa(bits: Int, scheme: PublicKey.Scheme = .rsaPSSSHA256) -> KeyKind {
        KeyKind(scheme: scheme, bits: bits)
    }

    public var description: String { bits == 0 ? "\(scheme)" : "RSA-\(bits) \(scheme)" }
}

/// Signs with a private key: the publisher's half of ``CryptoVerifier``, over the same library
/// (libcrypto by default on Linux, the `Libcrypto` trait; swift-crypto on Apple platforms and with
/// the `SwiftCrypto` trait).
///
/// Keys are PEM PKCS#8 (`-----BEGIN PRIVATE KEY-----`), as `openssl genpkey` writes them;
/// signatures verify with `openssl pkeyutl -verify` and with ``CryptoVerifier`` of either
/// library. Where HotVerify has no crypto library at all, every call throws
/// `HotUpdateError.Code.unsupported`.
///
/// ```swift
/// let signer = try CryptoSigner.generate(.ed25519)
/// try signer.privateKeyPEM.write(to: privateFile, atomically: true, encoding: .utf8)
/// let signature = try signer.sign(Data("manifest bytes".utf8))
/// #expect(try CryptoVerifier().verify(signature: signature, of: Data("manifest bytes".utf8), with: signer.publicKey))
/// ```
public struct CryptoSigner: Signer {
    /// The private key, PEM PKCS#8. Keep it secret.
    public let privateKeyPEM: String
    /// The public key and the scheme signatures use.
    public let publicKey: PublicKey

    /// Reads a private key.
    ///
    /// - Parameters:
    ///   - privateKeyPEM: PEM PKCS#8 (`-----BEGIN PRIVATE KEY-----`), Ed25519 or RSA.
    ///   - rsaScheme: The scheme for an RSA key: `PublicKey.Scheme.rsaPSSSHA256` (default)
    ///     or `PublicKey.Scheme.rsaPKCS1SHA256`. Ignored for Ed25519.
    /// - Throws: `HotUpdateError.Code.signatureInvalid` when the PEM is not such a key;
    ///   `HotUpdateError.Code.unsupported` where HotVerify has no signing backend.
    public init(privateKeyPEM: String, rsaScheme: PublicKey.Scheme = .rsaPSSSHA256) throws {
        let (publicPEM, isRSA) = try SigningBackend.publicKey(ofPrivatePEM: privateKeyPEM)
        self.privateKeyPEM = privateKeyPEM
        self.publicKey = PublicKey(scheme: isRSA ? rsaScheme : .ed25519, pem: publicPEM)
    }

    /// Generates a new key.
    ///
    /// - Parameter kind: ``KeyKind/ed25519`` (default) or an RSA kind.
    /// - Throws: `HotUpdateError.Code.invalidArgument` for an RSA size below 2048;
    ///   `HotUpdateError.Code.unsupported` where HotVerify has no signing backend.
    public static func generate(_ kind: KeyKind = .ed25519) throws -> CryptoSigner {
        if kind.scheme != .ed25519, kind.bits < 2048 {
            throw HotUpdateError(.invalidArgument, "RSA keys of \(kind.bits) bits are too small (2048 at least)")
        }
        return try CryptoSigner(privateKeyPEM: try SigningBackend.generate(kind), rsaScheme: kind.scheme)
    }

    /// Signs exactly `message` with the key's scheme.
    ///
    /// - Throws: `HotUpdateError.Code.signatureInvalid` when the key cannot sign with its scheme.
    public func sign(_ message: Data) throws -> Data {
        try SigningBackend.sign(message, privatePEM: privateKeyPEM, scheme: publicKey.scheme)
    }
}

extension CryptoVerifier {
    /// Reads a PEM public key and picks its scheme from the key's algorithm: Ed25519 keys
    /// sign with `PublicKey.Scheme.ed25519`, RSA keys with `rsaScheme`.
    ///
    /// - Throws: `HotUpdateError.Code.signatureInvalid` when the PEM is not a public key
    ///   of either kind.
    public static func publicKey(pem: String, rsaScheme: PublicKey.Scheme = .rsaPSSSHA256) throws -> PublicKey {
        let info = try SubjectPublicKeyInfo(pem: pem)
        switch info.algorithmOID {
        case SubjectPublicKeyInfo.ed25519OID: return PublicKey(scheme: .ed25519, pem: pem)
        case SubjectPublicKeyInfo.rsaEncryptionOID, SubjectPublicKeyInfo.rsaPSSOID:
            return PublicKey(scheme: rsaScheme, pem: pem)
        default:
            throw HotUpdateError(
                .signatureInvalid,
                "the key is \(info.algorithmName), not an Ed25519 or RSA key"
            )
        }
    }
}
