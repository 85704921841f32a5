import Foundation
import HotCore

/// Signs bytes with a private key: the publisher's side of `Verifier`.
///
/// Implementation: `CryptoSigner` (in `HotVerify`, over libcrypto). `hot sign` uses it to
/// sign a repository's manifest; apps never need one.
///
/// ```swift
/// let signer = try CryptoSigner(privateKeyPEM: pem)
/// let envelope = try SignedEnvelope.sign(body, with: [signer], verifier: CryptoVerifier())
/// ```
public protocol Signer: Sendable {
    /// The public half of the key, with the scheme its signatures use.
    var publicKey: PublicKey { get }

    /// Signs exactly `message`.
    ///
    /// - Returns: The raw signature bytes.
    /// - Throws: `HotUpdateError.Code.signatureInvalid` when the key cannot sign.
    func sign(_ message: Data) throws -> Data
}
