import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotVerify
import Testing

@testable import HotPublish

/// Release keys in a SoftHSM2 token, through the library's API alone: the keys are generated
/// inside the token by `pkcs11-tool` and only their public halves leave it.
@Suite("PKCS#11 signer over a SoftHSM2 token")
struct PKCS11SignerTests {
    let verifier = CryptoVerifier()

    /// `hex` as bytes.
    static func bytes(hex: String) -> Data {
        var data = Data()
        var index = hex.startIndex
        while index < hex.endIndex, let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) {
            data.append(UInt8(hex[index..<next], radix: 16) ?? 0)
            index = next
        }
        return data
    }

    @Test(
        "Ed25519 and RSA (PSS and PKCS#1 v1.5) keys sign inside the token; the exported public keys verify it",
        arguments: [("ed25519", PublicKey.Scheme.ed25519), ("rsa", .rsaPSSSHA256), ("rsa", .rsaPKCS1SHA256)]
    )
    func signsWithTokenKeys(kind: String, scheme: PublicKey.Scheme) async throws {
        let token = try await SoftHSMToken.shared()
        let key = kind == "ed25519" ? token.ed25519 : token.rsa
        let signer = try PKCS11Signer(uri: token.uri(key), rsaScheme: scheme)
        // The signer's public key is the one the token exports: same key id.
        let exported = PublicKey(scheme: scheme, pem: key.publicKeyPEM)
        #expect(signer.publicKey.scheme == scheme)
        #expect(try verifier.keyID(of: signer.publicKey) == verifier.keyID(of: exported))

        let message = Data("release 42 of the web module".utf8)
        let signature = try signer.sign(message)
        #expect(signature.count == (kind == "ed25519" ? 64 : 256))
        #expect(try verifier.verify(signature: signature, of: message, with: exported))
        #expect(try !verifier.verify(signature: signature, of: Data("release 43".utf8), with: exported))
        // The other RSA scheme does not accept it.
        if kind == "rsa" {
            let other = PublicKey(
                scheme: scheme == .rsaPSSSHA256 ? .rsaPKCS1SHA256 : .rsaPSSSHA256,
                pem: key.publicKeyPEM
            )
            #expect(try !verifier.verify(signature: signature, of: message, with: other))
        }
    }

    @Test("a manifest signed through ReleaseKey by two token keys carries a valid signature of each")
    func signsAManifest() async throws {
        let token = try await SoftHSMToken.shared()
        let signers = try [token.uri(token.ed25519), token.uri(token.rsa, pin: token.pin)].map {
            try ReleaseKey.signer($0)
        }
        var body = SignedManifestBody(version: 7, expires: Date().addingTimeInterval(3_600))
        body.keys = try Dictionary(
            uniqueKeysWithValues: signers.map { (try verifier.keyID(of: $0.publicKey), .init($0.publicKey)) }
        )
        let signed = try body.canonicalBytes()
        let envelope = try SignedEnvelope.sign(signed, with: signers, verifier: verifier)
        let parsed = try SignedEnvelope.parse(try envelope.encoded())
        #expect(parsed.signatures.count == 2)
        let exported = [
            PublicKey(scheme: .ed25519, pem: token.ed25519.publicKeyPEM),
            PublicKey(scheme: .rsaPSSSHA256, pem: token.rsa.publicKeyPEM),
        ]
        for key in exported {
            let id = try verifier.keyID(of: key)
            let signature = try #require(parsed.signatures.first { $0.keyid == id })
            #expect(try verifier.verify(signature: Self.bytes(hex: signature.sig), of: parsed.signed, with: key))
        }
        #expect(try SignedManifestBody.decode(parsed.signed).version == 7)
    }

    @Test("a wrong PIN, a missing key or token, a key of another type, no PIN, a module that is not one: typed errors")
    func refusals() async throws {
        let token = try await SoftHSMToken.shared()
        let module = token.modulePath
        func code(_ uri: String) -> HotUpdateError.Code? {
            do {
                _ = try PKCS11Signer(uri: uri)
                return nil
            } catch let error as HotUpdateError {
                // The PIN given in the URI is never repeated in a message.
                #expect(!error.description.contains("0000-wrong"))
                return error.code
            } catch {
                return nil
            }
        }
        #expect(code(token.uri(token.ed25519, pin: "0000-wrong")) == .authenticationFailed)
        // Also while another signer of this process holds the token logged in (PKCS#11 logs in
        // the process, and the token then checks no PIN).
        let holder = try PKCS11Signer(uri: token.uri(token.rsa))
        #expect(code(token.uri(token.ed25519, pin: "0000-wrong")) == .authenticationFailed)
        #expect(try holder.sign(Data("held".utf8)).count == 256)
        #expect(
            code("pkcs11:token=release;object=no-such-key?module-path=\(module)&pin-value=\(token.pin)") == .notFound
        )
        #expect(
            code("pkcs11:token=absent;object=release-rsa?module-path=\(module)&pin-value=\(token.pin)") == .notFound
        )
        #expect(code(token.uri(token.p256)) == .unsupported)
        #expect(code("pkcs11:token=release;object=release-rsa?module-path=\(module)") == .invalidArgument)
        #expect(code("pkcs11:token=release;object=release-rsa?pin-value=\(token.pin)") == .invalidArgument)
        // A shared library that is not a PKCS#11 module (no C_GetFunctionList).
        let zlib = ["/usr/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/aarch64-linux-gnu/libz.so.1", "/lib/libz.so.1"]
            .first { FileManager.default.fileExists(atPath: $0) }
        let notAModule = try #require(zlib)
        #expect(
            code("pkcs11:token=release;object=release-rsa?module-path=\(notAModule)&pin-value=\(token.pin)")
                == .invalidArgument
        )
        #expect(
            code("pkcs11:token=release;object=release-rsa?module-path=/nonexistent.so&pin-value=1") == .invalidArgument
        )
        #expect(code("pkcs11:token=release;object=%zz") == .invalidArgument)
        let missingPINFile =
            "pkcs11:token=release;object=release-rsa?module-path=\(module)&pin-source=file:/nonexistent-pin"
        #expect(code(missingPINFile) == .notFound)
        // After the refusals the token still signs.
        #expect(try PKCS11Signer(uri: token.uri(token.ed25519)).sign(Data("still here".utf8)).count == 64)
    }

    @Test("a pin-value never appears in the signer's URI")
    func redactsPIN() {
        #expect(
            PKCS11Signer.redactingPIN("pkcs11:object=k?module-path=/m.so&pin-value=1234&x=y")
                == "pkcs11:object=k?module-path=/m.so&pin-value=…&x=y"
        )
    }
}
