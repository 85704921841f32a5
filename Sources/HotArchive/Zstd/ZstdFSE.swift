/// Finite State Entropy tables (RFC 8878 §4.1): the description of a distribution, the
/// decoding table built from it, and the sequence tables built on top.
enum FSE {
    /// A distribution read from its description: a count per symbol (-1 for "less than one")
    /// summing to `1 << accuracyLog`.
    struct Distribution {
        var counts: [Int16]
        var accuracyLog: Int
        /// The bytes the description took.
        var bytesUsed: Int
    }

    /// Reads a distribution's description (RFC 8878 §4.1.1) from the `available` bytes at `base`.
    ///
    /// - Throws: `corruptArchive` for a description that breaks the format, names a symbol
    ///   over `maxSymbol` or an accuracy over `maxLog`, or runs past `available`.
    static func readDistribution(
        _ base: UnsafePointer<UInt8>,
        available: Int,
        maxSymbol: Int,
        maxLog: Int
    ) throws -> Distribution {
        guard available >= 1 else { throw zstdCorrupt("an FSE table description is missing") }
        var bits = ForwardBits(base, count: available)
        let log = bits.peek(4) + 5
        bits.skip(4)
        guard log <= maxLog else {
            throw zstdCorrupt("an FSE table's accuracy log \(log) is over \(maxLog)")
        }
        var counts = [Int16](repeating: 0, count: maxSymbol + 1)
        var remaining = (1 << log) + 1
        var threshold = 1 << log
        var width = log + 1
        var symbol = 0
        var previousZero = false
        while remaining > 1 && symbol <= maxSymbol {
            if previousZero {
                // Two-bit repeat flags: each 3 adds three zero counts and asks for more.
                var next = symbol
                while true {
                    let flag = bits.peek(2)
                    bits.skip(2)
                    next += flag
                    if flag != 3 { break }
                    guard next <= maxSymbol else { break }
                }
                guard next <= maxSymbol else {
                    throw zstdCorrupt("an FSE table's zero run passes symbol \(maxSymbol)")
                }
                symbol = next
            }
            let largest = (2 * threshold - 1) - remaining
            let value = bits.peek(width)
            var count: Int
            if value & (threshold - 1) < largest {
                count = value & (threshold - 1)
                bits.skip(width - 1)
            } else {
                count = value
                if count >= threshold { count -= largest }
                bits.skip(width)
            }
            count -= 1
            remaining -= count < 0 ? -count : count
            counts[symbol] = Int16(count)
            symbol += 1
            previousZero = count == 0
            guard remaining >= 1 else { throw zstdCorrupt("an FSE table's counts overflow its size") }
            while remaining < threshold {
                width -= 1
                threshold >>= 1
            }
        }
        guard remaining == 1 else { throw zstdCorrupt("an FSE table's counts do not add up to its size") }
        guard bits.bytesUsed <= available else { throw zstdCorrupt("an FSE table description runs past its block") }
        counts.removeLast(counts.count - symbol)
        return Distribution(counts: counts, accuracyLog: log, bytesUsed: bits.bytesUsed)
    }

    /// One cell of a decoding table: the cell's symbol, and how the next state is read.
    struct Cell {
        var symbol: UInt8
        var bits: UInt8
        var baseline: UInt16
    }

    /// Spreads `distribution` over `1 << accuracyLog` cells and gives each cell its symbol,
    /// the bits to read and the base of the next state (RFC 8878 §4.1.1), calling `cell`
    /// once per cell in order.
    ///
    /// - Throws: `corruptArchive` when the counts do not fill the table exactly.
    static func build(
        _ counts: [Int16],
        accuracyLog: Int,
        cell: (Int, Cell) -> Void
    ) throws {
        let size = 1 << accuracyLog
        var spread = [UInt8](repeating: 0, count: size)
        var next = [Int](repeating: 0, count: counts.count)
        var high = size - 1
        for (symbol, count) in counts.enumerated() where count == -1 {
            guard high >= 0 else { throw zstdCorrupt("an FSE table has more symbols than cells") }
            spread[high] = UInt8(truncatingIfNeeded: symbol)
            high -= 1
            next[symbol] = 1
        }
        let step = (size >> 1) + (size >> 3) + 3
        let mask = size - 1
        var position = 0
        var filled = 0
        for (symbol, count) in counts.enumerated() where count > 0 {
            next[symbol] = Int(count)
            filled += Int(count)
            guard filled <= high + 1 else { throw zstdCorrupt("an FSE table's counts overflow its size") }
            for _ in 0..<Int(count) {
                spread[position] = UInt8(truncatingIfNeeded: symbol)
                repeat { position = (position + step) & mask } while position > high
            }
        }
        guard position == 0, filled == high + 1 else { throw zstdCorrupt("an FSE table's counts do not fill it") }
        for index in 0..<size {
            let symbol = Int(spread[index])
            let state = next[symbol]
            next[symbol] += 1
            let width = accuracyLog - highBit(state)
            cell(
                index,
                Cell(
                    symbol: spread[index],
                    bits: UInt8(truncatingIfNeeded: width),
                    baseline: UInt16(truncatingIfNeeded: (state << width) - size)
                )
            )
        }
    }
}

/// A decoding table for one of the three sequence codes: each cell gives, beside the next
/// state, the code's base value and the number of extra bits after it (RFC 8878 §3.1.1.3.2).
struct SequenceTable {
    /// A cell: 8 bytes, read once per sequence.
    struct Cell {
        var nextBase: UInt16
        var stateBits: UInt8
        var extraBits: UInt8
        var base: UInt32
    }

    /// What a code stands for: its base value and extra bits.
    struct Codes {
        var bases: [UInt32]
        var extraBits: [UInt8]
        var maxSymbol: Int { bases.count - 1 }
        /// The largest accuracy log a table of this code may have.
        var maxLog: Int
        /// The predefined distribution (RFC 8878 §3.1.1.3.2.2) and its accuracy log.
        var predefined: [Int16]
        var predefinedLog: Int

        static let literalLengths = Codes(
            bases: [
                0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 22, 24, 28, 32, 40, 48, 64,
                0x80, 0x100, 0x200, 0x400, 0x800, 0x1000, 0x2000, 0x4000, 0x8000, 0x10000,
            ],
            extraBits: [
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13,
                14, 15, 16,
            ],
            maxLog: 9,
            predefined: [
                4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1,
                -1, -1,
            ],
            predefinedLog: 6
        )

        static let matchLengths = Codes(
            bases: [
                3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30,
                31, 32, 33, 34, 35, 37, 39, 41, 43, 47, 51, 59, 67, 83, 99, 0x83, 0x103, 0x203, 0x403, 0x803, 0x1003,
                0x2003, 0x4003, 0x8003, 0x10003,
            ],
            extraBits: [
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1,
                1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
            ],
            maxLog: 9,
            predefined: [
                1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1,
            ],
            predefinedLog: 6
        )

        /// Offset codes: the code is the number of extra bits, and the base `1 << code` (the
        /// result is an offset value: 1 to 3 name repeated offsets, and over 3 an offset + 3).
        static let offsets = Codes(
            bases: (0..<32).map { UInt32(1) << UInt32($0) },
            extraBits: (0..<32).map { UInt8($0) },
            maxLog: 8,
            predefined: [
                1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1,
            ],
            predefinedLog: 5
        )
    }

    /// The cells; `1 << accuracyLog` of them are in use.
    var cells: [Cell]
    var accuracyLog: Int

    /// An empty table of room for `codes`' largest one.
    init(room codes: Codes) {
        cells = [Cell](repeating: Cell(nextBase: 0, stateBits: 0, extraBits: 0, base: 0), count: 1 << codes.maxLog)
        accuracyLog = 0
    }

    /// Fills the table from a distribution of `codes`.
    mutating func fill(_ counts: [Int16], accuracyLog: Int, codes: Codes) throws {
        guard counts.count <= codes.bases.count else { throw zstdCorrupt("a sequence table names an unknown code") }
        self.accuracyLog = accuracyLog
        try cells.withUnsafeMutableBufferPointer { cells in
            try FSE.build(counts, accuracyLog: accuracyLog) { index, cell in
                let symbol = Int(cell.symbol)
                cells[index] = Cell(
                    nextBase: cell.baseline,
                    stateBits: cell.bits,
                    extraBits: codes.extraBits[symbol],
                    base: codes.bases[symbol]
                )
            }
        }
    }

    /// Makes the table one cell that always gives `symbol` (RLE mode).
    mutating func fill(single symbol: Int, codes: Codes) throws {
        guard symbol <= codes.maxSymbol else { throw zstdCorrupt("an RLE sequence code \(symbol) is unknown") }
        accuracyLog = 0
        cells[0] = Cell(nextBase: 0, stateBits: 0, extraBits: codes.extraBits[symbol], base: codes.bases[symbol])
    }

    /// The predefined tables, built once.
    static let predefinedLiteralLengths = predefined(.literalLengths)
    static let predefinedMatchLengths = predefined(.matchLengths)
    static let predefinedOffsets = predefined(.offsets)

    private static func predefined(_ codes: Codes) -> SequenceTable {
        var table = SequenceTable(room: codes)
        // The predefined distributions fill their tables exactly (a fact of the format).
        do {
            try table.fill(codes.predefined, accuracyLog: codes.predefinedLog, codes: codes)
        } catch {
            preconditionFailure("zstd's predefined distribution does not build: \(error)")
        }
        return table
    }
}
