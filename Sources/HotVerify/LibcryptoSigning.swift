#if Libcrypto && !SwiftCrypto && !canImport(Darwin) && canImport(CHotCrypto)
import CHotCrypto
import Foundation
import HotCore

/// Key generation and signing over libcrypto (`EVP_PKEY_keygen`, `EVP_DigestSign`).
enum SigningBackend {
    static func generate(_ kind: KeyKind) throws -> String {
        let isRSA = kind.scheme != .ed25519
        guard let context = EVP_PKEY_CTX_new_id(isRSA ? EVP_PKEY_RSA : EVP_PKEY_ED25519, nil) else {
            throw HotUpdateError(
                .internalInconsistency,
                "libcrypto cannot make a key context: \(Libcrypto.takeErrors())"
            )
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1,
            !isRSA || EVP_PKEY_CTX_set_rsa_keygen_bits(context, Int32(kind.bits)) == 1
        else {
            throw HotUpdateError(.unsupported, "libcrypto cannot generate \(kind) keys: \(Libcrypto.takeErrors())")
        }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen(context, &key) == 1, let key else {
            throw HotUpdateError(
                .internalInconsistency,
                "libcrypto failed to generate a \(kind) key: \(Libcrypto.takeErrors())"
            )
        }
        defer { EVP_PKEY_free(key) }
        return try writePEM { PEM_write_bio_PKCS8PrivateKey($0, key, nil, nil, 0, nil, nil) }
    }

    /// The public PEM of a private key, and whether it is RSA.
    static func publicKey(ofPrivatePEM pem: String) throws -> (String, Bool) {
        let key = try Libcrypto.readPrivateKey(pem)
        defer { EVP_PKEY_free(key) }
        let type = EVP_PKEY_get_base_id(key)
        guard type == EVP_PKEY_ED25519 || type == EVP_PKEY_RSA else {
            let name = EVP_PKEY_get0_type_name(key).map { String(cString: $0) } ?? "type \(type)"
            throw HotUpdateError(.signatureInvalid, "the private key is \(name), not Ed25519 or RSA")
        }
        return (try writePEM { PEM_write_bio_PUBKEY($0, key) }, type == EVP_PKEY_RSA)
    }

    static func sign(_ message: Data, privatePEM: String, scheme: PublicKey.Scheme) throws -> Data {
        let key = try Libcrypto.readPrivateKey(privatePEM)
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else {
            throw HotUpdateError(.internalInconsistency, "libcrypto could not allocate a signing context")
        }
        defer { EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer?
        let md: OpaquePointer? = scheme == .ed25519 ? nil : EVP_sha256()
        guard EVP_DigestSignInit(context, &keyContext, md, nil, key) == 1 else {
            throw HotUpdateError(
                .signatureInvalid,
                "libcrypto cannot sign with this \(scheme) key: \(Libcrypto.takeErrors())"
            )
        }
        if scheme != .ed25519, let keyContext {
            let configured =
                scheme == .rsaPSSSHA256
                ? EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1
                    && EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, RSA_PSS_SALTLEN_DIGEST) == 1
                    && EVP_PKEY_CTX_set_rsa_mgf1_md(keyContext, EVP_sha256()) == 1
                : EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PADDING) == 1
            guard configured else {
                throw HotUpdateError(.signatureInvalid, "libcrypto cannot set up \(scheme): \(Libcrypto.takeErrors())")
            }
        }
        let signature = message.withUnsafeBytes { raw -> [UInt8]? in
            Libcrypto.withNonNullBase(raw) { base -> [UInt8]? in
                var length = 0
                guard EVP_DigestSign(context, nil, &length, base, raw.count) == 1 else { return nil }
                var signature = [UInt8](repeating: 0, count: length)
                guard EVP_DigestSign(context, &signature, &length, base, raw.count) == 1 else { return nil }
                return Array(signature.prefix(length))
            }
        }
        guard let signature else {
            throw HotUpdateError(
                .signatureInvalid,
                "libcrypto failed to sign with \(scheme): \(Libcrypto.takeErrors())"
            )
        }
        return Data(signature)
    }

    /// Runs a PEM writer into a memory BIO and returns what it wrote.
    private static func writePEM(_ write: (OpaquePointer) -> Int32) throws -> String {
        guard let bio = BIO_new(BIO_s_mem()) else {
            throw HotUpdateError(.internalInconsistency, "libcrypto could not allocate a memory BIO")
        }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else {
            throw HotUpdateError(
                .internalInconsistency,
                "libcrypto cannot write the key as PEM: \(Libcrypto.takeErrors())"
            )
        }
        let count = Int(BIO_ctrl_pending(bio))
        var buffer = [UInt8](repeating: 0, count: count)
        let read = BIO_read(bio, &buffer, Int32(count))
        guard read == count else {
            throw HotUpdateError(.internalInconsistency, "libcrypto returned \(read) of \(count) PEM bytes")
        }
        return String(decoding: buffer, as: UTF8.self)
    }
}
#endif
