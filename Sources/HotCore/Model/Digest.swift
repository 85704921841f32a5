/// A digest value: the algorithm and its bytes.
///
/// ```swift
/// let expected = try Digest(algorithm: .sha256, hex: manifestEntry.sha256)
/// ```
public struct Digest: Hashable, Sendable, CustomStringConvertible {
    /// The algorithm that produced the bytes.
    public let algorithm: Digest.Algorithm
    /// The raw digest.
    public let bytes: [UInt8]

    /// Creates a digest from raw bytes.
    ///
    /// - Throws: ``HotUpdateError/Code/invalidArgument`` when the length does not fit the algorithm.
    public init(algorithm: Digest.Algorithm, bytes: [UInt8]) throws {
        guard bytes.count == algorithm.byteCount else {
            throw HotUpdateError(
                .invalidArgument,
                "a \(algorithm) digest has \(algorithm.byteCount) bytes, not \(bytes.count)"
            )
        }
        self.algorithm = algorithm
        self.bytes = bytes
    }

    /// Parses a hexadecimal digest (either case).
    ///
    /// - Throws: ``HotUpdateError/Code/invalidArgument`` when `hex` is not a digest of that algorithm.
    public init(algorithm: Digest.Algorithm, hex: String) throws {
        let utf8 = Array(hex.utf8)
        guard utf8.count == algorithm.byteCount * 2 else {
            throw HotUpdateError(
                .invalidArgument,
                "'\(hex)' is not a \(algorithm) digest (\(algorithm.byteCount * 2) hex digits expected)"
            )
        }
        guard let bytes = HexBytes.decode(hex) else {
            throw HotUpdateError(.invalidArgument, "'\(hex)' is not hexadecimal")
        }
        self.algorithm = algorithm
        self.bytes = Array(bytes)
    }

    /// The digest as lowercase hexadecimal.
    public var hex: String { HexBytes.encode(bytes) }

    public var description: String { "\(algorithm):\(hex)" }
}

extension Digest {
    /// A hash algorithm HotUpdate can check packages with.
    public struct Algorithm: Hashable, Sendable, CustomStringConvertible, Codable {
        /// The algorithm's name, lowercase (`"sha256"`, `"md5"`).
        public let name: String
        /// The digest's length in bytes.
        public let byteCount: Int

        /// Creates an algorithm description. Implementations of ``Verifier`` decide which they support.
        public init(name: String, byteCount: Int) {
            self.name = name
            self.byteCount = byteCount
        }

        /// SHA-256, the default for everything HotUpdate stores.
        public static let sha256 = Digest.Algorithm(name: "sha256", byteCount: 32)
        /// MD5, only to speak to older servers that publish nothing better.
        public static let md5 = Digest.Algorithm(name: "md5", byteCount: 16)

        public var description: String { name }
    }
}
