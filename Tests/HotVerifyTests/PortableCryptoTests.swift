import Foundation
import HotCore
import Testing

@testable import HotVerify

/// The parts of the swift-crypto backend written in plain Swift (the raw PKCS#1 check, PEM and
/// PKCS#8), run in every build against keys and signatures of the `openssl` command.
@Suite("Portable key and signature code, against openssl")
struct PortableCryptoTests {
    @Test("the backend is the one the build asked for")
    func backendName() {
        #if SwiftCrypto
        #expect(CryptoVerifier.backendName == "swift-crypto")
        #elseif Libcrypto && os(Linux)
        #expect(CryptoVerifier.backendName == "libcrypto")
        #elseif os(Linux)
        #expect(CryptoVerifier.backendName == "none")
        #endif
    }

    /// An RSA key of `bits` and public exponent `exponent`, made by openssl.
    func rsaKey(
        bits: Int,
        exponent: Int,
        in directory: URL
    ) async throws -> (privateKey: URL, info: SubjectPublicKeyInfo) {
        let privateKey = directory.appendingPathComponent("rsa-\(bits)-\(exponent).key")
        try await run([
            "openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:\(bits)",
            "-pkeyopt", "rsa_keygen_pubexp:\(exponent)", "-out", privateKey.path,
        ])
        let pem = String(
            decoding: try await run(["openssl", "pkey", "-in", privateKey.path, "-pubout"]),
            as: UTF8.self
        )
        return (privateKey, try SubjectPublicKeyInfo(pem: pem))
    }

    /// Signs `message` with PKCS#1 v1.5 padding and no digest (`openssl rsautl`, which, unlike
    /// `pkeyutl`, signs messages longer than a digest, up to the modulus size less 11 bytes).
    func rawSign(_ message: Data, with privateKey: URL, in directory: URL) async throws -> Data {
        let input = directory.appendingPathComponent("message-\(UUID().uuidString)")
        let output = directory.appendingPathComponent("signature-\(UUID().uuidString)")
        try message.write(to: input)
        try await run(["openssl", "rsautl", "-sign", "-inkey", privateKey.path, "-in", input.path, "-out", output.path])
        return try Data(contentsOf: output)
    }

    @Test(
        "raw PKCS#1: openssl's signatures verify, altered ones do not",
        arguments: [(1024, 65537), (2048, 65537), (2050, 3), (3072, 65537), (4096, 17)]
    )
    func rawPKCS1(bits: Int, exponent: Int) async throws {
        try await withTemporaryDirectory { directory in
            let (privateKey, info) = try await rsaKey(bits: bits, exponent: exponent, in: directory)
            let verifier = try RawPKCS1Verifier(rsaPublicKeyDER: info.rsaPublicKeyDER())
            let size = (bits + 7) / 8
            #expect(verifier.modulus.count == size)
            for message in [
                Data("5d41402abc4b2a76b9719d911017c592".utf8), Data(), pseudoRandomBytes(count: size - 11, seed: 7),
            ] {
                let signature = try await rawSign(message, with: privateKey, in: directory)
                #expect(verifier.isValid(signature: signature, of: message))
                var otherMessage = message
                otherMessage.append(0)
                #expect(!verifier.isValid(signature: signature, of: otherMessage))
                for index in [0, size / 2, size - 1] {
                    var altered = signature
                    altered[index] ^= 0x40
                    #expect(!verifier.isValid(signature: altered, of: message))
                }
                #expect(!verifier.isValid(signature: signature.dropLast(), of: message))
                #expect(!verifier.isValid(signature: Data([0]) + signature, of: message))
            }
            // A "signature" not below the modulus is refused, not reduced.
            #expect(!verifier.isValid(signature: Data(verifier.modulus), of: Data()))
            #expect(!verifier.isValid(signature: Data(repeating: 0xFF, count: size), of: Data()))
        }
    }

    @Test("raw PKCS#1 refuses an even or tiny modulus")
    func rawPKCS1BadKeys() {
        // SEQUENCE { INTEGER 0x00 C0 … 00 (even), INTEGER 3 }
        let even: [UInt8] =
            [0x30, 0x46, 0x02, 0x41, 0x00, 0xC0] + [UInt8](repeating: 0, count: 63) + [0x02, 0x01, 0x03]
        #expect(throws: HotUpdateError(.signatureInvalid, "")) { try RawPKCS1Verifier(rsaPublicKeyDER: even) }
        let tiny: [UInt8] = [0x30, 0x06, 0x02, 0x01, 0x0F, 0x02, 0x01, 0x03]
        #expect(throws: HotUpdateError(.signatureInvalid, "")) { try RawPKCS1Verifier(rsaPublicKeyDER: tiny) }
    }

    @Test("PKCS#8 and PEM: openssl's Ed25519 key reads to its seed and writes back byte for byte")
    func ed25519PrivateKey() async throws {
        try await withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("ed.key")
            try await run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", file.path])
            let text = try String(contentsOf: file, encoding: .utf8)
            let block = try PEM.decode(text, what: "private key")
            #expect(block.label == "PRIVATE KEY")
            let info = try PrivateKeyInfo(der: block.der)
            #expect(info.algorithmOID == SubjectPublicKeyInfo.ed25519OID)
            let seed = try info.ed25519Seed()
            #expect(PEM.encode(PrivateKeyInfo.ed25519(seed: seed), label: "PRIVATE KEY") == text)

            let publicText = String(
                decoding: try await run(["openssl", "pkey", "-in", file.path, "-pubout"]),
                as: UTF8.self
            )
            let publicInfo = try SubjectPublicKeyInfo(pem: publicText)
            #expect(PEM.encode(SubjectPublicKeyInfo.ed25519DER(publicInfo.keyBits), label: "PUBLIC KEY") == publicText)
        }
    }

    @Test("PEM: a 3072-bit RSA public key is written as openssl writes it")
    func rsaPublicPEM() async throws {
        try await withTemporaryDirectory { directory in
            let (privateKey, info) = try await rsaKey(bits: 3072, exponent: 65537, in: directory)
            let publicText = String(
                decoding: try await run(["openssl", "pkey", "-in", privateKey.path, "-pubout"]),
                as: UTF8.self
            )
            #expect(PEM.encode(info.der, label: "PUBLIC KEY") == publicText)
        }
    }

    @Test("PEM: text without a block, or with a broken one, is refused")
    func pemRefusals() {
        for text in [
            "", "garbage", "-----BEGIN PRIVATE KEY-----\nAAAA\n",
            "-----BEGIN PRIVATE KEY-----\n!!!\n-----END PRIVATE KEY-----\n",
        ] {
            #expect(throws: HotUpdateError(.signatureInvalid, "")) { try PEM.decode(text, what: "key") }
        }
    }
}
