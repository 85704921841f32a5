import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a block writes: the history before it, its own room, and the dictionary behind.
struct ZstdOutputSpan {
    /// The oldest byte of the frame's output still held (matches reach back to here).
    var historyStart: UnsafeMutablePointer<UInt8>
    /// Where the block's first byte goes.
    var start: UnsafeMutablePointer<UInt8>
    /// How far the block may write: the block size limit, the frame's content size or the
    /// decoder's output limit. The buffer holds ``ZstdBlockDecoder/slack`` bytes more.
    var end: UnsafeMutablePointer<UInt8>
    /// Whether `end` is the decoder's output limit rather than the format's.
    var endIsOutputLimit: Bool
    /// The dictionary's content, which the output continues, while matches may reach it.
    var dictionary: UnsafeRawBufferPointer?
}

/// Decodes the blocks of a frame (RFC 8878 §3.1.1.2–3.1.1.4) and keeps what one block hands
/// the next: the Huffman table, the three sequence tables and the repeated offsets.
final class ZstdBlockDecoder {
    /// The most bytes a block decodes to, and the most a compressed block may take.
    static let maxBlockSize = 128 << 10
    /// Bytes past the end of an output span and of the literals that copies may overwrite
    /// (they copy 16 bytes at a time).
    static let slack = 32

    private let literals: UnsafeMutablePointer<UInt8>
    private var huffman = HuffmanTable()
    private var hasHuffman = false
    private var literalLengths = SequenceTable(room: .literalLengths)
    private var matchLengths = SequenceTable(room: .matchLengths)
    private var offsets = SequenceTable(room: .offsets)
    /// Which tables a block may repeat (the previous block's, or the dictionary's).
    private var hasTables = (false, false, false)
    private var repeats = (1, 4, 8)

    init() {
        literals = .allocate(capacity: Self.maxBlockSize + Self.slack)
    }

    deinit { literals.deallocate() }

    /// Starts a frame: nothing to repeat but what `dictionary` carries.
    func startFrame(dictionary: ZstdDictionaryTables?) {
        if let dictionary {
            huffman = dictionary.huffman
            hasHuffman = true
            literalLengths = dictionary.literalLengths
            matchLengths = dictionary.matchLengths
            offsets = dictionary.offsets
            hasTables = (true, true, true)
            repeats = dictionary.repeats
        } else {
            hasHuffman = false
            hasTables = (false, false, false)
            repeats = (1, 4, 8)
        }
    }

    /// Decodes the compressed block of `size` bytes at `source` into `span`.
    ///
    /// - Returns: The bytes written from `span.start`.
    /// - Parameter blockLimit: The frame's largest block: 128 KiB, or its window when smaller.
    func decodeCompressed(
        _ source: UnsafePointer<UInt8>,
        size: Int,
        blockLimit: Int,
        into span: ZstdOutputSpan
    ) throws -> Int {
        let literalsUsed: Int
        let literalCount: Int
        (literalsUsed, literalCount) = try decodeLiterals(source, size: size, blockLimit: blockLimit)
        guard literalCount <= span.end - span.start else { throw Self.pastEnd(span) }
        return try decodeSequences(
            source + literalsUsed,
            size: size - literalsUsed,
            literalCount: literalCount,
            into: span
        )
    }

    // MARK: Literals

    /// Reads the literals section into ``literals``: returns the bytes it took and the
    /// literals' count.
    private func decodeLiterals(_ source: UnsafePointer<UInt8>, size: Int, blockLimit: Int) throws -> (Int, Int) {
        guard size >= 1 else { throw zstdCorrupt("a compressed block is empty") }
        let first = Int(source[0])
        let type = first & 3
        let sizeFormat = (first >> 2) & 3
        if type < 2 {
            // Raw or RLE: a 5-, 12- or 20-bit size.
            let headerSize: Int
            let count: Int
            switch sizeFormat {
            case 1:
                guard size >= 2 else { throw zstdCorrupt("a literals header runs past its block") }
                headerSize = 2
                count = (first >> 4) | Int(source[1]) << 4
            case 3:
                guard size >= 3 else { throw zstdCorrupt("a literals header runs past its block") }
                headerSize = 3
                count = (first >> 4) | Int(source[1]) << 4 | Int(source[2]) << 12
            default:
                headerSize = 1
                count = first >> 3
            }
            guard count <= blockLimit else { throw zstdCorrupt("a block has more literals than a block may hold") }
            if type == 0 {
                guard headerSize + count <= size else { throw zstdCorrupt("raw literals run past their block") }
                literals.update(from: source + headerSize, count: count)
                return (headerSize + count, count)
            }
            guard headerSize + 1 <= size else { throw zstdCorrupt("RLE literals run past their block") }
            literals.update(repeating: source[headerSize], count: count)
            return (headerSize + 1, count)
        }
        // Huffman-coded, with a new tree (2) or the previous one (3).
        let headerSize = [3, 3, 4, 5][sizeFormat]
        let width = [10, 10, 14, 18][sizeFormat]
        guard size >= headerSize else { throw zstdCorrupt("a literals header runs past its block") }
        var header = 0
        for index in 0..<headerSize { header |= Int(source[index]) << (8 * index) }
        let count = (header >> 4) & ((1 << width) - 1)
        let compressed = (header >> (4 + width)) & ((1 << width) - 1)
        guard count <= blockLimit else { throw zstdCorrupt("a block has more literals than a block may hold") }
        guard sizeFormat == 0 || count >= 6 else {
            throw zstdCorrupt("four Huffman streams need at least 6 literals, the block has \(count)")
        }
        guard headerSize + compressed <= size else { throw zstdCorrupt("Huffman literals run past their block") }
        var stream = source + headerSize
        var streamSize = compressed
        if type == 2 {
            hasHuffman = false
            let used = try huffman.read(stream, available: streamSize)
            hasHuffman = true
            stream += used
            streamSize -= used
        } else {
            guard hasHuffman else { throw zstdCorrupt("literals repeat a Huffman tree no block has given") }
        }
        try huffman.decode(
            stream,
            size: streamSize,
            streams: sizeFormat == 0 ? 1 : 4,
            regenerated: count,
            into: literals
        )
        return (headerSize + compressed, count)
    }

    // MARK: Sequences

    private func decodeSequences(
        _ source: UnsafePointer<UInt8>,
        size: Int,
        literalCount: Int,
        into span: ZstdOutputSpan
    ) throws -> Int {
        guard size >= 1 else { throw zstdCorrupt("a block has no sequences section") }
        var position = 0
        var count = Int(source[0])
        if count < 128 {
            position = 1
        } else if count < 255 {
            guard size >= 2 else { throw zstdCorrupt("a sequences header runs past its block") }
            count = (count - 128) << 8 | Int(source[1])
            position = 2
        } else {
            guard size >= 3 else { throw zstdCorrupt("a sequences header runs past its block") }
            count = (Int(source[1]) | Int(source[2]) << 8) + 0x7F00
            position = 3
        }
        if count == 0 {
            guard position == size else { throw zstdCorrupt("a block without sequences has bytes after its header") }
            let end = try Self.copyLastLiterals(literals, count: literalCount, to: span.start, span: span)
            return end - span.start
        }
        guard position < size else { throw zstdCorrupt("a sequences header runs past its block") }
        let modes = Int(source[position])
        position += 1
        guard modes & 3 == 0 else { throw zstdCorrupt("a sequences header sets its reserved bits") }
        position += try readTable(
            &literalLengths,
            has: &hasTables.0,
            mode: modes >> 6,
            codes: .literalLengths,
            predefined: SequenceTable.predefinedLiteralLengths,
            source + position,
            available: size - position
        )
        position += try readTable(
            &offsets,
            has: &hasTables.1,
            mode: (modes >> 4) & 3,
            codes: .offsets,
            predefined: SequenceTable.predefinedOffsets,
            source + position,
            available: size - position
        )
        position += try readTable(
            &matchLengths,
            has: &hasTables.2,
            mode: (modes >> 2) & 3,
            codes: .matchLengths,
            predefined: SequenceTable.predefinedMatchLengths,
            source + position,
            available: size - position
        )
        guard position < size else { throw zstdCorrupt("a block's sequences have no bit stream") }
        let bits = try BackwardBits(source + position, count: size - position)
        return try literalLengths.cells.withUnsafeBufferPointer { literalLengthCells in
            try offsets.cells.withUnsafeBufferPointer { offsetCells in
                try matchLengths.cells.withUnsafeBufferPointer { matchLengthCells in
                    guard let literalLengthTable = literalLengthCells.baseAddress,
                        let offsetTable = offsetCells.baseAddress,
                        let matchLengthTable = matchLengthCells.baseAddress
                    else { return 0 }
                    var tables = SequenceTables(
                        literalLengths: literalLengthTable,
                        literalLengthLog: literalLengths.accuracyLog,
                        offsets: offsetTable,
                        offsetLog: offsets.accuracyLog,
                        matchLengths: matchLengthTable,
                        matchLengthLog: matchLengths.accuracyLog
                    )
                    return try Self.execute(
                        count: count,
                        bits: bits,
                        tables: &tables,
                        literals: literals,
                        literalCount: literalCount,
                        span: span,
                        repeats: &repeats
                    )
                }
            }
        }
    }

    /// Reads one sequence table's mode and description: returns the bytes it took.
    private func readTable(
        _ table: inout SequenceTable,
        has: inout Bool,
        mode: Int,
        codes: SequenceTable.Codes,
        predefined: SequenceTable,
        _ source: UnsafePointer<UInt8>,
        available: Int
    ) throws -> Int {
        switch mode {
        case 0:
            table = predefined
            has = true
            return 0
        case 1:
            guard available >= 1 else { throw zstdCorrupt("an RLE sequence code runs past its block") }
            has = false
            try table.fill(single: Int(source[0]), codes: codes)
            has = true
            return 1
        case 2:
            has = false
            let distribution = try FSE.readDistribution(
                source,
                available: available,
                maxSymbol: codes.maxSymbol,
                maxLog: codes.maxLog
            )
            try table.fill(distribution.counts, accuracyLog: distribution.accuracyLog, codes: codes)
            has = true
            return distribution.bytesUsed
        default:
            guard has else { throw zstdCorrupt("a block repeats a sequence table no block has given") }
            return 0
        }
    }
}
