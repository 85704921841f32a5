import Foundation
import HotCore
import Testing

@testable import HotVerify

/// `rsa-pkcs1-raw`: the MD5 string "encrypted with the private key", as older patch servers
/// sign it (PHP's `openssl_private_encrypt`, `openssl pkeyutl -sign` without a digest).
@Suite("RSA PKCS#1 v1.5 over the raw message")
struct RecoverableSignatureTests {
    let verifier = CryptoVerifier()

    /// Signs `message` with no digest, as `openssl_private_encrypt` does.
    func rawSign(_ message: String, with privateKey: URL, in directory: URL) async throws -> Data {
        let input = directory.appendingPathComponent("message-\(UUID().uuidString)")
        let output = directory.appendingPathComponent("signature-\(UUID().uuidString)")
        try Data(message.utf8).write(to: input)
        try await run([
            "openssl", "pkeyutl", "-sign", "-inkey", privateKey.path, "-in", input.path, "-out", output.path,
        ])
        return try Data(contentsOf: output)
    }

    @Test("A signed MD5 string verifies; another string, an altered signature or another key does not")
    func signedMD5() async throws {
        try await withTemporaryDirectory { directory in
            let fixture = KeyFixture(directory: directory, kind: .rsaPKCS1)
            let (privateKey, publicKeyFile) = try await fixture.makeKey("server", ed25519: false)
            let (_, otherPublicKeyFile) = try await fixture.makeKey("other", ed25519: false)
            let key = try fixture.publicKey(publicKeyFile, scheme: .rsaPKCS1Raw)
            let otherKey = try fixture.publicKey(otherPublicKeyFile, scheme: .rsaPKCS1Raw)
            let md5 = "5d41402abc4b2a76b9719d911017c592"
            let signature = try await rawSign(md5, with: privateKey, in: directory)

            #expect(signature.count == 256)
            #expect(try verifier.verify(signature: signature, of: Data(md5.utf8), with: key))
            #expect(
                try !verifier.verify(signature: signature, of: Data("5d41402abc4b2a76b9719d911017c593".utf8), with: key)
            )
            #expect(try !verifier.verify(signature: signature, of: Data(md5.uppercased().utf8), with: key))
            #expect(try !verifier.verify(signature: signature, of: Data(md5.utf8), with: otherKey))
            var altered = signature
            altered[100] ^= 0x01
            #expect(try !verifier.verify(signature: altered, of: Data(md5.utf8), with: key))
            #expect(try !verifier.verify(signature: signature.prefix(255), of: Data(md5.utf8), with: key))
        }
    }

    @Test("Raw and SHA-256 PKCS#1 signatures are not interchangeable")
    func schemesAreSeparate() async throws {
        try await withTemporaryDirectory { directory in
            let fixture = KeyFixture(directory: directory, kind: .rsaPKCS1)
            let (privateKey, publicKeyFile) = try await fixture.makeKey("server", ed25519: false)
            let message = "0cc175b9c0f1b6a831c399e269772661"
            let raw = try await rawSign(message, with: privateKey, in: directory)
            let hashed = try await fixture.sign(Data(message.utf8), with: privateKey)

            let rawKey = try fixture.publicKey(publicKeyFile, scheme: .rsaPKCS1Raw)
            let hashedKey = try fixture.publicKey(publicKeyFile, scheme: .rsaPKCS1SHA256)
            #expect(try verifier.verify(signature: hashed, of: Data(message.utf8), with: hashedKey))
            #expect(try !verifier.verify(signature: hashed, of: Data(message.utf8), with: rawKey))
            #expect(try !verifier.verify(signature: raw, of: Data(message.utf8), with: hashedKey))
        }
    }

    @Test("An Ed25519 key given as rsa-pkcs1-raw is refused with a clear error")
    func wrongKeyType() async throws {
        try await withTemporaryDirectory { directory in
            let fixture = KeyFixture(directory: directory, kind: .ed25519)
            let (_, publicKeyFile) = try await fixture.makeKey("ed", ed25519: true)
            let key = try fixture.publicKey(publicKeyFile, scheme: .rsaPKCS1Raw)
            let error = #expect(throws: HotUpdateError.self) {
                try verifier.verify(signature: Data(count: 64), of: Data("x".utf8), with: key)
            }
            #expect(error?.code == .signatureInvalid)
            #expect(error?.message.contains("rsa-pkcs1-raw") == true)
        }
    }
}
