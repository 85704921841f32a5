import Foundation
import HotArchive
import HotCore
import HotTesting
import Testing

/// The Zstandard project's golden files (`tests/golden-*` of facebook/zstd), kept in
/// `shared/corpora/zstd-golden` beside the repository (its README says where they come from).
enum ZstdGolden {
    /// Where it is, whether it is there, and what a test says without it.
    static let corpus = SharedCorpus(
        title: "the zstd golden files",
        folder: "zstd-golden",
        environmentVariable: "HOT_ZSTD_GOLDEN"
    )

    static func file(_ relative: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Data {
        let url = try corpus.root(sourceLocation: sourceLocation).appendingPathComponent(relative)
        try #require(
            FileManager.default.fileExists(atPath: url.path),
            "\(relative) is not in the golden files",
            sourceLocation: sourceLocation
        )
        return try Data(contentsOf: url)
    }

    static let decompression = ["block-128k.zst", "empty-block.zst", "rle-first-block.zst", "zeroSeq_2B.zst"]
    static let errors = ["off0.bin.zst", "truncated_huff_state.zst", "zeroSeq_extraneous.zst"]
    static let compression = [
        "PR-3517-block-splitter-corruption-test", "http", "huffman-compressed-larger",
        "large-literal-and-match-lengths",
    ]
    static let dictionaries = ["http-dict-missing-symbols"]

    /// What a golden frame holds where libzstd 1.5.4 (the oracle here) cannot say: zeroSeq_2B
    /// ends its only block with the two-byte form of "zero sequences" (0x80 0x00), which libzstd
    /// refused until 1.5.5 ("Src size is incorrect"). Its literals are the 13 bytes below.
    static let knownContent: [String: Data] = ["zeroSeq_2B.zst": Data("Hello World!\n".utf8)]
}

/// The golden files: every decoder must decode the first folder and refuse the second; inputs
/// that once broke zstd's compressor, compressed at several levels, and a dictionary with missing
/// symbols must decode byte for byte.
@Suite("zstd golden files", .enabled(if: ZstdGolden.corpus.suitesRun, ZstdGolden.corpus.skipReason))
struct ZstdGoldenTests {
    @Test("golden-decompression frames decode to what zstd -d gives", arguments: ZstdGolden.decompression)
    func decompression(_ name: String) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let frame = try ZstdGolden.file("golden-decompression/" + name)
        let oracle = try await ZstdTool.decompress(frame, in: scratch)
        let expected = try #require(
            oracle ?? ZstdGolden.knownContent[name],
            "zstd -d refuses \(name) and no content is recorded for it"
        )
        #expect(try ZstdDecoder().decode(frame) == expected)
        var streamed = Data()
        try frame.withUnsafeBytes { input in
            try ZstdDecoder().decode(input) { streamed.append(contentsOf: $0) }
        }
        #expect(streamed == expected)
    }

    /// libzstd 1.5.4 still accepts these three (they were made when later versions became
    /// stricter): the decoder follows the format, not that version.
    @Test("golden-decompression-errors frames are refused", arguments: ZstdGolden.errors)
    func decompressionErrors(_ name: String) throws {
        let frame = try ZstdGolden.file("golden-decompression-errors/" + name)
        let error = #expect(throws: HotUpdateError.self) { try ZstdDecoder().decode(frame) }
        #expect(error?.code == .corruptArchive, "\(error?.detailedDescription() ?? "")")
    }

    @Test(
        "golden-compression inputs compressed at levels 1, 3, 9, 19, 22 and with --long decode byte for byte",
        arguments: ZstdGolden.compression
    )
    func compression(_ name: String) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let input = try ZstdGolden.file("golden-compression/" + name)
        for flags in [
            ["-1"], ["-3"], ["-9"], ["-19"], ["--ultra", "-22"], ["-3", "--long=27"], ["-19", "--long=27"],
        ] {
            let frame = try await ZstdTool.compress(input, flags, in: scratch)
            #expect(try ZstdDecoder().decode(frame) == input, "\(name) \(flags)")
        }
    }

    @Test("frames made with the dictionary with missing symbols decode with it")
    func dictionaryWithMissingSymbols() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let dictionaryFile = try ZstdGolden.corpus.root().appendingPathComponent(
            "golden-dictionaries/http-dict-missing-symbols"
        )
        let dictionary = ZstdDictionary(try Data(contentsOf: dictionaryFile))
        #expect(dictionary.isFormatted)
        var inputs = [try ZstdGolden.file("golden-compression/http")]
        var random = ZstdSeededRandom(seed: 80)
        for _ in 0..<8 { inputs.append(ZstdSamples.http(&random)) }
        var all = Data()
        for _ in 0..<200 { all += ZstdSamples.http(&random) }
        inputs.append(all)
        for input in inputs {
            for flags in [["-1"], ["-3"], ["-19"]] {
                let frame = try await ZstdTool.compress(input, flags + ["-D", dictionaryFile.path], in: scratch)
                #expect(
                    try await ZstdTool.decompress(frame, ["-D", dictionaryFile.path], in: scratch) == input,
                    "the tool reads its own frame"
                )
                #expect(
                    try ZstdDecoder().decode(frame, dictionary: dictionary) == input,
                    "\(input.count) bytes \(flags)"
                )
            }
        }
    }

    /// Every file in the folder has a case, and every case names a file that is there.
    @Test func everyGoldenFileHasACase() throws {
        let root = try ZstdGolden.corpus.root()
        let folders: [String: [String]] = [
            "golden-decompression": ZstdGolden.decompression,
            "golden-decompression-errors": ZstdGolden.errors,
            "golden-compression": ZstdGolden.compression,
            "golden-dictionaries": ZstdGolden.dictionaries,
        ]
        for (folder, names) in folders {
            let found = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(folder).path)
            #expect(Set(found) == Set(names), "\(folder)")
        }
        let top = try FileManager.default.contentsOfDirectory(atPath: root.path).filter { $0 != "README.md" }
        #expect(Set(top) == Set(folders.keys))
    }
}
