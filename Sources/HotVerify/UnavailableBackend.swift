#if !SwiftCrypto && !canImport(Darwin) && !canImport(CHotCrypto)
import Foundation
import HotCore

/// A hasher on a platform with neither libcrypto nor CryptoKit: it cannot be created.
public final class CryptoHasher: DigestHasher {
    /// The algorithm this hasher would compute.
    public let algorithm: Digest.Algorithm

    /// Always throws: this platform has no crypto library HotVerify can use.
    ///
    /// - Throws: `HotUpdateError.Code.unsupported`.
    public init(algorithm: Digest.Algorithm) throws {
        throw HotUpdateError(
            .unsupported,
            "no crypto library on this platform (libcrypto, or swift-crypto with the SwiftCrypto trait)"
        )
    }

    /// Adds bytes.
    public func update(_ bytes: UnsafeRawBufferPointer) {}

    /// Never reached: no instance can exist.
    public func finalize() -> Digest {
        preconditionFailure("CryptoHasher cannot be created on this platform")
    }
}

/// No signatures without a crypto library.
enum CryptoBackend {
    static let name = "none"
    static let supportedDigests: Set<Digest.Algorithm> = []

    static func verify(signature: Data, of message: Data, with key: PublicKey) throws -> Bool {
        throw HotUpdateError(
            .unsupported,
            "no crypto library on this platform (libcrypto, or swift-crypto with the SwiftCrypto trait)"
        )
    }

    static func keyID(ofPEM pem: String) throws -> String {
        throw HotUpdateError(
            .unsupported,
            "no crypto library on this platform (libcrypto, or swift-crypto with the SwiftCrypto trait)"
        )
    }
}

/// No signing without a crypto library.
enum SigningBackend {
    private static var unavailable: HotUpdateError {
        HotUpdateError(.unsupported, "signing and key generation need a crypto library, which this build does not link")
    }
    static func generate(_ kind: KeyKind) throws -> String { throw unavailable }
    static func publicKey(ofPrivatePEM pem: String) throws -> (String, Bool) { throw unavailable }
    static func sign(_ message: Data, privatePEM: String, scheme: PublicKey.Scheme) throws -> Data { throw unavailable }
}
#endif
