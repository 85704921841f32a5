/// Constants of the ZIP format (PKWARE APPNOTE 6.3.x).
enum ZipFormat {
    static let localHeaderSignature: UInt32 = 0x0403_4b50
    static let centralHeaderSignature: UInt32 = 0x0201_4b50
    static let endOfCentralDirectorySignature: UInt32 = 0x0605_4b50
    static let zip64EndSignature: UInt32 = 0x0606_4b50
    static let zip64LocatorSignature: UInt32 = 0x0706_4b50
    static let dataDescriptorSignature: UInt32 = 0x0807_4b50

    static let localHeaderLength = 30
    static let centralHeaderLength = 46
    static let endOfCentralDirectoryLength = 22
    static let zip64LocatorLength = 20
    static let zip64EndLength = 56
    static let maxCommentLength = 65_535

    /// General purpose flag bits.
    static let flagEncrypted: UInt16 = 1 << 0
    static let flagDataDescriptor: UInt16 = 1 << 3
    static let flagStrongEncryption: UInt16 = 1 << 6
    static let flagUTF8: UInt16 = 1 << 11

    /// Compression methods.
    static let methodStored: UInt16 = 0
    static let methodDeflate: UInt16 = 8
    static let methodAES: UInt16 = 99

    /// Extra field ids.
    static let extraZip64: UInt16 = 0x0001
    static let extraUnicodePath: UInt16 = 0x7075
    static let extraWinZipAES: UInt16 = 0x9901
    /// HotUpdate's own field, in the central directory only: the SHA-256 of the entry's
    /// uncompressed bytes (32 bytes), written by `ZipWriter` when it is given a hasher.
    /// Other readers skip it as they skip any field they do not know.
    static let extraSHA256: UInt16 = 0x4855
    /// The length of ``extraSHA256``'s data.
    static let sha256Length = 32

    /// "Version made by" hosts whose external attributes carry a Unix mode.
    static let hostUnix: UInt8 = 3
    static let hostMacOSX: UInt8 = 19

    /// The ZipCrypto header in front of an encrypted entry's data.
    static let traditionalEncryptionHeaderLength = 12

    /// A human name for a compression method, for messages.
    static func methodName(_ method: UInt16) -> String {
        switch method {
        case 0: return "stored"
        case 1: return "shrunk"
        case 6: return "imploded"
        case 8: return "deflate"
        case 9: return "deflate64"
        case 12: return "bzip2"
        case 14: return "LZMA"
        case 93: return "zstd"
        case 95: return "xz"
        case 96: return "JPEG"
        case 97: return "WavPack"
        case 98: return "PPMd"
        case 99: return "WinZip AES"
        default: return "unknown"
        }
    }
}
