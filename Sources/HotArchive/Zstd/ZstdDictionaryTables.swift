import HotCore

/// A formatted dictionary's entropy tables and repeated offsets (RFC 8878 §5), which the
/// first block of each frame may repeat.
struct ZstdDictionaryTables {
    /// `0xEC30A437`, little-endian.
    static let magic: UInt32 = 0xEC30_A437

    var id: UInt32
    var huffman = HuffmanTable()
    var literalLengths = SequenceTable(room: .literalLengths)
    var matchLengths = SequenceTable(room: .matchLengths)
    var offsets = SequenceTable(room: .offsets)
    var repeats = (1, 4, 8)
    /// Where the content starts in the dictionary's bytes.
    var contentOffset = 0

    /// Reads a formatted dictionary.
    ///
    /// - Throws: `invalidArgument` for a dictionary that breaks the format.
    init(_ bytes: UnsafeRawBufferPointer) throws {
        guard bytes.count >= 8, let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
            UInt32(littleEndian: bytes.loadUnaligned(as: UInt32.self)) == Self.magic
        else { throw HotUpdateError(.invalidArgument, "zstd: the dictionary does not start with its magic number") }
        id = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
        var position = 8
        do {
            position += try huffman.read(base + position, available: bytes.count - position)
            for (codes, table) in [
                (SequenceTable.Codes.offsets, 0), (.matchLengths, 1), (.literalLengths, 2),
            ] {
                let distribution = try FSE.readDistribution(
                    base + position,
                    available: bytes.count - position,
                    maxSymbol: table == 0 ? 31 : codes.maxSymbol,
                    maxLog: codes.maxLog
                )
                switch table {
                case 0: try offsets.fill(distribution.counts, accuracyLog: distribution.accuracyLog, codes: codes)
                case 1: try matchLengths.fill(distribution.counts, accuracyLog: distribution.accuracyLog, codes: codes)
                default:
                    try literalLengths.fill(distribution.counts, accuracyLog: distribution.accuracyLog, codes: codes)
                }
                position += distribution.bytesUsed
            }
        } catch let error as HotUpdateError {
            throw HotUpdateError(.invalidArgument, "zstd: the dictionary's entropy tables are damaged", cause: error)
        }
        guard position + 12 <= bytes.count else {
            throw HotUpdateError(.invalidArgument, "zstd: the dictionary ends before its repeated offsets")
        }
        var values: [Int] = []
        for index in 0..<3 {
            values.append(
                Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: position + 4 * index, as: UInt32.self)))
            )
        }
        position += 12
        let contentSize = bytes.count - position
        for value in values where value == 0 || value > contentSize {
            throw HotUpdateError(
                .invalidArgument,
                "zstd: the dictionary's repeated offset \(value) is outside its content"
            )
        }
        repeats = (values[0], values[1], values[2])
        contentOffset = position
    }
}
