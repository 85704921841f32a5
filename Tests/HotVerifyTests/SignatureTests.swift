import Foundation
import HotCore
import Testing

@testable import HotVerify

/// Keys and signatures made by the `openssl` command line in a fresh directory.
struct KeyFixture {
    enum Kind: String, CaseIterable, CustomStringConvertible {
        case ed25519, rsaPKCS1, rsaPSS
        var description: String { rawValue }
        var scheme: PublicKey.Scheme {
            switch self {
            case .ed25519: .ed25519
            case .rsaPKCS1: .rsaPKCS1SHA256
            case .rsaPSS: .rsaPSSSHA256
            }
        }
    }

    let directory: URL
    let kind: Kind

    /// Generates a private key and returns the paths of it and its PEM public key.
    func makeKey(_ name: String, ed25519: Bool) async throws -> (privateKey: URL, publicKey: URL) {
        let privateKey = directory.appendingPathComponent("\(name).key")
        let publicKey = directory.appendingPathComponent("\(name).pub")
        if ed25519 {
            try await run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", privateKey.path])
        } else {
            try await run(["openssl", "genrsa", "-out", privateKey.path, "2048"])
        }
        try await run(["openssl", "pkey", "-in", privateKey.path, "-pubout", "-out", publicKey.path])
        return (privateKey, publicKey)
    }

    /// Signs `message` with `privateKey` the way publishers do for `kind`.
    func sign(_ message: Data, with privateKey: URL, pssSaltLength: String = "digest") async throws -> Data {
        let messageFile = directory.appendingPathComponent("message-\(UUID().uuidString).bin")
        let signatureFile = directory.appendingPathComponent("signature-\(UUID().uuidString).bin")
        try message.write(to: messageFile)
        switch kind {
        case .ed25519:
            try await run([
                "openssl", "pkeyutl", "-sign", "-rawin", "-inkey", privateKey.path, "-in", messageFile.path,
                "-out", signatureFile.path,
            ])
        case .rsaPKCS1:
            try await run([
                "openssl", "dgst", "-sha256", "-sign", privateKey.path, "-out", signatureFile.path, messageFile.path,
            ])
        case .rsaPSS:
            try await run([
                "openssl", "dgst", "-sha256", "-sigopt", "rsa_padding_mode:pss", "-sigopt",
                "rsa_pss_saltlen:\(pssSaltLength)", "-sign", privateKey.path, "-out", signatureFile.path,
                messageFile.path,
            ])
        }
        return try Data(contentsOf: signatureFile)
    }

    func publicKey(_ url: URL, scheme: PublicKey.Scheme? = nil) throws -> PublicKey {
        PublicKey(scheme: scheme ?? kind.scheme, pem: try String(contentsOf: url, encoding: .utf8))
    }
}

@Suite("Signatures made by openssl")
struct SignatureTests {
    let verifier = CryptoVerifier()

    @Test("A valid signature verifies; any altered byte, or another key, does not", arguments: KeyFixture.Kind.allCases)
    func validAndTampered(kind: KeyFixture.Kind) async throws {
        try await withTemporaryDirectory { directory in
            let fixture = KeyFixture(directory: directory, kind: kind)
            let (privateKey, publicKeyFile) = try await fixture.makeKey("signer", ed25519: kind == .ed25519)
            let (_, otherPublicKeyFile) = try await fixture.makeKey("other", ed25519: kind == .ed25519)
            let key = try fixture.publicKey(publicKeyFile)
            let otherKey = try fixture.publicKey(otherPublicKeyFile)
            let message = pseudoRandomBytes(count: 4099, seed: 7)
            let signature = try await fixture.sign(message, with: privateKey)

            #expect(try verifier.verify(signature: signature, of: message, with: key))
            #expect(try verifier.verify(signature: signature, of: message, with: otherKey) == false)

            for index in [0, message.count / 2, message.count - 1] {
                var altered = message
                altered[index] ^= 0x01
                #expect(
                    try verifier.verify(signature: signature, of: altered, with: key) == false,
                    "message byte \(index)"
                )
            }
            for index in [0, signature.count / 2, signature.count - 1] {
                var altered = signature
                altered[index] ^= 0x80
                #expect(
                    try verifier.verify(signature: altered, of: message, with: key) == false,
                    "signature byte \(index)"
                )
            }
            #expect(try verifier.verify(signature: signature, of: message + Data([0]), with: key) == false)
            #expect(try verifier.verify(signature: signature.dropLast(), of: message, with: key) == false)
            #expect(try verifier.verify(signature: Data(), of: message, with: key) == false)
        }
    }

    @Test("An empty RSA message signs and verifies", arguments: [KeyFixture.Kind.rsaPKCS1, .rsaPSS])
    func emptyMessage(kind: KeyFixture.Kind) async throws {
        try await withTemporaryDirectory { directory in
            let fixture = KeyFixture(directory: directory, kind: kind)
            let (privateKey, publicKeyFile) = try await fixture.makeKey("signer", ed25519: false)
            let key = try fixture.publicKey(publicKeyFile)
            let signature = try await fixture.sign(Data(), with: privateKey)
            #expect(try verifier.verify(signature: signature, of: Data(), with: key))
            #expect(try verifier.verify(signature: signature, of: Data([0]), with: key) == false)
        }
    }

    /// `openssl pkeyutl -rawin` (3.0) cannot sign an empty file, so the empty Ed25519 message
    /// uses RFC 8032's first test vector, its public key wrapped in a SubjectPublicKeyInfo.
    @Test("An empty Ed25519 message verifies (RFC 8032 test 1)")
    func emptyEd25519Message() async throws {
        let rawKey = try Digest(
            algorithm: .sha256,
            hex: "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
        ).bytes
        let spki = Data([0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00] + rawKey)
        let pem = "-----BEGIN PUBLIC KEY-----\n\(spki.base64EncodedString())\n-----END PUBLIC KEY-----\n"
        let key = PublicKey(scheme: .ed25519, pem: pem)
        let signatureHex =
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
        var signature = Data()
        var index = signatureHex.startIndex
        while index < signatureHex.endIndex {
            let next = signatureHex.index(index, offsetBy: 2)
            signature.append(try #require(UInt8(signatureHex[index..<next], radix: 16)))
            index = next
        }
        #expect(try verifier.verify(signature: signature, of: Data(), with: key))
        #expect(try verifier.verify(signature: signature, of: Data([0]), with: key) == false)
    }

    @Test("PKCS#1 and PSS signatures do not pass for each other; PSS needs a 32-byte salt")
    func rsaPaddingIsChecked() async throws {
        try await withTemporaryDirectory { directory in
            let pkcs1 = KeyFixture(directory: directory, kind: .rsaPKCS1)
            let pss = KeyFixture(directory: directory, kind: .rsaPSS)
            let (privateKey, publicKeyFile) = try await pkcs1.makeKey("rsa", ed25519: false)
            let pkcs1Key = try pkcs1.publicKey(publicKeyFile)
            let pssKey = try pss.publicKey(publicKeyFile)
            let message = Data("manifest bytes".utf8)
            let pkcs1Signature = try await pkcs1.sign(message, with: privateKey)
            let pssSignature = try await pss.sign(message, with: privateKey)

            #expect(try verifier.verify(signature: pkcs1Signature, of: message, with: pkcs1Key))
            #expect(try verifier.verify(signature: pssSignature, of: message, with: pssKey))
            #expect(try verifier.verify(signature: pkcs1Signature, of: message, with: pssKey) == false)
            #expect(try verifier.verify(signature: pssSignature, of: message, with: pkcs1Key) == false)

            let shortSalt = try await pss.sign(message, with: privateKey, pssSaltLength: "20")
            #expect(try verifier.verify(signature: shortSalt, of: message, with: pssKey) == false)
        }
    }

    @Test("A key of the wrong type for its scheme throws .signatureInvalid")
    func wrongKeyType() async throws {
        try await withTemporaryDirectory { directory in
            let fixture = KeyFixture(directory: directory, kind: .ed25519)
            let (_, edPublic) = try await fixture.makeKey("ed", ed25519: true)
            let (_, rsaPublic) = try await fixture.makeKey("rsa", ed25519: false)
            let message = Data("m".utf8)
            let signature = Data(repeating: 1, count: 64)
            for scheme in [PublicKey.Scheme.rsaPKCS1SHA256, .rsaPSSSHA256] {
                let error = try #require(throws: HotUpdateError.self) {
                    try verifier.verify(
                        signature: signature,
                        of: message,
                        with: try fixture.publicKey(edPublic, scheme: scheme)
                    )
                }
                #expect(error.code == .signatureInvalid)
                // libcrypto names the key "ED25519", swift-crypto's backend "Ed25519".
                #expect(error.message.uppercased().contains("ED25519"), "\(error)")
                #expect(error.message.contains("RSA"), "\(error)")
            }
            let error = try #require(throws: HotUpdateError.self) {
                try verifier.verify(
                    signature: signature,
                    of: message,
                    with: try fixture.publicKey(rsaPublic, scheme: .ed25519)
                )
            }
            #expect(error.code == .signatureInvalid)
            #expect(error.message.contains("Ed25519"), "\(error)")
        }
    }

    @Test("Garbage, a private key or an empty string as PEM throws .signatureInvalid")
    func garbagePEM() async throws {
        try await withTemporaryDirectory { directory in
            let fixture = KeyFixture(directory: directory, kind: .ed25519)
            let (privateKey, _) = try await fixture.makeKey("ed", ed25519: true)
            let privatePEM = try String(contentsOf: privateKey, encoding: .utf8)
            let garbage = [
                "not a key",
                "",
                "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
                privatePEM,
            ]
            for pem in garbage {
                for scheme in CryptoVerifier.supportedSchemes {
                    let key = PublicKey(scheme: scheme, pem: pem)
                    #expect(throws: HotUpdateError(.signatureInvalid, "")) {
                        try verifier.verify(signature: Data(repeating: 0, count: 64), of: Data(), with: key)
                    }
                    #expect(throws: HotUpdateError(.signatureInvalid, "")) { try verifier.keyID(of: key) }
                }
            }
        }
    }

    @Test("An unknown scheme throws .unsupported")
    func unknownScheme() async throws {
        try await withTemporaryDirectory { directory in
            let fixture = KeyFixture(directory: directory, kind: .ed25519)
            let (_, publicKey) = try await fixture.makeKey("ed", ed25519: true)
            let key = try fixture.publicKey(publicKey, scheme: PublicKey.Scheme(rawValue: "ecdsa-p256-sha256"))
            #expect(throws: HotUpdateError(.unsupported, "")) {
                try verifier.verify(signature: Data(), of: Data(), with: key)
            }
        }
    }

    @Test("keyID is the SHA-256 of the DER SubjectPublicKeyInfo", arguments: [true, false])
    func keyID(ed25519: Bool) async throws {
        try await withTemporaryDirectory { directory in
            let fixture = KeyFixture(directory: directory, kind: ed25519 ? .ed25519 : .rsaPKCS1)
            let (_, publicKey) = try await fixture.makeKey("k", ed25519: ed25519)
            let (_, otherPublicKey) = try await fixture.makeKey("o", ed25519: ed25519)
            let expected = firstWord(
                of: try await run([
                    "sh", "-c", "openssl pkey -pubin -in \"$1\" -outform DER | sha256sum", "sh", publicKey.path,
                ])
            )
            #expect(expected.count == 64)
            let key = try fixture.publicKey(publicKey)
            #expect(try verifier.keyID(of: key) == expected)
            // Independent of the scheme and of PEM whitespace.
            let loose = PublicKey(
                scheme: .rsaPSSSHA256,
                pem: "\n" + key.pem.replacingOccurrences(of: "\n", with: "\r\n")
            )
            #expect(try verifier.keyID(of: loose) == expected)
            #expect(try verifier.keyID(of: try fixture.publicKey(otherPublicKey)) != expected)
        }
    }
}

@Suite("SubjectPublicKeyInfo parsing (used where libcrypto is absent)")
struct SubjectPublicKeyInfoTests {
    @Test("Reads the algorithm and key bits of openssl's keys", arguments: [true, false])
    func parse(ed25519: Bool) async throws {
        try await withTemporaryDirectory { directory in
            let fixture = KeyFixture(directory: directory, kind: ed25519 ? .ed25519 : .rsaPKCS1)
            let (_, publicKey) = try await fixture.makeKey("k", ed25519: ed25519)
            let der = Array(try await run(["openssl", "pkey", "-pubin", "-in", publicKey.path, "-outform", "DER"]))
            let info = try SubjectPublicKeyInfo(pem: try String(contentsOf: publicKey, encoding: .utf8))
            #expect(info.der == der)
            if ed25519 {
                #expect(info.algorithmOID == "1.3.101.112")
                #expect(info.keyBits.count == 32)
                #expect(info.keyBits == Array(der.suffix(32)))
                #expect(info.fits(.ed25519) && !info.fits(.rsaPKCS1SHA256) && !info.fits(.rsaPSSSHA256))
            } else {
                #expect(info.algorithmOID == "1.2.840.113549.1.1.1")
                let pkcs1 = Array(
                    try await run([
                        "openssl", "rsa", "-pubin", "-in", publicKey.path, "-RSAPublicKey_out", "-outform", "DER",
                    ])
                )
                #expect(try info.rsaPublicKeyDER() == pkcs1)
                #expect(!info.fits(.ed25519) && info.fits(.rsaPKCS1SHA256) && info.fits(.rsaPSSSHA256))
            }
            // Truncated or extended DER is refused.
            #expect(throws: HotUpdateError(.signatureInvalid, "")) {
                try SubjectPublicKeyInfo(der: Array(der.dropLast()))
            }
            #expect(throws: HotUpdateError(.signatureInvalid, "")) { try SubjectPublicKeyInfo(der: der + [0]) }
        }
    }

    @Test("Refuses text that is not a PEM public key")
    func refuses() {
        for pem in [
            "", "hello", "-----BEGIN PUBLIC KEY-----\n!!!\n-----END PUBLIC KEY-----",
            "-----BEGIN PUBLIC KEY-----\nMAA=\n-----END PUBLIC KEY-----",
        ] {
            #expect(throws: HotUpdateError(.signatureInvalid, "")) { try SubjectPublicKeyInfo(pem: pem) }
        }
    }
}
