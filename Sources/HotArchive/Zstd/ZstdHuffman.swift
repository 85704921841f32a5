/// The Huffman coding of literals (RFC 8878 §4.2): the tree description, the decoding
/// table, and the one- and four-stream decoders.
struct HuffmanTable {
    /// The most bits a code may have. The format says 11; zstd's reference decoder accepts
    /// 12, and so does this one, so that every frame it accepts decodes here too.
    static let maxLog = 12

    /// `1 << log` cells, each the symbol in its low byte and the code's length above it.
    var cells = [UInt16](repeating: 0, count: 1 << maxLog)
    var log = 0

    /// Reads a tree description at `base` (at most `available` bytes) into this table.
    ///
    /// - Returns: The bytes the description took.
    /// - Throws: `corruptArchive` for a description that breaks the format.
    mutating func read(_ base: UnsafePointer<UInt8>, available: Int) throws -> Int {
        guard available >= 1 else { throw zstdCorrupt("a Huffman tree description is missing") }
        var weights = [UInt8](repeating: 0, count: 256)
        var count = 0
        let header = Int(base[0])
        let used: Int
        if header >= 128 {
            // Four bits a weight, two weights a byte.
            count = header - 127
            used = 1 + (count + 1) / 2
            guard used <= available else { throw zstdCorrupt("a Huffman tree description runs past its block") }
            for index in 0..<count {
                let byte = base[1 + index / 2]
                weights[index] = index % 2 == 0 ? byte >> 4 : byte & 15
            }
        } else {
            used = 1 + header
            guard used <= available else { throw zstdCorrupt("a Huffman tree description runs past its block") }
            count = try Self.decodeWeights(base + 1, size: header, into: &weights)
        }
        try build(weights: &weights, count: count)
        return used
    }

    /// Decodes FSE-compressed weights (at most 255) into `weights`; returns how many.
    private static func decodeWeights(
        _ base: UnsafePointer<UInt8>,
        size: Int,
        into weights: inout [UInt8]
    ) throws -> Int {
        guard size >= 2 else { throw zstdCorrupt("Huffman weights are too short") }
        let distribution = try FSE.readDistribution(base, available: size, maxSymbol: 255, maxLog: 6)
        var table = [FSE.Cell](
            repeating: FSE.Cell(symbol: 0, bits: 0, baseline: 0),
            count: 1 << distribution.accuracyLog
        )
        try FSE.build(distribution.counts, accuracyLog: distribution.accuracyLog) { table[$0] = $1 }
        let streamSize = size - distribution.bytesUsed
        guard streamSize >= 1 else { throw zstdCorrupt("Huffman weights have no bit stream") }
        var bits = try BackwardBits(base + distribution.bytesUsed, count: streamSize)
        var first = bits.read(distribution.accuracyLog)
        var second = bits.read(distribution.accuracyLog)
        guard bits.reload() != .overflow else { throw zstdCorrupt("Huffman weights' states run past their stream") }
        var count = 0
        // Two states take turns; when a state's update reads past the stream, the other
        // state's symbol is the last one (zstd's reference decoder).
        while true {
            guard count <= 253 else { throw zstdCorrupt("too many Huffman weights") }
            weights[count] = table[first].symbol
            count += 1
            first = Int(table[first].baseline) + bits.read(Int(table[first].bits))
            if bits.reload() == .overflow {
                weights[count] = table[second].symbol
                count += 1
                break
            }
            guard count <= 253 else { throw zstdCorrupt("too many Huffman weights") }
            weights[count] = table[second].symbol
            count += 1
            second = Int(table[second].baseline) + bits.read(Int(table[second].bits))
            if bits.reload() == .overflow {
                weights[count] = table[first].symbol
                count += 1
                break
            }
        }
        return count
    }

    /// Completes the weights with the last one (implied) and builds the cells.
    private mutating func build(weights: inout [UInt8], count explicit: Int) throws {
        guard explicit >= 1, explicit <= 255 else { throw zstdCorrupt("a Huffman tree has \(explicit) weights") }
        var ranks = [Int](repeating: 0, count: Self.maxLog + 2)
        var total = 0
        for index in 0..<explicit {
            let weight = Int(weights[index])
            guard weight <= Self.maxLog else { throw zstdCorrupt("a Huffman weight \(weight) is over \(Self.maxLog)") }
            ranks[weight] += 1
            if weight > 0 { total += 1 << (weight - 1) }
        }
        guard total > 0 else { throw zstdCorrupt("a Huffman tree has no symbol") }
        let log = highBit(total) + 1
        guard log <= Self.maxLog else { throw zstdCorrupt("a Huffman tree is deeper than \(Self.maxLog) bits") }
        let rest = (1 << log) - total
        guard rest & (rest - 1) == 0 else { throw zstdCorrupt("a Huffman tree's weights do not complete it") }
        let last = highBit(rest) + 1
        weights[explicit] = UInt8(last)
        ranks[last] += 1
        guard ranks[1] >= 2, ranks[1] & 1 == 0 else {
            throw zstdCorrupt("a Huffman tree has an odd number of longest codes")
        }
        var next = [Int](repeating: 0, count: Self.maxLog + 2)
        var position = 0
        for weight in 1...log {
            next[weight] = position
            position += ranks[weight] << (weight - 1)
        }
        for symbol in 0...explicit {
            let weight = Int(weights[symbol])
            guard weight > 0 else { continue }
            let length = 1 << (weight - 1)
            let cell = UInt16(symbol) | UInt16(log + 1 - weight) << 8
            let first = next[weight]
            for index in first..<(first + length) { cells[index] = cell }
            next[weight] = first + length
        }
        self.log = log
    }

    /// Decodes the literals of a block: `streams` is 1 or 4, `regenerated` the literals' count.
    func decode(
        _ source: UnsafePointer<UInt8>,
        size: Int,
        streams: Int,
        regenerated: Int,
        into output: UnsafeMutablePointer<UInt8>
    ) throws {
        try cells.withUnsafeBufferPointer { cells in
            guard let table = cells.baseAddress else { return }
            if streams == 1 {
                var bits = try BackwardBits(source, count: size)
                try Self.decodeTail(&bits, table: table, log: log, output, count: regenerated)
                guard bits.isExactlyConsumed else { throw zstdCorrupt("a Huffman stream does not end where it should") }
                return
            }
            guard size >= 10 else { throw zstdCorrupt("four Huffman streams need at least ten bytes") }
            let sizes = (
                Int(source[0]) | Int(source[1]) << 8,
                Int(source[2]) | Int(source[3]) << 8,
                Int(source[4]) | Int(source[5]) << 8
            )
            let fourth = size - 6 - sizes.0 - sizes.1 - sizes.2
            guard fourth >= 1, sizes.0 >= 1, sizes.1 >= 1, sizes.2 >= 1 else {
                throw zstdCorrupt("a Huffman jump table's sizes do not fit the literals")
            }
            let segment = (regenerated + 3) / 4
            let lastCount = regenerated - 3 * segment
            guard lastCount >= 0 else { throw zstdCorrupt("too few literals for four Huffman streams") }
            let start1 = source + 6
            let start2 = start1 + sizes.0
            let start3 = start2 + sizes.1
            let start4 = start3 + sizes.2
            try Self.decodeFour(
                (start1, sizes.0),
                (start2, sizes.1),
                (start3, sizes.2),
                (start4, fourth),
                table: table,
                log: log,
                output: output,
                segment: segment,
                lastCount: lastCount
            )
        }
    }

    /// Decodes `count` symbols one at a time.
    @inline(__always)
    private static func decodeTail(
        _ bits: inout BackwardBits,
        table: UnsafePointer<UInt16>,
        log: Int,
        _ output: UnsafeMutablePointer<UInt8>,
        count: Int
    ) throws {
        var index = 0
        // Four symbols a reload while the reload is a whole load (4 × 12 bits ≤ 57).
        while index + 4 <= count, bits.hasFastReload {
            bits.reload()
            for step in 0..<4 {
                let cell = table[bits.peekNonZero(log)]
                bits.skip(Int(cell >> 8))
                output[index + step] = UInt8(truncatingIfNeeded: cell)
            }
            index += 4
        }
        while index < count {
            if bits.reload() == .overflow { throw zstdCorrupt("a Huffman stream ends before its literals") }
            let cell = table[bits.peekNonZero(log)]
            bits.skip(Int(cell >> 8))
            output[index] = UInt8(truncatingIfNeeded: cell)
            index += 1
        }
        bits.reload()
    }

    private static func decodeFour(
        _ first: (UnsafePointer<UInt8>, Int),
        _ second: (UnsafePointer<UInt8>, Int),
        _ third: (UnsafePointer<UInt8>, Int),
        _ fourth: (UnsafePointer<UInt8>, Int),
        table: UnsafePointer<UInt16>,
        log: Int,
        output: UnsafeMutablePointer<UInt8>,
        segment: Int,
        lastCount: Int
    ) throws {
        var bits1 = try BackwardBits(first.0, count: first.1)
        var bits2 = try BackwardBits(second.0, count: second.1)
        var bits3 = try BackwardBits(third.0, count: third.1)
        var bits4 = try BackwardBits(fourth.0, count: fourth.1)
        let out1 = output
        let out2 = output + segment
        let out3 = out2 + segment
        let out4 = out3 + segment
        var index = 0
        // The streams interleaved, four symbols each per round, while every stream has a
        // whole reload and every output room for the round (the fourth is the shortest).
        let rounds = min(segment, lastCount)
        while index + 4 <= rounds, bits1.hasFastReload, bits2.hasFastReload, bits3.hasFastReload,
            bits4.hasFastReload
        {
            bits1.reload()
            bits2.reload()
            bits3.reload()
            bits4.reload()
            for step in 0..<4 {
                let cell1 = table[bits1.peekNonZero(log)]
                let cell2 = table[bits2.peekNonZero(log)]
                let cell3 = table[bits3.peekNonZero(log)]
                let cell4 = table[bits4.peekNonZero(log)]
                bits1.skip(Int(cell1 >> 8))
                bits2.skip(Int(cell2 >> 8))
                bits3.skip(Int(cell3 >> 8))
                bits4.skip(Int(cell4 >> 8))
                out1[index + step] = UInt8(truncatingIfNeeded: cell1)
                out2[index + step] = UInt8(truncatingIfNeeded: cell2)
                out3[index + step] = UInt8(truncatingIfNeeded: cell3)
                out4[index + step] = UInt8(truncatingIfNeeded: cell4)
            }
            index += 4
        }
        try decodeTail(&bits1, table: table, log: log, out1 + index, count: segment - index)
        try decodeTail(&bits2, table: table, log: log, out2 + index, count: segment - index)
        try decodeTail(&bits3, table: table, log: log, out3 + index, count: segment - index)
        try decodeTail(&bits4, table: table, log: log, out4 + index, count: lastCount - index)
        guard bits1.isExactlyConsumed, bits2.isExactlyConsumed, bits3.isExactlyConsumed, bits4.isExactlyConsumed else {
            throw zstdCorrupt("a Huffman stream does not end where it should")
        }
    }
}
