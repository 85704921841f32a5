#if !canImport(CHotCrypto) && !canImport(CryptoKit)
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
        throw HotUpdateError(.unsupported, "no crypto library (libcrypto or CryptoKit) on this platform")
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
    static let supportedDigests: Set<Digest.Algorithm> = []

    static func verify(signature: Data, of message: Data, with key: PublicKey) throws -> Bool {
        throw HotUpdateError(.unsupported, "no crypto library (libcrypto or CryptoKit) on this platform")
    }

    static func keyID(ofPEM pem: String) throws -> String {
        throw HotUpdateError(.unsupported, "no crypto library (libcrypto or CryptoKit) on this platform")
    }
}
#endif
