import Foundation
import HotCore
import HotManifest
import HotVerify

/// Where a publisher's signing key lives, as `hot sign --key` names it: a PEM file (PKCS#8,
/// Ed25519 or RSA) or a key in a PKCS#11 token (`pkcs11:…`, RFC 7512).
///
/// ```swift
/// let signers = try ["release.key", "pkcs11:token=release;object=release-ed25519?module-path=…&pin-source=file:pin"]
///     .map { try ReleaseKey.signer($0) }
/// ```
public enum ReleaseKey {
    /// The signer for `reference`: ``PKCS11Signer`` for a `pkcs11:` URI, `CryptoSigner` for a
    /// PEM file.
    ///
    /// - Parameters:
    ///   - reference: A path to a PEM private key, or a `pkcs11:` URI.
    ///   - rsaScheme: The scheme an RSA key signs with (RSA-PSS with SHA-256 by default).
    /// - Throws: `HotUpdateError.Code.notFound` for a file that cannot be read, and what
    ///   `CryptoSigner` or ``PKCS11Signer`` throw for the key itself.
    public static func signer(_ reference: String, rsaScheme: PublicKey.Scheme = .rsaPSSSHA256) throws -> any Signer {
        if PKCS11Signer.isURI(reference) { return try PKCS11Signer(uri: reference, rsaScheme: rsaScheme) }
        let pem: String
        do {
            pem = try String(contentsOfFile: reference, encoding: .utf8)
        } catch {
            throw HotUpdateError.wrap(error, as: .notFound, "cannot read the private key \(reference)")
        }
        return try CryptoSigner(privateKeyPEM: pem, rsaScheme: rsaScheme)
    }
}
