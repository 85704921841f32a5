import Foundation
import HotCore
import HotVerify
import Testing

@Suite("Digests against openssl, sha256sum and md5sum")
struct DigestTests {
    static let sizes = [0, 1, 55, 64, 1000, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 * (1 << 20) + 17]

    @Test("SHA-256 of a file equals openssl dgst and sha256sum", arguments: sizes)
    func sha256OfFile(size: Int) async throws {
        try await withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("data.bin")
            let data = pseudoRandomBytes(count: size, seed: UInt64(size) + 11)
            try data.write(to: file)
            let viaOpenSSL = firstWord(of: try await run(["openssl", "dgst", "-sha256", "-r", file.path]))
            let viaCoreutils = firstWord(of: try await run(["sha256sum", file.path]))
            #expect(viaOpenSSL == viaCoreutils)
            #expect(viaOpenSSL.count == 64)

            let verifier = CryptoVerifier()
            #expect(try verifier.digest(ofFile: file, using: .sha256).hex == viaOpenSSL)
            // The protocol's own file path (FileHandle) agrees with the fast one.
            let existential: any Verifier = verifier
            #expect(try existential.digest(ofFile: file, using: .sha256).hex == viaOpenSSL)
            #expect(try verifier.digest(of: data, using: .sha256).hex == viaOpenSSL)
        }
    }

    @Test("MD5 of a file equals openssl dgst and md5sum", arguments: sizes)
    func md5OfFile(size: Int) async throws {
        try await withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("data.bin")
            let data = pseudoRandomBytes(count: size, seed: UInt64(size) + 23)
            try data.write(to: file)
            let viaOpenSSL = firstWord(of: try await run(["openssl", "dgst", "-md5", "-r", file.path]))
            let viaCoreutils = firstWord(of: try await run(["md5sum", file.path]))
            #expect(viaOpenSSL == viaCoreutils)
            #expect(viaOpenSSL.count == 32)

            let verifier = CryptoVerifier()
            let digest = try verifier.digest(ofFile: file, using: .md5)
            #expect(digest.algorithm == .md5)
            #expect(digest.hex == viaOpenSSL)
            #expect(try verifier.digest(of: data, using: .md5).hex == viaOpenSSL)
        }
    }

    @Test("Known vectors of the empty input")
    func emptyInput() async throws {
        let verifier = CryptoVerifier()
        #expect(
            try verifier.digest(of: Data(), using: .sha256).hex
                == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        )
        #expect(try verifier.digest(of: Data(), using: .md5).hex == "d41d8cd98f00b204e9800998ecf8427e")
        // A hasher that was never updated gives the same.
        #expect(try CryptoHasher(algorithm: .sha256).finalize().hex.hasPrefix("e3b0c442"))
    }

    @Test("Updates in uneven chunks equal one update", arguments: [Digest.Algorithm.sha256, .md5])
    func chunkedEqualsOneShot(algorithm: Digest.Algorithm) async throws {
        let data = pseudoRandomBytes(count: 2 * (1 << 20) + 333, seed: 99)
        let verifier = CryptoVerifier()
        let oneShot = try verifier.digest(of: data, using: algorithm)
        for chunkSizes in [[1], [7, 64, 1], [4096, 1 << 20], [65_537]] {
            let hasher = try verifier.makeHasher(for: algorithm)
            var offset = 0
            var turn = 0
            while offset < data.count {
                let size = min(chunkSizes[turn % chunkSizes.count], data.count - offset)
                hasher.update(data.subdata(in: offset..<(offset + size)))
                hasher.update(Data())  // empty updates change nothing
                offset += size
                turn += 1
            }
            #expect(hasher.finalize() == oneShot, "chunks \(chunkSizes)")
        }
        // Differs from the digest of a changed input.
        var changed = data
        changed[12345] ^= 1
        #expect(try verifier.digest(of: changed, using: algorithm) != oneShot)
    }

    @Test("finalize twice returns the same digest")
    func finalizeTwice() async throws {
        let hasher = try CryptoHasher(algorithm: .sha256)
        hasher.update(Data("abc".utf8))
        let first = hasher.finalize()
        #expect(first.hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(hasher.finalize() == first)
    }

    @Test("An unsupported algorithm throws .unsupported")
    func unsupportedAlgorithm() async throws {
        let verifier = CryptoVerifier()
        #expect(verifier.supportedDigests == [.sha256, .md5])
        let sha1 = Digest.Algorithm(name: "sha1", byteCount: 20)
        #expect(throws: HotUpdateError(.unsupported, "")) { try verifier.makeHasher(for: sha1) }
        #expect(throws: HotUpdateError(.unsupported, "")) { try verifier.digest(of: Data(), using: sha1) }
    }

    @Test("A missing file or a directory throws .fileSystem naming it")
    func unreadableFile() async throws {
        try await withTemporaryDirectory { directory in
            let missing = directory.appendingPathComponent("missing.bin")
            let error = try #require(throws: HotUpdateError.self) {
                try CryptoVerifier().digest(ofFile: missing, using: .sha256)
            }
            #expect(error.code == .fileSystem)
            #expect(error.description.contains("missing.bin"))
            #expect(throws: HotUpdateError(.fileSystem, "")) {
                try CryptoVerifier().digest(ofFile: directory, using: .sha256)
            }
        }
    }
}
