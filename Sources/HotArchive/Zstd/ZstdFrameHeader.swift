import HotCore

/// A zstd frame's header (RFC 8878 §3.1.1.1).
struct ZstdFrameHeader {
    /// `0xFD2FB528`, little-endian.
    static let magic: UInt32 = 0xFD2F_B528
    /// Skippable frames: `0x184D2A50` to `0x184D2A5F`.
    static let skippableMask: UInt32 = 0xFFFF_FFF0
    static let skippableMagic: UInt32 = 0x184D_2A50

    /// The bytes the header takes, the magic number included.
    var size: Int
    /// The window the frame's matches may reach back over.
    var windowSize: UInt64
    /// The decoded size, when the frame records it.
    var contentSize: UInt64?
    /// Whether the frame is one segment: its window is its content.
    var isSingleSegment: Bool
    /// Whether a 32-bit XXH64 checksum of the content follows the last block.
    var hasChecksum: Bool
    /// The dictionary the frame was compressed with, 0 for none named.
    var dictionaryID: UInt32

    /// Reads the header of the frame at the start of `input`.
    ///
    /// - Throws: `corruptArchive` when `input` does not start with a zstd frame's header.
    init(_ input: UnsafeRawBufferPointer) throws {
        guard input.count >= 5 else { throw zstdCorrupt("the input is too short for a frame header") }
        let magic = UInt32(littleEndian: input.loadUnaligned(as: UInt32.self))
        guard magic == Self.magic else {
            throw zstdCorrupt(
                "the input does not start with zstd's magic number (it has 0x\(String(magic, radix: 16)))"
            )
        }
        let descriptor = input[4]
        let contentSizeFlag = Int(descriptor >> 6)
        isSingleSegment = descriptor & 0x20 != 0
        guard descriptor & 0x08 == 0 else { throw zstdCorrupt("a frame header sets its reserved bit") }
        hasChecksum = descriptor & 0x04 != 0
        let dictionaryIDSize = [0, 1, 2, 4][Int(descriptor & 3)]
        let contentSizeSize = [isSingleSegment ? 1 : 0, 2, 4, 8][contentSizeFlag]
        size = 5 + (isSingleSegment ? 0 : 1) + dictionaryIDSize + contentSizeSize
        guard input.count >= size else { throw zstdCorrupt("the input ends inside a frame header") }
        var offset = 5
        var window: UInt64 = 0
        if !isSingleSegment {
            let byte = input[offset]
            offset += 1
            let exponent = UInt64(byte >> 3)
            let mantissa = UInt64(byte & 7)
            let base: UInt64 = 1 << (10 + exponent)
            window = base + (base / 8) * mantissa
        }
        var id: UInt32 = 0
        for index in 0..<dictionaryIDSize { id |= UInt32(input[offset + index]) << (8 * UInt32(index)) }
        dictionaryID = id
        offset += dictionaryIDSize
        var content: UInt64 = 0
        for index in 0..<contentSizeSize { content |= UInt64(input[offset + index]) << (8 * UInt64(index)) }
        if contentSizeSize == 2 { content += 256 }
        contentSize = contentSizeSize == 0 ? nil : content
        windowSize = isSingleSegment ? content : window
    }
}
