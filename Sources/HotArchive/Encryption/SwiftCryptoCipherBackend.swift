// WinZip AES's primitives over swift-crypto: what Apple platforms compile, and Linux with the
// `SwiftCrypto` trait (the Apple configuration), so the code an iOS app runs is the code tested here.
#if SwiftCrypto || canImport(Darwin)
import Crypto
import Foundation
import HotCore
import _CryptoExtras

/// The crypto library WinZip AES runs on in this build: swift-crypto (CryptoKit on Apple platforms).
enum CipherBackend {
    /// The library's name, for messages and the benchmark's report.
    static let name = "swift-crypto"
    /// Why AES is unavailable, or nil: it is available.
    static let missing: String? = nil

    /// PBKDF2-HMAC-SHA1 of `password` and `salt`: `count` bytes.
    ///
    /// - Throws: `HotUpdateError.Code.internalInconsistency` when swift-crypto fails.
    static func pbkdf2SHA1(password: [UInt8], salt: [UInt8], iterations: Int, count: Int) throws -> [UInt8] {
        do {
            // WinZip's 1000 rounds are below swift-crypto's floor for new passwords: the format fixes them.
            let key = try KDF.Insecure.PBKDF2.deriveKey(
                from: password,
                salt: salt,
                using: .insecureSHA1,
                outputByteCount: count,
                unsafeUncheckedRounds: iterations
            )
            return key.withUnsafeBytes { Array($0) }
        } catch {
            throw HotUpdateError(
                .internalInconsistency,
                "swift-crypto failed deriving a WinZip AES key (PBKDF2)",
                cause: error
            )
        }
    }
}

/// AES in the encryption direction over whole 16-byte blocks, in place.
///
/// swift-crypto has no ECB mode, and its block function (`AES.permute`) expands the key for
/// every block. Its CFB decryption computes every block's permutation in one call instead:
/// decrypting ciphertext `C₁…Cₙ` under IV `C₀` gives `Pⱼ = E(Cⱼ₋₁) ⊕ Cⱼ`. With `C₀` the first
/// block, `Cⱼ` the next ones and a zero block last, `E(Bⱼ) = Pⱼ₊₁ ⊕ Cⱼ₊₁` for every block `Bⱼ`.
final class AESBlockEncryptor {
    private let key: SymmetricKey
    /// The shifted blocks, reused from call to call.
    private var shifted: [UInt8] = []

    /// Keys the cipher; `key` holds 16, 24 or 32 bytes.
    init(key: [UInt8]) throws {
        self.key = SymmetricKey(data: key)
    }

    /// Encrypts `blocks` (a multiple of 16 bytes) in place, each block on its own.
    ///
    /// - Throws: `HotUpdateError.Code.internalInconsistency` when swift-crypto fails.
    func encrypt(_ blocks: UnsafeMutableRawBufferPointer) throws {
        guard blocks.count >= 16 else { return }
        shifted.removeAll(keepingCapacity: true)
        shifted.append(contentsOf: UnsafeRawBufferPointer(rebasing: blocks[16...]))
        shifted.append(contentsOf: repeatElement(0, count: 16))
        let plain: Data
        do {
            let iv = try AES._CFB.IV(ivBytes: UnsafeRawBufferPointer(rebasing: blocks[0..<16]))
            plain = try AES._CFB.decrypt(shifted, using: key, iv: iv)
        } catch {
            throw HotUpdateError(.internalInconsistency, "swift-crypto failed encrypting AES blocks", cause: error)
        }
        guard plain.count == blocks.count else {
            throw HotUpdateError(
                .internalInconsistency,
                "swift-crypto returned \(plain.count) bytes for \(blocks.count)"
            )
        }
        plain.withUnsafeBytes { plain in
            shifted.withUnsafeBytes { shifted in
                guard let target = blocks.baseAddress, let plain = plain.baseAddress, let shifted = shifted.baseAddress
                else { return }
                target.copyMemory(from: plain, byteCount: blocks.count)
                xorBytes(target, shifted, blocks.count)
            }
        }
    }
}

/// An incremental HMAC-SHA1 (swift-crypto's `HMAC<Insecure.SHA1>`).
final class HMACSHA1 {
    private var mac: HMAC<Insecure.SHA1>

    /// Keys the MAC.
    init(key: [UInt8]) throws {
        mac = HMAC<Insecure.SHA1>(key: SymmetricKey(data: key))
    }

    /// Adds bytes.
    func update(_ bytes: UnsafeRawBufferPointer) throws {
        mac.update(data: bytes)
    }

    /// The 20-byte code of everything added.
    func finalize() throws -> [UInt8] {
        Array(mac.finalize())
    }
}
#endif
