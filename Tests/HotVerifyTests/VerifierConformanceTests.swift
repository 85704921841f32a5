import Foundation
import HotCore
import HotTestServers
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

    /// The key ids the verifier computes are those `openssl` computes from the DER key: the
    /// suite's key-id check of every vector runs, once, with the id `openssl` gives.
    @Test func keyIDsMatchOpenSSL() async throws {
        let vectors = Self.suite.signatures
        #expect(vectors.count == 4)
        var ran: [String] = []
        for vector in vectors {
            let der = try await Subprocess.check(
                "openssl",
                ["pkey", "-pubin", "-outform", "DER"],
                stdin: Data(vector.key.pem.utf8)
            ).standardOutput
            let digest = try await Subprocess.check("openssl", ["dgst", "-sha256", "-r"], stdin: der).stdout
            let expected = String(digest.prefix(64))
            #expect(expected.utf8.count == 64, "openssl printed \(digest)")
            var withID = vector
            withID.keyID = expected
            let suite = VerifierConformance(signatures: [withID]) { CryptoVerifier() }
            let keyIDChecks = suite.checks.filter { $0.name.hasSuffix("key id") }
            #expect(
                keyIDChecks.map(\.name) == ["signature \(vector.name): key id"],
                "the suite's checks are \(suite.checks.map(\.name))"
            )
            for check in keyIDChecks {
                try await check.run()
                ran.append(vector.name)
            }
        }
        #expect(ran == vectors.map(\.name))
    }
}
