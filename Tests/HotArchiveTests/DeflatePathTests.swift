import Foundation
import HotArchive
import HotCore
import HotTesting
import Testing

/// `ZipUnarchiver` decodes a deflate entry of up to 1 MiB in one call (libdeflate, where it
/// is linked) and streams larger ones through zlib. Both paths keep the same promises: the
/// bytes are the packed ones, and an entry that inflates to more or fewer bytes than it
/// declares, whose data is damaged or cut short, or whose CRC-32 is wrong is refused with
/// nothing left in the destination.
@Suite("Deflate entries, decoded whole and streamed")
struct DeflatePathTests {
    /// A size decoded whole, and one streamed.
    static let sizes = [100_000, 3 << 20]

    static func options() -> ExtractOptions {
        ExtractOptions(maxCompressionRatio: 10_000)
    }

    static func extract(_ entry: RawZipArchive.Entry, in scratch: Scratch) async throws -> ExtractionReport {
        let archive = scratch.path("a.zip")
        try RawZipArchive([entry]).write(to: archive)
        return try await ZipUnarchiver().extract(
            archive,
            to: scratch.path("out"),
            options: options(),
            progress: nil
        )
    }

    /// The destination holds no file after a refusal.
    static func expectNothingLeft(_ scratch: Scratch, sourceLocation: SourceLocation = #_sourceLocation) {
        let out = scratch.path("out").path
        let left = (FileManager.default.enumerator(atPath: out)?.allObjects as? [String]) ?? []
        #expect(left.isEmpty, "left behind: \(left)", sourceLocation: sourceLocation)
    }

    @Test("a valid entry decodes to its bytes", arguments: sizes)
    func valid(size: Int) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let report = try await Self.extract(.deflatedRun("run.bin", byte: 7, count: size), in: scratch)
        #expect(report.files.map(\.size) == [Int64(size)])
        let data = try Data(contentsOf: scratch.path("out/run.bin"))
        #expect(data.count == size)
        #expect(data.allSatisfy { $0 == 7 })
    }

    @Test("an entry that inflates to more bytes than it declares is refused", arguments: sizes)
    func inflatesToMore(size: Int) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let lie = RawZipArchive.Entry.deflatedRun("run.bin", count: size).declaring(
            uncompressedSize: UInt32(size * 2 / 3)
        )
        let error = await expectHotError(.corruptArchive) { try await Self.extract(lie, in: scratch) }
        #expect(error?.message.contains("more than") == true, "\(error?.message ?? "")")
        Self.expectNothingLeft(scratch)
    }

    @Test("an entry that inflates to fewer bytes than it declares is refused", arguments: sizes)
    func inflatesToFewer(size: Int) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let lie = RawZipArchive.Entry.deflatedRun("run.bin", count: size).declaring(uncompressedSize: UInt32(size + 1))
        let error = await expectHotError(.corruptArchive) { try await Self.extract(lie, in: scratch) }
        #expect(error?.message.contains("fewer than") == true, "\(error?.message ?? "")")
        Self.expectNothingLeft(scratch)
    }

    @Test("an entry whose CRC-32 is wrong is refused", arguments: sizes)
    func wrongCRC(size: Int) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let entry = RawZipArchive.Entry.deflatedRun("run.bin", count: size)
        await expectHotError(.checksumMismatch) {
            try await Self.extract(entry.declaring(crc32: entry.crc32 ^ 1), in: scratch)
        }
        Self.expectNothingLeft(scratch)
    }

    @Test("an entry whose deflate data is cut short or damaged is refused", arguments: sizes)
    func damaged(size: Int) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        var cut = RawZipArchive.Entry.deflatedRun("run.bin", count: size)
        cut.payload = Array(cut.payload.prefix(cut.payload.count / 2))
        await expectHotError(.corruptArchive) { try await Self.extract(cut, in: scratch) }
        Self.expectNothingLeft(scratch)

        // A block type no deflate stream has (BTYPE 11) in the first byte.
        var damaged = RawZipArchive.Entry.deflatedRun("run.bin", count: size)
        damaged.payload[0] = 0x07
        await expectHotError(.corruptArchive) { try await Self.extract(damaged, in: scratch) }
        Self.expectNothingLeft(scratch)
    }
}

/// The reader's CRC-32: libdeflate's where it is linked, zlib's on the platforms without it.
/// Both are built here and must agree with each other and with the standard check value.
@Suite("CRC-32 of the ZIP reader")
struct ReaderCRCTests {
    @Test("zlib's CRC-32, the fallback, gives the standard value, chunk by chunk as whole")
    func zlibFallback() {
        let check = Array("123456789".utf8)
        #expect(check.withUnsafeBytes { EntryDataReader.zlibCRC32(0, $0) } == 0xCBF4_3926)
        let data = (0..<100_003).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let whole = data.withUnsafeBytes { EntryDataReader.zlibCRC32(0, $0) }
        let chunked = data.withUnsafeBytes { bytes in
            stride(from: 0, to: bytes.count, by: 4_099).reduce(UInt32(0)) { crc, start in
                EntryDataReader.zlibCRC32(
                    crc,
                    UnsafeRawBufferPointer(rebasing: bytes[start..<min(start + 4_099, bytes.count)])
                )
            }
        }
        #expect(chunked == whole)
        #expect(whole == RawZipArchive.crc32(data))
        #expect(EntryDataReader.zlibCRC32(0x1234_5678, UnsafeRawBufferPointer(start: nil, count: 0)) == 0x1234_5678)
    }

    @Test("the CRC-32 the reader uses agrees with zlib's")
    func readerAgreesWithZlib() {
        let data = (0..<1_000_033).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 17) }
        data.withUnsafeBytes { bytes in
            #expect(EntryDataReader.crc32(0, bytes) == EntryDataReader.zlibCRC32(0, bytes))
            let head = UnsafeRawBufferPointer(rebasing: bytes[0..<333])
            let tail = UnsafeRawBufferPointer(rebasing: bytes[333...])
            #expect(EntryDataReader.crc32(EntryDataReader.crc32(0, head), tail) == EntryDataReader.zlibCRC32(0, bytes))
        }
    }
}
