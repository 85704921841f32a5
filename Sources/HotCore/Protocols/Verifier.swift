import Foundation

/// An incremental hash: fed chunk by chunk (while a package downloads), finished once.
///
/// A hasher is a reference type used by one task at a time; it is not `Sendable`.
public protocol DigestHasher: AnyObject {
    /// The algorithm this hasher computes.
    var algorithm: Digest.Algorithm { get }
    /// Adds bytes.
    func update(_ bytes: UnsafeRawBufferPointer)
    /// Returns the digest of everything added. Call once.
    func finalize() -> Digest
}

extension DigestHasher {
    /// Adds the bytes of `data`.
    public func update(_ data: Data) {
        data.withUnsafeBytes { update($0) }
    }
}

/// A public key a client trusts, as PEM (`-----BEGIN PUBLIC KEY-----`, SubjectPublicKeyInfo).
public struct PublicKey: Hashable, Sendable {
    /// The scheme signatures by this key use.
    public var scheme: PublicKey.Scheme
    /// The key in PEM.
    public var pem: String
    /// Creates a key.
    public init(scheme: PublicKey.Scheme, pem: String) {
        self.scheme = scheme
        self.pem = pem
    }
}

/// Computes digests and checks signatures.
///
/// Implementation: `CryptoVerifier` (in `HotVerify`, over libcrypto).
///
/// ```swift
/// let hasher = try verifier.makeHasher(for: .sha256)
/// for try await chunk in response.body { hasher.update(chunk) }
/// let digest = hasher.finalize()
/// ```
public protocol Verifier: Sendable {
    /// The digest algorithms this verifier computes.
    var supportedDigests: Set<Digest.Algorithm> { get }

    /// Returns a fresh hasher.
    ///
    /// - Throws: ``HotUpdateError/Code/unsupported`` for an algorithm not in ``supportedDigests``.
    func makeHasher(for algorithm: Digest.Algorithm) throws -> any DigestHasher

    /// Checks `signature` over exactly `message` with `key`.
    ///
    /// - Returns: Whether the signature is valid.
    /// - Throws: ``HotUpdateError/Code/signatureInvalid`` when the key cannot be read or does not
    ///   fit its scheme; ``HotUpdateError/Code/unsupported`` for a scheme this verifier lacks.
    func verify(signature: Data, of message: Data, with key: PublicKey) throws -> Bool

    /// A stable identifier of `key`: the SHA-256 of its DER SubjectPublicKeyInfo, in hex.
    ///
    /// - Throws: ``HotUpdateError/Code/signatureInvalid`` when the key cannot be read.
    func keyID(of key: PublicKey) throws -> String
}

extension Verifier {
    /// Digests a whole buffer at once.
    public func digest(of data: Data, using algorithm: Digest.Algorithm) throws -> Digest {
        let hasher = try makeHasher(for: algorithm)
        hasher.update(data)
        return hasher.finalize()
    }

    /// Digests a file, reading it in 1 MiB chunks.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem`` when the file cannot be read.
    public func digest(ofFile url: URL, using algorithm: Digest.Algorithm) throws -> Digest {
        let hasher = try makeHasher(for: algorithm)
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: url)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot open \(url.path)")
        }
        defer { try? handle.close() }
        while true {
            let chunk: Data?
            do {
                chunk = try handle.read(upToCount: 1 << 20)
            } catch {
                throw HotUpdateError.wrap(error, as: .fileSystem, "cannot read \(url.path)")
            }
            guard let chunk, !chunk.isEmpty else { break }
            hasher.update(chunk)
        }
        return hasher.finalize()
    }
}

extension PublicKey {
    /// A signature scheme.
    public struct Scheme: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        /// The scheme's stable name.
        public let rawValue: String
        /// Creates a scheme from its name.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// Ed25519 (RFC 8032) over the message itself.
        public static let ed25519 = PublicKey.Scheme(rawValue: "ed25519")
        /// RSA PKCS#1 v1.5 with SHA-256.
        public static let rsaPKCS1SHA256 = PublicKey.Scheme(rawValue: "rsa-pkcs1-sha256")
        /// RSA-PSS with SHA-256, MGF1-SHA-256 and a salt as long as the digest.
        public static let rsaPSSSHA256 = PublicKey.Scheme(rawValue: "rsa-pss-sha256")

        public var description: String { rawValue }
    }
}
