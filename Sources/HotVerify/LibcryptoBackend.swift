// The default backend on Linux and the other platforms with OpenSSL 3 (the `Libcrypto` trait, on
// by default); Apple platforms and the `SwiftCrypto` trait use SwiftCryptoBackend.swift instead.
#if Libcrypto && !SwiftCrypto && !canImport(Darwin) && canImport(CHotCrypto)
import CHotCrypto
import Foundation
import HotCore

/// An incremental MD5 or SHA-256 over libcrypto's `EVP_MD_CTX`.
///
/// Used by one task at a time. ``finalize()`` may be called again and returns the same
/// digest; bytes added after it are ignored.
///
/// ```swift
/// let hasher = try CryptoHasher(algorithm: .sha256)
/// for try await chunk in response.body { hasher.update(chunk) }
/// let digest = hasher.finalize()
/// ```
public final class CryptoHasher: DigestHasher {
    /// The algorithm this hasher computes.
    public let algorithm: Digest.Algorithm
    private let context: OpaquePointer
    private var result: Digest?

    /// Creates a hasher.
    ///
    /// - Parameter algorithm: `Digest.Algorithm.md5` or `Digest.Algorithm.sha256`.
    /// - Throws: `HotUpdateError.Code.unsupported` for another algorithm, or when libcrypto
    ///   refuses it (MD5 under a FIPS-only configuration).
    public init(algorithm: Digest.Algorithm) throws {
        let md: OpaquePointer?
        switch algorithm {
        case .sha256: md = EVP_sha256()
        case .md5: md = EVP_md5()
        default: throw CryptoVerifier.unsupportedDigest(algorithm)
        }
        guard let context = EVP_MD_CTX_new() else {
            throw HotUpdateError(.internalInconsistency, "libcrypto could not allocate a digest context")
        }
        guard EVP_DigestInit_ex(context, md, nil) == 1 else {
            EVP_MD_CTX_free(context)
            throw HotUpdateError(
                .unsupported,
                "libcrypto refuses digest '\(algorithm)': \(Libcrypto.takeErrors())"
            )
        }
        self.algorithm = algorithm
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Adds bytes.
    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard result == nil, let base = bytes.baseAddress, !bytes.isEmpty else { return }
        // Cannot fail for MD5/SHA-256 on an initialised context.
        _ = EVP_DigestUpdate(context, base, bytes.count)
    }

    /// Returns the digest of everything added.
    public func finalize() -> Digest {
        if let result { return result }
        var bytes = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let status = EVP_DigestFinal_ex(context, &bytes, &length)
        guard status == 1, let digest = try? Digest(algorithm: algorithm, bytes: Array(bytes.prefix(Int(length))))
        else {
            // Unreachable with a context that initialised: libcrypto itself is broken.
            preconditionFailure("libcrypto failed to finish a \(algorithm) digest: \(Libcrypto.takeErrors())")
        }
        result = digest
        return digest
    }
}

/// Signatures and key ids over libcrypto.
enum CryptoBackend {
    /// The library behind ``CryptoVerifier`` and ``CryptoSigner`` in this build.
    static let name = "libcrypto"

    static let supportedDigests: Set<Digest.Algorithm> = [.md5, .sha256]

    static func verify(signature: Data, of message: Data, with key: PublicKey) throws -> Bool {
        let pkey = try Libcrypto.readPublicKey(key.pem)
        defer { EVP_PKEY_free(pkey) }
        try check(pkey, fits: key.scheme)
        if key.scheme == .rsaPKCS1Raw {
            return try verifyRecovered(signature: signature, of: message, with: pkey)
        }

        guard let context = EVP_MD_CTX_new() else {
            throw HotUpdateError(.internalInconsistency, "libcrypto could not allocate a verification context")
        }
        defer { EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer?
        // Ed25519 hashes internally and takes no digest; RSA signs a SHA-256.
        let md: OpaquePointer? = key.scheme == .ed25519 ? nil : EVP_sha256()
        guard EVP_DigestVerifyInit(context, &keyContext, md, nil, pkey) == 1 else {
            throw HotUpdateError(
                .signatureInvalid,
                "libcrypto cannot verify with this \(key.scheme) key: \(Libcrypto.takeErrors())"
            )
        }
        if key.scheme != .ed25519 {
            guard let keyContext else {
                throw HotUpdateError(.internalInconsistency, "libcrypto gave no key context for an RSA key")
            }
            let configured: Bool
            if key.scheme == .rsaPSSSHA256 {
                configured =
                    EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1
                    && EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, RSA_PSS_SALTLEN_DIGEST) == 1
                    && EVP_PKEY_CTX_set_rsa_mgf1_md(keyContext, EVP_sha256()) == 1
            } else {
                configured = EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PADDING) == 1
            }
            guard configured else {
                throw HotUpdateError(
                    .signatureInvalid,
                    "libcrypto cannot set up \(key.scheme) for this key: \(Libcrypto.takeErrors())"
                )
            }
        }
        return Libcrypto.isValid(signature: signature, of: message) {
            EVP_DigestVerify(context, $0, $1, $2, $3)
        }
    }

    /// RSA PKCS#1 v1.5 without a digest: libcrypto recovers the padded message with the
    /// public key and compares it with `message` byte for byte.
    private static func verifyRecovered(signature: Data, of message: Data, with pkey: OpaquePointer) throws -> Bool {
        guard let keyContext = EVP_PKEY_CTX_new(pkey, nil) else {
            throw HotUpdateError(.internalInconsistency, "libcrypto could not allocate a key context")
        }
        defer { EVP_PKEY_CTX_free(keyContext) }
        guard EVP_PKEY_verify_init(keyContext) == 1,
            EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PADDING) == 1
        else {
            throw HotUpdateError(
                .signatureInvalid,
                "libcrypto cannot set up rsa-pkcs1-raw for this key: \(Libcrypto.takeErrors())"
            )
        }
        return Libcrypto.isValid(signature: signature, of: message) {
            EVP_PKEY_verify(keyContext, $0, $1, $2, $3)
        }
    }

    static func keyID(ofPEM pem: String) throws -> String {
        let pkey = try Libcrypto.readPublicKey(pem)
        defer { EVP_PKEY_free(pkey) }
        let length = i2d_PUBKEY(pkey, nil)
        guard length > 0 else {
            throw HotUpdateError(.signatureInvalid, "libcrypto cannot encode the key as DER: \(Libcrypto.takeErrors())")
        }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_PUBKEY(pkey, &cursor)
        }
        guard written == length else {
            throw HotUpdateError(.signatureInvalid, "libcrypto cannot encode the key as DER: \(Libcrypto.takeErrors())")
        }
        let hasher = try CryptoHasher(algorithm: .sha256)
        der.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize().hex
    }

    private static func check(_ pkey: OpaquePointer, fits scheme: PublicKey.Scheme) throws {
        let type = EVP_PKEY_get_base_id(pkey)
        let fits: Bool
        switch scheme {
        case .ed25519: fits = type == EVP_PKEY_ED25519
        case .rsaPKCS1SHA256, .rsaPKCS1Raw: fits = type == EVP_PKEY_RSA
        case .rsaPSSSHA256: fits = type == EVP_PKEY_RSA || type == EVP_PKEY_RSA_PSS
        default: fits = false
        }
        guard fits else {
            let name = EVP_PKEY_get0_type_name(pkey).map { String(cString: $0) } ?? "type \(type)"
            throw CryptoVerifier.keyTypeMismatch(scheme, found: name)
        }
    }
}

/// Small helpers around libcrypto's conventions.
enum Libcrypto {
    /// Reads a PEM SubjectPublicKeyInfo; the caller frees the key with `EVP_PKEY_free`.
    static func readPublicKey(_ pem: String) throws -> OpaquePointer {
        try readPEM(
            pem,
            what: "public key",
            expected: "a PEM public key ('-----BEGIN PUBLIC KEY-----', SubjectPublicKeyInfo)"
        ) { PEM_read_bio_PUBKEY($0, nil, nil, nil) }
    }

    /// Reads an unencrypted PEM private key; the caller frees the key with `EVP_PKEY_free`.
    static func readPrivateKey(_ pem: String) throws -> OpaquePointer {
        try readPEM(
            pem,
            what: "private key",
            expected: "an unencrypted PEM private key ('-----BEGIN PRIVATE KEY-----')"
        ) { PEM_read_bio_PrivateKey($0, nil, nil, nil) }
    }

    /// Runs a PEM reader over the text of `pem` in a memory BIO.
    private static func readPEM(
        _ pem: String,
        what: String,
        expected: String,
        _ read: (OpaquePointer) -> OpaquePointer?
    ) throws -> OpaquePointer {
        ERR_clear_error()
        let bytes = Array(pem.utf8)
        guard !bytes.isEmpty, bytes.count < Int(Int32.max) else {
            throw HotUpdateError(.signatureInvalid, "the \(what) PEM is empty or too large (\(bytes.count) bytes)")
        }
        let key = bytes.withUnsafeBytes { raw -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return read(bio)
        }
        guard let key else {
            throw HotUpdateError(.signatureInvalid, "the key is not \(expected): \(takeErrors())")
        }
        return key
    }

    /// Calls `body` with the buffer's base address, or with a pointer to a dummy byte for
    /// an empty buffer (libcrypto wants non-null pointers even for zero lengths).
    /// Runs a libcrypto verification over the bytes of `signature` and `message`
    /// (`signature, signature length, message, message length`) and reads its status: 1 is a
    /// valid signature; 0 a wrong one; a negative value a malformed one (bad length, bad
    /// encoding). Only 1 is accepted; the error queue is left clean.
    static func isValid(
        signature: Data,
        of message: Data,
        _ verify: (UnsafePointer<UInt8>, Int, UnsafePointer<UInt8>, Int) -> Int32
    ) -> Bool {
        let status = signature.withUnsafeBytes { signatureBytes in
            message.withUnsafeBytes { messageBytes in
                withNonNullBase(signatureBytes) { signaturePointer in
                    withNonNullBase(messageBytes) { messagePointer in
                        verify(signaturePointer, signatureBytes.count, messagePointer, messageBytes.count)
                    }
                }
            }
        }
        ERR_clear_error()
        return status == 1
    }

    static func withNonNullBase<R>(_ buffer: UnsafeRawBufferPointer, _ body: (UnsafePointer<UInt8>) -> R) -> R {
        if let base = buffer.baseAddress, !buffer.isEmpty {
            return body(base.assumingMemoryBound(to: UInt8.self))
        }
        var dummy: UInt8 = 0
        return withUnsafePointer(to: &dummy) { body($0) }
    }

    /// Empties this thread's libcrypto error queue and returns its messages.
    static func takeErrors() -> String {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            messages.append(String(decoding: bytes, as: UTF8.self))
        }
        return messages.isEmpty ? "no detail from libcrypto" : messages.joined(separator: "; ")
    }
}
#endif
