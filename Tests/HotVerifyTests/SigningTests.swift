import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

@testable import HotVerify

/// Keys and signatures made by ``CryptoSigner``, cross-checked with the `openssl` command.
@Suite("Signing, cross-checked with openssl")
struct SigningTests {
    static func kind(_ kind: KeyFixture.Kind) -> KeyKind {
        switch kind {
        case .ed25519: .ed25519
        case .rsaPKCS1: .rsa(bits: 2048, scheme: .rsaPKCS1SHA256)
        case .rsaPSS: .rsa(bits: 2048, scheme: .rsaPSSSHA256)
        }
    }

    /// Verifies `signature` over `message` with the `openssl` command; true when it exits 0.
    static func opensslVerifies(
        _ signature: Data,
        of message: Data,
        publicPEM: String,
        kind: KeyFixture.Kind,
        in directory: URL
    ) async throws -> Bool {
        let id = UUID().uuidString
        let messageFile = directory.appendingPathComponent("m-\(id)")
        let signatureFile = directory.appendingPathComponent("s-\(id)")
        let publicFile = directory.appendingPathComponent("p-\(id).pem")
        try message.write(to: messageFile)
        try signature.write(to: signatureFile)
        try Data(publicPEM.utf8).write(to: publicFile)
        let arguments: [String]
        switch kind {
        case .ed25519:
            arguments = [
                "pkeyutl", "-verify", "-pubin", "-inkey", publicFile.path, "-rawin", "-in", messageFile.path,
                "-sigfile", signatureFile.path,
            ]
        case .rsaPKCS1:
            arguments = [
                "dgst", "-sha256", "-verify", publicFile.path, "-signature", signatureFile.path, messageFile.path,
            ]
        case .rsaPSS:
            arguments = [
                "dgst", "-sha256", "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:digest", "-verify",
                publicFile.path, "-signature", signatureFile.path, messageFile.path,
            ]
        }
        return try await Subprocess.run("openssl", arguments).status == 0
    }

    @Test("openssl verifies our signatures, and refuses them over altered bytes", arguments: KeyFixture.Kind.allCases)
    func opensslVerifiesOurs(kind: KeyFixture.Kind) async throws {
        try await withTemporaryDirectory { directory in
            let signer = try CryptoSigner.generate(Self.kind(kind))
            #expect(signer.publicKey.scheme == kind.scheme)
            let message = pseudoRandomBytes(count: 3_000, seed: 7)
            let signature = try signer.sign(message)
            #expect(
                try await Self.opensslVerifies(
                    signature,
                    of: message,
                    publicPEM: signer.publicKey.pem,
                    kind: kind,
                    in: directory
                )
            )
            var altered = message
            altered[100] ^= 1
            #expect(
                !(try await Self.opensslVerifies(
                    signature,
                    of: altered,
                    publicPEM: signer.publicKey.pem,
                    kind: kind,
                    in: directory
                ))
            )
            // And our verifier agrees on both.
            #expect(try CryptoVerifier().verify(signature: signature, of: message, with: signer.publicKey))
            #expect(!(try CryptoVerifier().verify(signature: signature, of: altered, with: signer.publicKey)))
        }
    }

    @Test("openssl reads our private keys and derives the same public key", arguments: [true, false])
    func opensslReadsOurKeys(ed25519: Bool) async throws {
        try await withTemporaryDirectory { directory in
            let signer = try CryptoSigner.generate(ed25519 ? .ed25519 : .rsa3072)
            #expect(signer.privateKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----"))
            let file = directory.appendingPathComponent("key.pem")
            try Data(signer.privateKeyPEM.utf8).write(to: file)
            let derived = try await run(["openssl", "pkey", "-in", file.path, "-pubout"])
            #expect(String(decoding: derived, as: UTF8.self) == signer.publicKey.pem)
            if !ed25519 {
                let text = String(
                    decoding: try await run(["openssl", "pkey", "-in", file.path, "-noout", "-text"]),
                    as: UTF8.self
                )
                #expect(text.contains("3072 bit"))
            }
        }
    }

    @Test("We sign with openssl's keys, and verify what openssl signs", arguments: KeyFixture.Kind.allCases)
    func opensslKeysAndSignatures(kind: KeyFixture.Kind) async throws {
        try await withTemporaryDirectory { directory in
            let fixture = KeyFixture(directory: directory, kind: kind)
            let (privateKey, publicKey) = try await fixture.makeKey("k", ed25519: kind == .ed25519)
            let signer = try CryptoSigner(
                privateKeyPEM: try String(contentsOf: privateKey, encoding: .utf8),
                rsaScheme: kind.scheme
            )
            let expectedPublic = try fixture.publicKey(publicKey)
            #expect(signer.publicKey == expectedPublic)
            let message = Data("manifest bytes".utf8)
            #expect(
                try await Self.opensslVerifies(
                    try signer.sign(message),
                    of: message,
                    publicPEM: expectedPublic.pem,
                    kind: kind,
                    in: directory
                )
            )
            let theirs = try await fixture.sign(message, with: privateKey)
            #expect(try CryptoVerifier().verify(signature: theirs, of: message, with: signer.publicKey))
        }
    }

    @Test("A public key's scheme is read from its algorithm")
    func publicKeyScheme() async throws {
        let ed = try CryptoSigner.generate()
        #expect(try CryptoVerifier.publicKey(pem: ed.publicKey.pem).scheme == .ed25519)
        let rsa = try CryptoSigner.generate(.rsa(bits: 2048))
        #expect(try CryptoVerifier.publicKey(pem: rsa.publicKey.pem).scheme == .rsaPSSSHA256)
        #expect(
            try CryptoVerifier.publicKey(pem: rsa.publicKey.pem, rsaScheme: .rsaPKCS1SHA256).scheme == .rsaPKCS1SHA256
        )
    }

    @Test("Garbage and public keys are refused as private keys; small RSA keys are refused")
    func refusals() throws {
        #expect(throws: HotUpdateError(.signatureInvalid, "")) { try CryptoSigner(privateKeyPEM: "garbage") }
        let ed = try CryptoSigner.generate()
        #expect(throws: HotUpdateError(.signatureInvalid, "")) { try CryptoSigner(privateKeyPEM: ed.publicKey.pem) }
        #expect(throws: HotUpdateError(.invalidArgument, "")) { try CryptoSigner.generate(.rsa(bits: 1024)) }
    }
}
