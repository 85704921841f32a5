import Foundation
import HotTesting
import Testing

@testable import HotCore

/// A download is hashed once: with the strongest digest the manifest gives. MD5 only when it
/// is the only one.
@Suite("Hashing a download once")
struct HashOnceTests {
    /// A verifier that counts the hashers made, by algorithm.
    final class CountingVerifier: Verifier, @unchecked Sendable {
        private let base = FakeVerifier()
        private let lock = NSLock()
        private var made: [Digest.Algorithm: Int] = [:]

        var supportedDigests: Set<Digest.Algorithm> { base.supportedDigests }
        func count(_ algorithm: Digest.Algorithm) -> Int { lock.withLock { made[algorithm, default: 0] } }
        func makeHasher(for algorithm: Digest.Algorithm) throws -> any DigestHasher {
            lock.withLock { made[algorithm, default: 0] += 1 }
            return try base.makeHasher(for: algorithm)
        }
        func keyID(of key: PublicKey) throws -> String { try base.keyID(of: key) }
        func verify(signature: Data, of message: Data, with key: PublicKey) throws -> Bool {
            try base.verify(signature: signature, of: message, with: key)
        }
    }

    private func check(
        _ bytes: Data,
        _ descriptor: PackageDescriptor,
        _ verifier: CountingVerifier
    ) throws -> (
        size: Int64, sha256: Digest, md5: Digest?
    ) {
        let configuration = UpdaterConfiguration(
            root: URL(fileURLWithPath: "/nonexistent"),
            transport: FakeTransport(),
            unarchiver: FakeUnarchiver(),
            verifier: verifier,
            store: FakeMetadataStore()
        )
        let check = try DownloadCheck(descriptor, configuration: configuration)
        try bytes.withUnsafeBytes { try check.take($0) }
        return try check.finish()
    }

    @Test("with a SHA-256 and an MD5, only the SHA-256 is computed; the manifest's MD5 is recorded")
    func sha256Decides() throws {
        let bytes = Data("the package".utf8)
        let verifier = CountingVerifier()
        let sha256 = try FakeVerifier().digest(of: bytes, using: .sha256)
        let md5 = try FakeVerifier().digest(of: bytes, using: .md5)
        let url = try #require(URL(string: "https://cdn.test/p.zip"))
        let descriptor = try PackageDescriptor(id: "p", version: "1", url: url, sha256: sha256, md5: md5)
        let result = try check(bytes, descriptor, verifier)
        #expect(verifier.count(.sha256) == 1)
        #expect(verifier.count(.md5) == 0)
        #expect(result.sha256 == sha256)
        #expect(result.md5 == md5)

        // A wrong SHA-256 is refused whatever the MD5 says.
        let other = try FakeVerifier().digest(of: Data("other".utf8), using: .sha256)
        let wrong = try PackageDescriptor(id: "p", version: "1", url: url, sha256: other, md5: md5)
        #expect(throws: HotUpdateError.self) { try check(bytes, wrong, CountingVerifier()) }
    }

    @Test("with an MD5 alone, the MD5 is computed and a wrong one refused")
    func md5Alone() throws {
        let bytes = Data("the package".utf8)
        let verifier = CountingVerifier()
        let md5 = try FakeVerifier().digest(of: bytes, using: .md5)
        let url = try #require(URL(string: "https://cdn.test/p.zip"))
        let result = try check(bytes, try PackageDescriptor(id: "p", version: "1", url: url, md5: md5), verifier)
        #expect(verifier.count(.md5) == 1)
        #expect(result.md5 == md5)
        let other = try FakeVerifier().digest(of: Data("other".utf8), using: .md5)
        let error = #expect(throws: HotUpdateError.self) {
            try check(bytes, try PackageDescriptor(id: "p", version: "1", url: url, md5: other), CountingVerifier())
        }
        #expect(error?.code == .digestMismatch)
    }
}
