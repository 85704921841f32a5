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
