/// One entry as the central directory describes it, with the zip64 extra field
/// applied and the offsets made absolute (any self-extractor prefix added).
struct ZipEntryRecord: Sendable {
    /// The position in the central directory.
    var index: Int
    /// The name's bytes, undecoded.
    var rawName: [UInt8]
    /// "Version made by": host in the high byte.
    var versionMadeBy: UInt16
    var flags: UInt16
    var method: UInt16
    var dosTime: UInt16
    var dosDate: UInt16
    var crc32: UInt32
    var compressedSize: UInt64
    var uncompressedSize: UInt64
    /// Absolute offset of the local header in the file.
    var localHeaderOffset: UInt64
    var externalAttributes: UInt32
    /// The UTF-8 name of an Info-ZIP Unicode Path extra field whose CRC matches `rawName`.
    var unicodePath: [UInt8]?
    /// Whether either header carried a zip64 extra field (the data descriptor then has 8-byte sizes).
    var usesZip64: Bool
    /// The local header's name when its bytes differ from the central one (they then decode alike).
    var localName: [UInt8]?
    /// Absolute offset of the entry's data; known once the local header has been read.
    var dataOffset: UInt64 = 0
    /// The WinZip AES extra field (0x9901), as found; judged when the entry is read.
    var aes: WinZipAES.ExtraField?
    /// For a WinZip AES entry (method 99), the compression method of the encrypted data.
    var aesMethod: UInt16? { aes?.method }
    /// The SHA-256 of the uncompressed bytes that the central directory records
    /// (`ZipFormat.extraSHA256`), when it records one.
    var sha256: [UInt8]?

    var isEncrypted: Bool { flags & ZipFormat.flagEncrypted != 0 }
    var hasDataDescriptor: Bool { flags & ZipFormat.flagDataDescriptor != 0 }
    var hostSystem: UInt8 { UInt8(truncatingIfNeeded: versionMadeBy >> 8) }
    var hasUnixMode: Bool { hostSystem == ZipFormat.hostUnix || hostSystem == ZipFormat.hostMacOSX }
    /// The Unix mode from the external attributes, when the host records one.
    var unixMode: UInt16? {
        guard hasUnixMode else { return nil }
        let mode = UInt16(truncatingIfNeeded: externalAttributes >> 16)
        return mode == 0 ? nil : mode
    }
    /// The name for messages before it has been decoded properly.
    var displayName: String { String(decoding: rawName, as: UTF8.self) }
}
