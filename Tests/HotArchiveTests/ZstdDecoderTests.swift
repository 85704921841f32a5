import Foundation
import HotArchive
import HotCore
import HotTestServers
import HotTesting
import Testing

/// `ZstdDecoder` against libzstd: frames the `zstd` tool (Debian's, libzstd 1.5.4) makes, run as a
/// process so these tests need no libzstd in the build, decoded byte for byte; and hostile input
/// refused with the error its API promises, never a crash.
@Suite("zstd decoder")
struct ZstdDecoderTests {
    /// 384 KiB of mixed content: text, JSON, JavaScript-like lines, binary tables, random bytes,
    /// zero runs and repeats, the same on every run.
    static let mixed = ZstdSamples.mixed(size: 384 * 1_024, seed: 22)

    /// Every level of the tool's normal range, on the mixed input.
    static let levels: [[String]] = (1...19).map { ["-\($0)"] }

    /// The tool's other ways of writing a frame.
    static let variants: [[String]] = [
        ["--fast=5"],
        ["--ultra", "-22"],
        ["-3", "--no-check"],
        ["-3", "-C"],
        ["-3", "--no-content-size"],
        ["-19", "--no-check", "--no-content-size"],
        ["-3", "--zstd=wlog=10"],
        ["-3", "--target-compressed-block-size=1024"],
        ["-3", "--no-compress-literals"],
        ["-7", "--long=27"],
    ]

    private func decode(
        _ frames: Data,
        dictionary: ZstdDictionary? = nil,
        limits: ZstdDecoder.Limits = .init()
    )
        throws -> Data
    {
        try ZstdDecoder(limits: limits).decode(frames, dictionary: dictionary)
    }

    /// Decodes through the sink API; the pieces' sizes and their concatenation.
    private func stream(
        _ frames: Data,
        dictionary: ZstdDictionary? = nil,
        limits: ZstdDecoder.Limits = .init()
    ) throws -> (pieces: [Int], data: Data) {
        var pieces: [Int] = []
        var data = Data()
        try frames.withUnsafeBytes { input in
            try ZstdDecoder(limits: limits).decode(input, dictionary: dictionary) { piece in
                pieces.append(piece.count)
                data.append(contentsOf: piece)
            }
        }
        return (pieces, data)
    }

    /// The error `body` throws, which must be a `HotUpdateError` with `code`.
    @discardableResult
    private func expectError(
        _ code: HotUpdateError.Code,
        _ comment: Comment? = nil,
        sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () throws -> Void
    ) -> HotUpdateError? {
        do {
            try body()
            Issue.record(
                "expected \(code), got success. \(comment.map { "\($0)" } ?? "")",
                sourceLocation: sourceLocation
            )
            return nil
        } catch let error as HotUpdateError {
            #expect(
                error.code == code,
                "\(comment.map { "\($0): " } ?? "")\(error.detailedDescription())",
                sourceLocation: sourceLocation
            )
            #expect(!error.message.isEmpty, sourceLocation: sourceLocation)
            return error
        } catch {
            Issue.record("expected a HotUpdateError, got \(error)", sourceLocation: sourceLocation)
            return nil
        }
    }

    // MARK: - Frames libzstd makes

    @Test("frames at every level 1–19 decode byte for byte", arguments: levels)
    func everyLevel(_ flags: [String]) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let frame = try await ZstdTool.compress(Self.mixed, flags, in: scratch)
        let shape = try ZstdFrameShape.frames(of: frame)
        #expect(shape.count == 1)
        #expect(shape.first?.blockTypes.count ?? 0 >= 3, "384 KiB needs at least three 128 KiB blocks")
        #expect(try decode(frame) == Self.mixed)
    }

    @Test("frames in the tool's other modes decode byte for byte", arguments: variants)
    func otherModes(_ flags: [String]) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let frame = try await ZstdTool.compress(Self.mixed, flags, in: scratch)
        let shape = try #require(try ZstdFrameShape.frames(of: frame).first)
        // The frame is what the flags say it is.
        #expect(shape.hasChecksum == !flags.contains("--no-check"))
        #expect((shape.contentSize == nil) == flags.contains("--no-content-size"))
        if flags.contains("--zstd=wlog=10") { #expect(shape.windowSize == 1_024) }
        if flags.contains("--target-compressed-block-size=1024") { #expect(shape.blockTypes.count > 20) }
        #expect(try decode(frame) == Self.mixed)
    }

    @Test("one block, many blocks, and raw, RLE and compressed blocks")
    func blockKinds() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        var random = ZstdSeededRandom(seed: 7)
        let small = Self.mixed.prefix(100_000)
        let one = try await ZstdTool.compress(small, ["-3"], in: scratch)
        #expect(try ZstdFrameShape.frames(of: one).first?.blockTypes == [2])
        #expect(try decode(one) == small)

        // Text, 256 KiB of zeros (two whole blocks: RLE), 256 KiB of random bytes (raw), text.
        var input = Data(Self.mixed.prefix(128 * 1_024))
        input += Data(count: 256 * 1_024)
        input += random.data(256 * 1_024)
        input += Self.mixed.suffix(200_000)
        let many = try await ZstdTool.compress(input, ["-1"], in: scratch)
        let types = try #require(try ZstdFrameShape.frames(of: many).first).blockTypes
        #expect(types.count >= 7)
        #expect(Set(types) == [0, 1, 2], "raw, RLE and compressed blocks: \(types)")
        #expect(try decode(many) == input)
    }

    @Test("empty input and one byte, with and without a content size")
    func tinyInputs() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        for input in [Data(), Data([0x41])] {
            for flags in [["-3"], ["-3", "--no-content-size"], ["-19", "--no-check"]] {
                let frame = try await ZstdTool.compress(input, flags, in: scratch)
                #expect(try decode(frame) == input, "\(input.count) bytes, \(flags)")
                #expect(try stream(frame).data == input)
            }
        }
    }

    @Test("concatenated frames, with skippable frames before, between and after them")
    func concatenatedAndSkippable() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let parts = [Data(Self.mixed.prefix(50_000)), Data(), Data(Self.mixed.suffix(150_000)), Data([7])]
        var frames = ZstdFrameShape.skippable([1, 2, 3])
        var expected = Data()
        var random = ZstdSeededRandom(seed: 3)
        for (index, part) in parts.enumerated() {
            frames += try await ZstdTool.compress(part, index % 2 == 0 ? ["-3"] : ["-19", "--no-check"], in: scratch)
            frames += ZstdFrameShape.skippable(random.bytes(index * 700), variant: UInt8(index * 5))
            expected += part
        }
        frames += ZstdFrameShape.skippable([], variant: 0x0F)
        // The tool agrees that this is valid and what it holds.
        #expect(try await ZstdTool.decompress(frames, in: scratch) == expected)
        #expect(try ZstdFrameShape.frames(of: frames).count == parts.count)
        #expect(try decode(frames) == expected)
        #expect(try stream(frames).data == expected)
        // Skippable frames alone hold nothing.
        #expect(try decode(ZstdFrameShape.skippable([9, 9]) + ZstdFrameShape.skippable([])) == Data())
    }

    @Test("long mode (--long=27) reaches matches 4 MiB back")
    func longMode() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        var random = ZstdSeededRandom(seed: 27)
        let block = random.data(4 << 20)
        let input = block + Self.mixed + block
        let frame = try await ZstdTool.compress(input, ["-1", "--long=27"], in: scratch)
        // Without the far matches the second copy of the random block would not shrink.
        #expect(frame.count < block.count + Self.mixed.count)
        let shape = try #require(try ZstdFrameShape.frames(of: frame).first)
        #expect(shape.windowSize ?? 0 >= UInt64(input.count) / 2)
        #expect(try decode(frame) == input)
        #expect(try stream(frame).data == input)
    }

    @Test(
        "--patch-from patches on 1 KiB and 1 MiB bases, through the decoder and the patcher",
        arguments: [1_024, 1 << 20]
    )
    func patchFrom(baseSize: Int) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        var random = ZstdSeededRandom(seed: UInt64(baseSize))
        // A kilobyte of mixed content may be one piece of random bytes: text there.
        let base =
            baseSize < 4_096
            ? Data(ZstdSamples.text(baseSize, &random)) : ZstdSamples.mixed(size: baseSize, seed: UInt64(baseSize))
        let target = ZstdSamples.changed(base, percent: 10, resize: true, seed: 5)
        let baseFile = scratch.path("base")
        try base.write(to: baseFile)
        let patch = try await ZstdTool.compress(target, ["-19", "--patch-from=\(baseFile.path)"], in: scratch)
        let alone = try await ZstdTool.compress(target, ["-19"], in: scratch)
        #expect(patch.count < alone.count, "the patch uses the base")
        #expect(try decode(patch, dictionary: .prefix(base)) == target)
        #expect(try stream(patch, dictionary: .prefix(base)).data == target)
        try await expectPatcherApplies(patch, base: baseFile, target: target, in: scratch)
    }

    @Test("a --patch-from patch on a 64 MiB base (the patcher's largest file)")
    func patchFromLargeBase() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        var random = ZstdSeededRandom(seed: 64)
        let base = random.data(64 << 20)
        let target = ZstdSamples.changed(base, percent: 10, resize: false, seed: 6)
        let baseFile = scratch.path("base")
        try base.write(to: baseFile)
        // The tool turns long mode on and sizes the window to the base (64 MiB, within the
        // decoder's default 128 MiB).
        let patch = try await ZstdTool.compress(target, ["-3", "--patch-from=\(baseFile.path)"], in: scratch)
        #expect(patch.count < target.count / 5, "the patch uses the base: \(patch.count) bytes")
        let shape = try #require(try ZstdFrameShape.frames(of: patch).first)
        #expect(shape.windowSize ?? 0 >= 64 << 20)
        #expect(try decode(patch, dictionary: .prefix(base)) == target)
        try await expectPatcherApplies(patch, base: baseFile, target: target, in: scratch)
    }

    private func expectPatcherApplies(
        _ patch: Data,
        base: URL,
        target: Data,
        in scratch: Scratch,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let patchFile = scratch.path("patch.zst")
        let output = scratch.path("patched")
        try patch.write(to: patchFile)
        try ZstdPatcher().apply(patch: patchFile, base: base, to: output, expectedSize: Int64(target.count))
        #expect(try Data(contentsOf: output) == target, sourceLocation: sourceLocation)
        // Another size than the one the patch declares is refused.
        #expect(throws: HotUpdateError.self, sourceLocation: sourceLocation) {
            try ZstdPatcher().apply(
                patch: patchFile,
                base: base,
                to: scratch.path("wrong"),
                expectedSize: Int64(target.count) - 1
            )
        }
    }

    @Test("a base that starts with the dictionary magic is still raw content with .prefix")
    func prefixIsRaw() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let base = Data([0x37, 0xA4, 0x30, 0xEC]) + Self.mixed.prefix(20_000)
        #expect(ZstdDictionary(base).isFormatted)
        #expect(!ZstdDictionary.prefix(base).isFormatted)
        let baseFile = scratch.path("base")
        try base.write(to: baseFile)
        let target = ZstdSamples.changed(base, percent: 5, resize: true, seed: 9)
        let patch = try await ZstdTool.compress(target, ["-19", "--patch-from=\(baseFile.path)"], in: scratch)
        #expect(try decode(patch, dictionary: .prefix(base)) == target)
    }

    // MARK: - Streaming

    /// The decoder keeps "about twice the frame's window" when it streams: pieces are at most
    /// that plus one block (128 KiB). With a 1 MiB window, 6 MiB come in at least three pieces.
    @Test("the sink receives the same bytes as Data, in pieces bounded by twice the window")
    func sinkPieces() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let input = ZstdSamples.mixed(size: 6 << 20, seed: 11)
        let frame = try await ZstdTool.compress(
            input,
            ["-3", "--zstd=wlog=20", "--no-content-size"],
            in: scratch
        )
        let window = Int(try #require(try ZstdFrameShape.frames(of: frame).first?.windowSize))
        #expect(window == 1 << 20)
        let streamed = try stream(frame)
        #expect(streamed.data == input)
        #expect(try decode(frame) == streamed.data)
        #expect(streamed.pieces.reduce(0, +) == input.count)
        let bound = 2 * window + 128 * 1_024
        #expect((streamed.pieces.max() ?? 0) <= bound, "pieces \(streamed.pieces.max() ?? 0) bytes")
        #expect(streamed.pieces.count >= input.count / bound)
    }

    @Test("an error the sink throws ends decoding and reaches the caller")
    func sinkError() async throws {
        struct Stop: Error {}
        let scratch = try Scratch()
        defer { scratch.remove() }
        let frame = try await ZstdTool.compress(Self.mixed, ["-3", "--zstd=wlog=17"], in: scratch)
        var calls = 0
        #expect(throws: Stop.self) {
            try frame.withUnsafeBytes { input in
                try ZstdDecoder().decode(input) { _ in
                    calls += 1
                    throw Stop()
                }
            }
        }
        #expect(calls == 1)
    }

    // MARK: - Dictionaries

    /// Trains a dictionary on 300 generated records and returns it.
    private func trainDictionary(in scratch: Scratch, seed: UInt64, id: Int) async throws -> Data {
        let folder = scratch.path("samples-\(seed)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var random = ZstdSeededRandom(seed: seed)
        var paths: [String] = []
        for index in 0..<300 {
            let file = folder.appendingPathComponent("\(index)")
            let record = index % 2 == 0 ? ZstdSamples.http(&random) : Data(ZstdSamples.json(400, &random))
            try record.write(to: file)
            paths.append(file.path)
        }
        let dictionary = scratch.path("dictionary-\(seed)")
        try await Subprocess.check(
            "zstd",
            ["-q", "-f", "--train", "--maxdict=8192", "--dictID=\(id)"] + paths + ["-o", dictionary.path]
        )
        return try Data(contentsOf: dictionary)
    }

    @Test("frames made with a --train dictionary decode with it, and are refused without it or with another")
    func trainedDictionary() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let trained = try await trainDictionary(in: scratch, seed: 1, id: 4242)
        let other = try await trainDictionary(in: scratch, seed: 2, id: 777)
        let dictionaryFile = scratch.path("dictionary-1")
        #expect(ZstdDictionary(trained).isFormatted)
        var random = ZstdSeededRandom(seed: 99)
        var record = ZstdSamples.http(&random)
        record += Data(ZstdSamples.json(300, &random))
        for flags in [["-1"], ["-3"], ["-19"], ["-19", "--no-check"]] {
            let frame = try await ZstdTool.compress(record, flags + ["-D", dictionaryFile.path], in: scratch)
            let alone = try await ZstdTool.compress(record, flags, in: scratch)
            #expect(frame.count < alone.count, "the dictionary is used")
            #expect(try ZstdFrameShape.frames(of: frame).first?.dictionaryID == 4242)
            #expect(try decode(frame, dictionary: ZstdDictionary(trained)) == record)
            #expect(try stream(frame, dictionary: ZstdDictionary(trained)).data == record)
            expectError(.invalidArgument, "no dictionary") { _ = try decode(frame) }
            expectError(.invalidArgument, "another dictionary") {
                _ = try decode(frame, dictionary: ZstdDictionary(other))
            }
        }
        // A frame that does not name its dictionary decodes with it.
        let unnamed = try await ZstdTool.compress(
            record,
            ["-19", "--no-dictID", "-D", dictionaryFile.path],
            in: scratch
        )
        #expect(try ZstdFrameShape.frames(of: unnamed).first?.dictionaryID == nil)
        #expect(try decode(unnamed, dictionary: ZstdDictionary(trained)) == record)
    }

    @Test("a raw-content dictionary (-D with a file that is not a trained dictionary)")
    func rawContentDictionary() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let raw = Data(Self.mixed.prefix(64 * 1_024))
        let file = scratch.path("raw")
        try raw.write(to: file)
        let dictionary = ZstdDictionary(raw)
        #expect(!dictionary.isFormatted)
        let record = ZstdSamples.changed(Data(raw.prefix(30_000)), percent: 3, resize: true, seed: 4)
        for flags in [["-3"], ["-19"]] {
            let frame = try await ZstdTool.compress(record, flags + ["-D", file.path], in: scratch)
            #expect(frame.count < record.count / 4, "the content is used")
            #expect(try decode(frame, dictionary: dictionary) == record)
        }
    }

    // MARK: - Hostile input

    @Test("every truncation of a valid frame is refused as corrupt")
    func truncations() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let input = Data(Self.mixed.prefix(6_000))
        for flags in [["-19"], ["-3", "--no-check", "--no-content-size"]] {
            let frame = try await ZstdTool.compress(input, flags, in: scratch)
            #expect(try decode(frame) == input)
            for length in 1..<frame.count {
                expectError(.corruptArchive, "\(flags) cut at \(length) of \(frame.count)") {
                    _ = try decode(frame.prefix(length))
                }
            }
        }
    }

    @Test("every single-byte change of a small frame is refused or decodes as libzstd decodes it")
    func singleByteCorruptions() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        var random = ZstdSeededRandom(seed: 13)
        let input = Data(ZstdSamples.text(100, &random) + ZstdSamples.json(100, &random))
        for flags in [["-19", "--no-check"], ["-3"]] {
            let frame = [UInt8](try await ZstdTool.compress(input, flags, in: scratch))
            var accepted: [(mutant: Data, output: Data)] = []
            var refused = 0
            for position in frame.indices {
                for change in 1...255 {
                    var mutant = frame
                    mutant[position] ^= UInt8(change)
                    let data = Data(mutant)
                    do {
                        accepted.append((data, try decode(data)))
                    } catch is HotUpdateError {
                        refused += 1
                    } catch {
                        Issue.record("\(flags) byte \(position) ^ \(change): not a HotUpdateError: \(error)")
                    }
                }
            }
            #expect(refused > 0)
            #expect(frame.count < 200, "a small frame: \(frame.count) bytes")
            // Whatever the decoder accepts, libzstd accepts too and decodes the same way.
            let oracle = try await ZstdTool.decompressAll(accepted.map(\.mutant), in: scratch)
            var disagreements = 0
            for ((mutant, output), expected) in zip(accepted, oracle) where output != expected {
                disagreements += 1
                if disagreements <= 5 {
                    Issue.record(
                        """
                        \(flags): a mutant decoded to \(output.count) bytes, libzstd: \
                        \(expected.map { "\($0.count) bytes" } ?? "refused") (\(mutant.map { String(format: "%02x", $0) }.joined()))
                        """
                    )
                }
            }
            #expect(disagreements == 0, "\(flags): \(accepted.count) accepted, \(refused) refused")
        }
    }

    @Test("a window over the limit is refused before any output, at the exact boundary")
    func windowLimit() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let input = ZstdSamples.mixed(size: 3 << 20, seed: 5)
        let frame = try await ZstdTool.compress(input, ["-1", "--zstd=wlog=22", "--no-content-size"], in: scratch)
        #expect(try ZstdFrameShape.frames(of: frame).first?.windowSize == 4 << 20)
        #expect(try decode(frame, limits: .init(maxWindowBytes: 4 << 20)) == input)
        var handed = 0
        expectError(.limitExceeded) {
            try frame.withUnsafeBytes { bytes in
                try ZstdDecoder(limits: .init(maxWindowBytes: (4 << 20) - 1)).decode(bytes) { handed += $0.count }
            }
        }
        #expect(handed == 0, "nothing is decoded from a frame whose window is refused")

        // Headers that declare 16 MiB and 256 MiB windows: over 8 MiB, and over the default 128 MiB.
        let sixteen = ZstdFrameShape.rawFrame(
            contentSize: nil,
            windowDescriptor: ZstdFrameShape.windowDescriptor(log: 24),
            payload: Array("small".utf8)
        )
        #expect(try decode(sixteen) == Data("small".utf8))
        expectError(.limitExceeded) { _ = try decode(sixteen, limits: .init(maxWindowBytes: 8 << 20)) }
        let huge = ZstdFrameShape.rawFrame(
            contentSize: nil,
            windowDescriptor: ZstdFrameShape.windowDescriptor(log: 28),
            payload: Array("small".utf8)
        )
        expectError(.limitExceeded) { _ = try decode(huge) }
        expectError(.limitExceeded) { _ = try stream(huge) }
        // The largest window the format can declare (about 3.75 TiB).
        let largest = ZstdFrameShape.rawFrame(contentSize: nil, windowDescriptor: 0xFF, payload: [1])
        expectError(.limitExceeded) { _ = try decode(largest) }
    }

    @Test("a header declaring 1 TB of content is refused over maxOutputBytes before anything is decoded")
    func declaredContentSize() throws {
        let terabyte = ZstdFrameShape.rawFrame(
            contentSize: 1 << 40,
            windowDescriptor: ZstdFrameShape.windowDescriptor(log: 10),
            payload: Array("hello".utf8)
        )
        let limits = ZstdDecoder.Limits(maxOutputBytes: 1 << 30)
        expectError(.limitExceeded) { _ = try decode(terabyte, limits: limits) }
        var handed = 0
        expectError(.limitExceeded) {
            try terabyte.withUnsafeBytes { bytes in
                try ZstdDecoder(limits: limits).decode(bytes) { handed += $0.count }
            }
        }
        #expect(handed == 0)
        // By default (1 GiB) too.
        expectError(.limitExceeded) { _ = try decode(terabyte) }
        // Without an output limit, the 5 bytes that are there do not make 1 TB: corrupt, and
        // nothing was reserved for the declared size (the process would not survive it).
        expectError(.corruptArchive) { _ = try decode(terabyte, limits: .init(maxOutputBytes: .max)) }
        expectError(.corruptArchive) { _ = try stream(terabyte, limits: .init(maxOutputBytes: .max)) }
        // The default limit is 1 GiB exactly: a frame declaring that much is read (and found short).
        let gigabyte = ZstdFrameShape.rawFrame(
            contentSize: 1 << 30,
            windowDescriptor: ZstdFrameShape.windowDescriptor(log: 10),
            payload: Array("hello".utf8)
        )
        expectError(.corruptArchive) { _ = try decode(gigabyte) }
        let over = ZstdFrameShape.rawFrame(
            contentSize: (1 << 30) + 1,
            windowDescriptor: ZstdFrameShape.windowDescriptor(log: 10),
            payload: Array("hello".utf8)
        )
        expectError(.limitExceeded) { _ = try decode(over) }
        // The same 5 bytes declared as 5 are fine.
        let honest = ZstdFrameShape.rawFrame(
            contentSize: 5,
            windowDescriptor: ZstdFrameShape.windowDescriptor(log: 10),
            payload: Array("hello".utf8)
        )
        #expect(try decode(honest, limits: .init(maxOutputBytes: 5)) == Data("hello".utf8))
        expectError(.limitExceeded) { _ = try decode(honest, limits: .init(maxOutputBytes: 4)) }
    }

    @Test("maxOutputBytes counts every frame together")
    func outputLimitAcrossFrames() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let part = Data(Self.mixed.prefix(600))
        let frame = try await ZstdTool.compress(part, ["-3", "--no-content-size"], in: scratch)
        let two = frame + frame
        #expect(try decode(two, limits: .init(maxOutputBytes: 1_200)) == part + part)
        expectError(.limitExceeded) { _ = try decode(two, limits: .init(maxOutputBytes: 1_199)) }
        expectError(.limitExceeded) { _ = try stream(two, limits: .init(maxOutputBytes: 1_000)) }
    }

    @Test("a wrong checksum is a checksum mismatch")
    func wrongChecksum() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let frame = try await ZstdTool.compress(Self.mixed, ["-3"], in: scratch)
        #expect(try ZstdFrameShape.frames(of: frame).first?.hasChecksum == true)
        for position in frame.count - 4..<frame.count {
            var wrong = frame
            wrong[position] ^= 0x10
            expectError(.checksumMismatch) { _ = try decode(wrong) }
            expectError(.checksumMismatch) { _ = try stream(wrong) }
        }
    }

    @Test("garbage, trailing bytes after a frame, and reserved header bits are corrupt")
    func garbage() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        var random = ZstdSeededRandom(seed: 17)
        let noise = random.data(4_000)
        expectError(.corruptArchive, "random bytes") { _ = try decode(noise) }
        expectError(.corruptArchive, "text") { _ = try decode(Data("not zstd at all".utf8)) }
        expectError(.corruptArchive, "three bytes of magic") { _ = try decode(Data([0x28, 0xB5, 0x2F])) }
        let frame = try await ZstdTool.compress(Data(Self.mixed.prefix(10_000)), ["-3"], in: scratch)
        let tails: [[UInt8]] = [
            [0x00], [0x01, 0x02, 0x03], [0x28, 0xB5, 0x2F, 0xFD], [0x50, 0x2A, 0x4D, 0x18, 0xFF, 0, 0, 0],
        ]
        for tail in tails {
            expectError(.corruptArchive, "trailing \(tail)") { _ = try decode(frame + Data(tail)) }
        }
        // Bit 3 of the frame header descriptor is reserved and must be zero.
        var reserved = frame
        reserved[4] |= 0x08
        expectError(.corruptArchive, "reserved bit") { _ = try decode(reserved) }
        // A block of the reserved type 3.
        var blockType = [UInt8](ZstdFrameShape.rawFrame(contentSize: nil, windowDescriptor: 0, payload: [1, 2]))
        blockType[6] |= 0x06
        expectError(.corruptArchive, "block type 3") { _ = try decode(Data(blockType)) }
    }
}
