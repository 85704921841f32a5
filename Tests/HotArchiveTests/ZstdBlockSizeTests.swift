import Foundation
import HotArchive
import HotCore
import Testing

/// A block holds, and decodes to, at most the frame's block size: 128 KiB, or the window when
/// that is smaller (RFC 8878 §3.1.1.2.3). Frames written by hand, since no encoder breaks it.
@Suite("zstd block size")
struct ZstdBlockSizeTests {
    /// A frame with no content size, `windowByte` as its window descriptor, and one raw
    /// block of `size` bytes.
    static func rawFrame(windowByte: UInt8, size: Int) -> Data {
        var frame = Data([0x28, 0xB5, 0x2F, 0xFD, 0x00, windowByte])
        let header = size << 3 | 1  // last block, raw
        frame.append(contentsOf: [UInt8(header & 0xFF), UInt8(header >> 8 & 0xFF), UInt8(header >> 16 & 0xFF)])
        frame.append(Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }))
        return frame
    }

    @Test("a raw block larger than a 1 KiB window is refused; the same block in a 2 KiB window decodes")
    func blockOverWindow() throws {
        let block = Self.rawFrame(windowByte: 0x08, size: 2_000)
        #expect(try ZstdDecoder().decode(block).count == 2_000)
        #expect(throws: HotUpdateError(.corruptArchive, "")) {
            try ZstdDecoder().decode(Self.rawFrame(windowByte: 0x00, size: 2_000))
        }
        #expect(try ZstdDecoder().decode(Self.rawFrame(windowByte: 0x00, size: 1_024)).count == 1_024)
    }
}
