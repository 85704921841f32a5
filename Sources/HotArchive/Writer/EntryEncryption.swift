import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension Deflater {
    /// Encrypts the entry `result` describes in place in the spill file, on the worker that
    /// compressed it, and records what the archive adds around it: WinZip AES's salt, password
    /// verifier and authentication code (AE-2, as 7-Zip writes it), or ZipCrypto's header.
    ///
    /// - Throws: `.fileSystem` when the spill file cannot be read or written back;
    ///   `.unsupportedEncryption` or `.internalInconsistency` from the crypto library.
    func encrypt(_ result: inout Result, with encryption: ZipWriter.Encryption) throws {
        let password = Array(encryption.password.utf8)
        var generator = SystemRandomNumberGenerator()
        if let strength = encryption.method.strength {
            let salt = (0..<strength.saltLength).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let keys = try WinZipAES.Keys(password: password, salt: salt, strength: strength)
            let cipher = try WinZipAESCipher(keys: keys)
            try transform(result) { try cipher.encrypt($0) }
            result.encryptionHeader = salt + keys.verifier
            result.encryptionTrailer = try cipher.authenticationCode()
            result.aes = WinZipAES.ExtraField(vendorVersion: 2, strength: strength, method: result.method)
        } else {
            var cipher = TraditionalCipher(password: password)
            // Eleven random bytes, then the CRC-32's high byte, which readers check the password by.
            var header = (0..<(ZipFormat.traditionalEncryptionHeaderLength - 1)).map { _ in
                UInt8.random(in: 0...255, using: &generator)
            }
            header.append(UInt8(truncatingIfNeeded: result.crc32 >> 24))
            header.withUnsafeMutableBytes { cipher.encrypt($0) }
            try transform(result) { cipher.encrypt($0) }
            result.encryptionHeader = header
        }
        result.isEncrypted = true
    }

    /// Runs `body` over the entry's spilled bytes in chunks, writing each chunk back in place.
    private func transform(_ result: Result, _ body: (UnsafeMutableRawBufferPointer) throws -> Void) throws {
        guard let base = scratch.baseAddress else { return }
        var done: UInt64 = 0
        while done < result.compressedSize {
            let count = Int(min(UInt64(scratch.count), result.compressedSize - done))
            let position = off_t(result.spillOffset + done)
            var got = 0
            while got < count {
                let n = pread(descriptor, base + got, count - got, position + off_t(got))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw ArchiveError.system("reading back", path: path, errno: errno)
                }
                guard n > 0 else {
                    throw HotUpdateError(.internalInconsistency, "the spill file '\(path)' ended early")
                }
                got += n
            }
            let chunk = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<count])
            try body(chunk)
            var put = 0
            while put < count {
                let n = pwrite(descriptor, base + put, count - put, position + off_t(put))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw ArchiveError.system("writing back", path: path, errno: errno)
                }
                put += n
            }
            done += UInt64(count)
        }
    }
}
