// A build with no crypto library for WinZip AES: off Apple platforms with neither the `Libcrypto`
// trait (on by default) nor `SwiftCrypto` (`--disable-default-traits` alone), or where libcrypto
// is missing. AES entries are refused with `unsupportedEncryption`, naming the traits.
#if !SwiftCrypto && !canImport(Darwin) && !(Libcrypto && canImport(CHotCrypto))
import HotCore

/// No crypto library in this build: WinZip AES is refused.
enum CipherBackend {
    /// The library's name, for messages and the benchmark's report.
    static let name = "none"
    /// Why AES is unavailable.
    static let missing: String? =
        "this build of HotArchive has no crypto library for WinZip AES: build it with the package trait "
        + "'Libcrypto' (on by default) or 'SwiftCrypto'"

    /// Always throws.
    ///
    /// - Throws: `HotUpdateError.Code.unsupportedEncryption`.
    static func pbkdf2SHA1(password: [UInt8], salt: [UInt8], iterations: Int, count: Int) throws -> [UInt8] {
        throw HotUpdateError(.unsupportedEncryption, missing ?? "")
    }
}

/// No AES without a crypto library: it cannot be created.
final class AESBlockEncryptor {
    /// Always throws.
    ///
    /// - Throws: `HotUpdateError.Code.unsupportedEncryption`.
    init(key: [UInt8]) throws {
        throw HotUpdateError(.unsupportedEncryption, CipherBackend.missing ?? "")
    }

    /// Never reached: no instance can exist.
    func encrypt(_ blocks: UnsafeMutableRawBufferPointer) throws {}
}

/// No HMAC without a crypto library: it cannot be created.
final class HMACSHA1 {
    /// Always throws.
    ///
    /// - Throws: `HotUpdateError.Code.unsupportedEncryption`.
    init(key: [UInt8]) throws {
        throw HotUpdateError(.unsupportedEncryption, CipherBackend.missing ?? "")
    }

    /// Never reached: no instance can exist.
    func update(_ bytes: UnsafeRawBufferPointer) throws {}

    /// Never reached: no instance can exist.
    func finalize() throws -> [UInt8] { [] }
}
#endif
