// WinZip AES's primitives over libcrypto: off Apple platforms with the `Libcrypto` trait (on by
// default), unless `SwiftCrypto` is on too (swift-crypto then wins, as in HotVerify).
#if Libcrypto && !SwiftCrypto && !canImport(Darwin) && canImport(CHotCrypto)
import CHotCrypto
import HotCore

/// The crypto library WinZip AES runs on in this build: libcrypto (OpenSSL 3).
enum CipherBackend {
    /// The library's name, for messages and the benchmark's report.
    static let name = "libcrypto"
    /// Why AES is unavailable, or nil: it is available.
    static let missing: String? = nil

    /// PBKDF2-HMAC-SHA1 of `password` and `salt`: `count` bytes.
    ///
    /// - Throws: `HotUpdateError.Code.internalInconsistency` when libcrypto fails.
    static func pbkdf2SHA1(password: [UInt8], salt: [UInt8], iterations: Int, count: Int) throws -> [UInt8] {
        var output = [UInt8](repeating: 0, count: count)
        let status = password.withUnsafeBufferPointer { passwordBytes in
            salt.withUnsafeBufferPointer { saltBytes in
                output.withUnsafeMutableBufferPointer { outputBytes in
                    passwordBytes.withMemoryRebound(to: CChar.self) { passwordChars in
                        PKCS5_PBKDF2_HMAC_SHA1(
                            passwordChars.baseAddress,
                            Int32(passwordChars.count),
                            saltBytes.baseAddress,
                            Int32(saltBytes.count),
                            Int32(iterations),
                            Int32(count),
                            outputBytes.baseAddress
                        )
                    }
                }
            }
        }
        guard status == 1 else { throw failure("deriving a WinZip AES key (PBKDF2)") }
        return output
    }

    static func failure(_ doing: String) -> HotUpdateError {
        let code = ERR_get_error()
        var text = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &text, text.count)
        let reason = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return HotUpdateError(.internalInconsistency, "libcrypto failed \(doing): \(reason)")
    }
}

/// AES in the encryption direction over whole 16-byte blocks, in place (libcrypto's ECB mode,
/// which pipelines the blocks through AES-NI or the processor's equivalent).
final class AESBlockEncryptor {
    private let context: OpaquePointer

    /// Keys the cipher; `key` holds 16, 24 or 32 bytes.
    ///
    /// - Throws: `HotUpdateError.Code.internalInconsistency` when libcrypto fails.
    init(key: [UInt8]) throws {
        let cipher: OpaquePointer?
        switch key.count {
        case 16: cipher = EVP_aes_128_ecb()
        case 24: cipher = EVP_aes_192_ecb()
        default: cipher = EVP_aes_256_ecb()
        }
        guard let context = EVP_CIPHER_CTX_new() else { throw CipherBackend.failure("making an AES context") }
        self.context = context
        guard EVP_EncryptInit_ex(context, cipher, nil, key, nil) == 1, EVP_CIPHER_CTX_set_padding(context, 0) == 1
        else {
            EVP_CIPHER_CTX_free(context)
            throw CipherBackend.failure("keying AES")
        }
    }

    deinit { EVP_CIPHER_CTX_free(context) }

    /// Encrypts `blocks` (a multiple of 16 bytes) in place, each block on its own.
    ///
    /// - Throws: `HotUpdateError.Code.internalInconsistency` when libcrypto fails.
    func encrypt(_ blocks: UnsafeMutableRawBufferPointer) throws {
        guard let base = blocks.baseAddress?.assumingMemoryBound(to: UInt8.self), !blocks.isEmpty else { return }
        var produced: Int32 = 0
        guard EVP_EncryptUpdate(context, base, &produced, base, Int32(blocks.count)) == 1,
            Int(produced) == blocks.count
        else { throw CipherBackend.failure("encrypting AES blocks") }
    }
}

/// An incremental HMAC-SHA1 (libcrypto's `EVP_MAC`).
final class HMACSHA1 {
    private let context: OpaquePointer

    /// Keys the MAC.
    ///
    /// - Throws: `HotUpdateError.Code.internalInconsistency` when libcrypto fails.
    init(key: [UInt8]) throws {
        guard let context = key.withUnsafeBufferPointer({ hot_hmac_sha1_new($0.baseAddress, $0.count) }) else {
            throw CipherBackend.failure("keying HMAC-SHA1")
        }
        self.context = context
    }

    deinit { EVP_MAC_CTX_free(context) }

    /// Adds bytes.
    ///
    /// - Throws: `HotUpdateError.Code.internalInconsistency` when libcrypto fails.
    func update(_ bytes: UnsafeRawBufferPointer) throws {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        guard EVP_MAC_update(context, base.assumingMemoryBound(to: UInt8.self), bytes.count) == 1 else {
            throw CipherBackend.failure("computing HMAC-SHA1")
        }
    }

    /// The 20-byte code of everything added.
    ///
    /// - Throws: `HotUpdateError.Code.internalInconsistency` when libcrypto fails.
    func finalize() throws -> [UInt8] {
        var code = [UInt8](repeating: 0, count: 20)
        var length = 0
        let status = code.withUnsafeMutableBufferPointer { EVP_MAC_final(context, $0.baseAddress, &length, $0.count) }
        guard status == 1, length == 20 else { throw CipherBackend.failure("finishing HMAC-SHA1") }
        return code
    }
}
#endif
