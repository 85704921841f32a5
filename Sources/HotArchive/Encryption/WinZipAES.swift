import HotCore

/// WinZip's AES encryption of ZIP entries (AE-1 and AE-2, <https://www.winzip.com/en/support/aes-encryption/>).
///
/// An entry's headers say method 99, set the encryption flag, and carry the AES extra field
/// (0x9901, 7 bytes: vendor version 1 for AE-1 or 2 for AE-2, vendor id "AE", strength 1, 2 or 3
/// for AES-128, -192 or -256, and the compression method of the data). Its data is a random salt
/// (8, 12 or 16 bytes), a 2-byte password verifier, the compressed bytes encrypted with AES in
/// counter mode, and a 10-byte authentication code: the first 10 bytes of HMAC-SHA1 of the
/// encrypted bytes. PBKDF2-HMAC-SHA1 (1000 iterations) of the password and the salt gives the AES
/// key, the HMAC key and the verifier, in that order. The counter is a 16-byte little-endian
/// number starting at 1 (not the big-endian counter of NIST's CTR mode).
///
/// AE-1 records the CRC-32 of the plain bytes and it is checked; AE-2 records 0 and only the
/// authentication code vouches for the bytes (it leaks nothing about short files' contents).
enum WinZipAES {
    /// The vendor id "AE", as the field stores it (little-endian).
    static let vendorID: UInt16 = 0x4541
    /// The extra field's data length.
    static let extraFieldLength = 7
    /// The password verifier's length.
    static let verifierLength = 2
    /// The authentication code's length.
    static let authenticationCodeLength = 10
    /// PBKDF2's iterations, fixed by the format.
    static let iterations = 1000

    /// AES-128, -192 or -256, as the extra field's strength byte says.
    enum Strength: UInt8, Sendable, CaseIterable {
        case aes128 = 1
        case aes192 = 2
        case aes256 = 3

        /// The AES key's length in bytes.
        var keyLength: Int {
            switch self {
            case .aes128: 16
            case .aes192: 24
            case .aes256: 32
            }
        }

        /// The salt's length in bytes: half the key's.
        var saltLength: Int { keyLength / 2 }

        /// The bytes an entry's data holds besides the encrypted bytes.
        var overhead: Int { saltLength + WinZipAES.verifierLength + WinZipAES.authenticationCodeLength }

        var bits: Int { keyLength * 8 }
    }

    /// The AES extra field as found in a header, not yet judged.
    struct ExtraField: Sendable, Hashable {
        /// 1: AE-1, 2: AE-2.
        var vendorVersion: UInt16
        /// "AE" for every writer that follows WinZip.
        var vendorID: UInt16
        /// 1, 2 or 3 (AES-128, -192, -256).
        var strength: UInt8
        /// The compression method of the encrypted data.
        var method: UInt16
        /// The field's data length (7 when well formed).
        var length: Int

        /// Reads the field's data; a field too short to hold all of it reads as zeros past its end
        /// (and is refused for its ``length``).
        init(_ field: UnsafeRawBufferPointer) {
            var padded = [UInt8](repeating: 0, count: WinZipAES.extraFieldLength)
            for index in 0..<min(field.count, padded.count) { padded[index] = field[index] }
            vendorVersion = padded.uint16LE(at: 0)
            vendorID = padded.uint16LE(at: 2)
            strength = padded[4]
            method = padded.uint16LE(at: 5)
            length = field.count
        }

        init(vendorVersion: UInt16, strength: Strength, method: UInt16) {
            self.vendorVersion = vendorVersion
            vendorID = WinZipAES.vendorID
            self.strength = strength.rawValue
            self.method = method
            length = WinZipAES.extraFieldLength
        }

        /// The field as written into a header: id, length and data.
        var bytes: [UInt8] {
            var bytes: [UInt8] = []
            bytes.appendLE(ZipFormat.extraWinZipAES)
            bytes.appendLE(UInt16(WinZipAES.extraFieldLength))
            bytes.appendLE(vendorVersion)
            bytes.appendLE(vendorID)
            bytes.append(strength)
            bytes.appendLE(method)
            return bytes
        }
    }

    /// An entry's parameters once its extra field has been judged readable.
    struct Parameters: Sendable, Hashable {
        /// 1 (AE-1: the CRC-32 is checked) or 2 (AE-2: it is not).
        var vendorVersion: UInt16
        var strength: Strength
        /// The compression method of the encrypted data: stored or deflate.
        var method: UInt16

        var checksCRC: Bool { vendorVersion == 1 }
    }

    /// Judges `entry`'s AES extra field.
    ///
    /// - Throws: `HotUpdateError.Code.corruptArchive` when the field is missing, malformed or not
    ///   WinZip's ("AE"), or the entry lacks the encryption flag;
    ///   `HotUpdateError.Code.unsupportedEncryption` for a vendor version other than 1 and 2 or a
    ///   strength other than 1, 2 and 3; `HotUpdateError.Code.unsupportedMethod` when the data's
    ///   method is neither stored nor deflate, unless `anyMethod` (a reader with more methods).
    static func parameters(
        of entry: ZipEntryRecord,
        name: String,
        archive: String,
        anyMethod: Bool = false
    ) throws -> Parameters {
        guard let field = entry.aes else {
            throw ArchiveError.corrupt(
                archive,
                "it says WinZip AES (method 99) but has no AES extra field (0x9901) saying how",
                entry: name
            )
        }
        guard field.length == extraFieldLength else {
            throw ArchiveError.corrupt(
                archive,
                "its AES extra field holds \(field.length) bytes, not \(extraFieldLength)",
                entry: name
            )
        }
        guard field.vendorID == vendorID else {
            throw ArchiveError.corrupt(
                archive,
                "its AES extra field names vendor 0x\(String(field.vendorID, radix: 16)), not WinZip's \"AE\"",
                entry: name
            )
        }
        guard field.vendorVersion == 1 || field.vendorVersion == 2 else {
            throw ArchiveError.make(
                .unsupportedEncryption,
                archive,
                "its AES extra field says vendor version \(field.vendorVersion); only AE-1 (1) and AE-2 (2) exist",
                entry: name
            )
        }
        guard let strength = Strength(rawValue: field.strength) else {
            throw ArchiveError.make(
                .unsupportedEncryption,
                archive,
                "its AES extra field says key strength \(field.strength); only 1, 2 and 3 (AES-128, -192, -256) exist",
                entry: name
            )
        }
        guard entry.isEncrypted else {
            throw ArchiveError.corrupt(
                archive,
                "it says WinZip AES (method 99) but its encryption flag is not set",
                entry: name
            )
        }
        guard anyMethod || field.method == ZipFormat.methodStored || field.method == ZipFormat.methodDeflate else {
            throw ArchiveError.make(
                .unsupportedMethod,
                archive,
                "it is WinZip AES-encrypted \(ZipFormat.methodName(field.method)) data (method \(field.method)); only stored (0) and deflate (8) are supported",
                entry: name
            )
        }
        return Parameters(vendorVersion: field.vendorVersion, strength: strength, method: field.method)
    }

    /// The keys PBKDF2 derives from a password and an entry's salt.
    struct Keys {
        var encryption: [UInt8]
        var authentication: [UInt8]
        var verifier: [UInt8]

        /// Derives the keys of `strength` from `password` and `salt`.
        ///
        /// - Throws: `HotUpdateError.Code.unsupportedEncryption` when the build has no crypto
        ///   library; `.internalInconsistency` when it fails.
        init(password: [UInt8], salt: [UInt8], strength: Strength) throws {
            let length = strength.keyLength
            let bytes = try CipherBackend.pbkdf2SHA1(
                password: password,
                salt: salt,
                iterations: WinZipAES.iterations,
                count: 2 * length + WinZipAES.verifierLength
            )
            encryption = Array(bytes[0..<length])
            authentication = Array(bytes[length..<(2 * length)])
            verifier = Array(bytes[(2 * length)...])
        }
    }
}
