import Foundation
import HotCore

/// A `Verifier` with deterministic, non-cryptographic digests of the right lengths
/// (FNV-1a lanes), and signatures that are valid when they equal
/// `"signed:" + keyPEM + ":" + message`, for the engine's unit tests. Never use it to
/// protect anything.
///
/// ```swift
/// let verifier = FakeVerifier()
/// let sha = try verifier.digest(of: packageBytes, using: .sha256)
/// ```
public struct FakeVerifier: Verifier {
    /// Creates a verifier.
    public init() {}

    public var supportedDigests: Set<DigestAlgorithm> { [.sha256, .md5] }

    public func makeHasher(for algorithm: DigestAlgorithm) throws -> any DigestHasher {
        guard supportedDigests.contains(algorithm) else {
            throw HotUpdateError(.unsupported, "the fake verifier has no \(algorithm)")
        }
        return FakeHasher(algorithm: algorithm)
    }

    public func verify(signature: Data, of message: Data, with key: PublicKey) throws -> Bool {
        signature == Self.sign(message, with: key)
    }

    public func keyID(of key: PublicKey) throws -> String {
        try digest(of: Data(key.pem.utf8), using: .sha256).hex
    }

    /// The signature ``verify(signature:of:with:)`` accepts.
    public static func sign(_ message: Data, with key: PublicKey) -> Data {
        Data("signed:\(key.pem):".utf8) + message
    }
}

/// FNV-1a over several lanes, each seeded differently; deterministic and fast enough for tests.
final class FakeHasher: DigestHasher {
    let algorithm: DigestAlgorithm
    private var lanes: [UInt64]

    init(algorithm: DigestAlgorithm) {
        self.algorithm = algorithm
        let count = (algorithm.byteCount + 7) / 8
        lanes = (0..<count).map { 0xcbf2_9ce4_8422_2325 &+ UInt64($0) &* 0x9e37_79b9_7f4a_7c15 }
    }

    func update(_ bytes: UnsafeRawBufferPointer) {
        for byte in bytes {
            for index in lanes.indices {
                lanes[index] = (lanes[index] ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
            }
        }
    }

    func finalize() -> Digest {
        var bytes: [UInt8] = []
        for lane in lanes {
            withUnsafeBytes(of: lane.bigEndian) { bytes.append(contentsOf: $0) }
        }
        // Lanes cover at least byteCount bytes, so the length always fits.
        guard let digest = try? Digest(algorithm: algorithm, bytes: Array(bytes.prefix(algorithm.byteCount))) else {
            preconditionFailure("fake digest lanes are shorter than \(algorithm)")
        }
        return digest
    }
}
