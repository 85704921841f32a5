// A build with no crypto library: off Apple platforms with neither the `Libcrypto` trait (on by
// default) nor `SwiftCrypto` (`--disable-default-traits` alone), or where libcrypto is missing.
// CryptoVerifier and CryptoSigner exist and throw `unsupported`; an app brings its own Verifier.
#if !SwiftCrypto && !canImport(Darwin) && !(Libcrypto && canImport(CHotCrypto))
import Foundation
import HotCore

/// A hasher in a build with neither libcrypto nor swift-crypto: it cannot be created.
public final class CryptoHasher: DigestHasher {
    /// The algorithm this hasher would compute.
    public let algorithm: Digest.Algorithm

    /// Always throws: this build has no crypto library HotVerify can use.
    ///
    /// - Throws: `HotUpdateError.Code.unsupported`.
    public init(algorithm: Digest.Algorithm) throws {
        throw HotUpdateError(.unsupported, CryptoBackend.missing)
    }

    /// Adds bytes.
    public func update(_ bytes: UnsafeRawBufferPointer) {}

    /// Never reached: no instance can exist.
    public func finalize() -> Digest {
        preconditionFailure("CryptoHasher cannot be created in this build")
    }
}

/// No signatures without a crypto library.
enum CryptoBackend {
    /// Why every call throws.
    static let missing =
        "no crypto library in this build of HotVerify: build it with the package trait 'Libcrypto' "
        + "(on by default) or 'SwiftCrypto'"
    static let name = "none"
    static let supportedDigests: Set<Digest.Algorithm> = []

    static func verify(signature: Data, of message: Data, with key: PublicKey) throws -> Bool {
        throw HotUpdateError(.unsupported, CryptoBackend.missing)
    }

    static func keyID(ofPEM pem: String) throws -> String {
        throw HotUpdateError(.unsupported, CryptoBackend.missing)
    }
}

/// No signing without a crypto library.
enum SigningBackend {
    private static var unavailable: HotUpdateError {
        HotUpdateError(.unsupported, CryptoBackend.missing)
    }
    static func generate(_ kind: KeyKind) throws -> String { throw unavailable }
    static func publicKey(ofPrivatePEM pem: String) throws -> (String, Bool) { throw unavailable }
    static func sign(_ message: Data, privatePEM: String, scheme: PublicKey.Scheme) throws -> Data { throw unavailable }
}
#endif
