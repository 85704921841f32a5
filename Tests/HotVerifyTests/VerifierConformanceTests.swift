import Foundation
import HotCore
import HotTesting
import HotVerify
import Testing

/// CryptoVerifier passes the public Verifier conformance suite, with signature vectors made
/// by CryptoSigner: two Ed25519 keys, RSA-PSS and RSA PKCS#1 v1.5 (2048 bits each).
@Suite struct VerifierConformanceTests {
    static let suite = VerifierConformance(signatures: makeVectors()) { CryptoVerifier() }

    static func makeVectors() -> [VerifierConformance.SignatureVector] {
        let kinds: [(String, KeyKind)] = [
            ("ed25519 a", .ed25519), ("ed25519 b", .ed25519),
            ("rsa-pss 2048", .rsa(bits: 2048, scheme: .rsaPSSSHA256)),
            ("rsa-pkcs1 2048", .rsa(bits: 2048, scheme: .rsaPKCS1SHA256)),
        ]
        return kinds.map { name, kind in
            let message = Data("conformance message signed by \(name)".utf8)
            // Key generation cannot fail where libcrypto is linked; the suite then fails loudly.
            let signer = try! CryptoSigner.generate(kind)
            return VerifierConformance.SignatureVector(
                name: name,
                key: signer.publicKey,
                message: message,
                signature: try! signer.sign(message)
            )
        }
    }

    @Test(arguments: suite.checks)
    func cryptoVerifierConforms(_ check: ConformanceCheck) async throws {
        try await check.run()
    }

    /// The key ids the verifier computes are those `openssl` computes from the DER key.
    @Test func keyIDsMatchOpenSSL() async throws {
        for vector in Self.suite.signatures {
            let der = try await Subprocess.check(
                "openssl",
                ["pkey", "-pubin", "-outform", "DER"],
                stdin: Data(vector.key.pem.utf8)
            ).standardOutput
            let digest = try await Subprocess.check("openssl", ["dgst", "-sha256", "-r"], stdin: der).stdout
            let expected = String(digest.prefix(64))
            var withID = vector
            withID.keyID = expected
            let suite = VerifierConformance(signatures: [withID]) { CryptoVerifier() }
            for check in suite.checks where check.name.hasSuffix("key id") { try await check.run() }
        }
    }
}
