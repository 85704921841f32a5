import HotCore

/// The three tables a block's sequences are decoded with.
struct SequenceTables {
    var literalLengths: UnsafePointer<SequenceTable.Cell>
    var literalLengthLog: Int
    var offsets: UnsafePointer<SequenceTable.Cell>
    var offsetLog: Int
    var matchLengths: UnsafePointer<SequenceTable.Cell>
    var matchLengthLog: Int
}

extension ZstdBlockDecoder {
    /// Decodes `count` sequences and carries each out as it is decoded: its literals copied,
    /// then its match (RFC 8878 §3.1.1.3.2 and §3.1.1.4). Returns the bytes written.
    @inline(__always)
    static func execute(
        count: Int,
        bits initialBits: BackwardBits,
        tables: inout SequenceTables,
        literals: UnsafePointer<UInt8>,
        literalCount: Int,
        span: ZstdOutputSpan,
        repeats: inout (Int, Int, Int)
    ) throws -> Int {
        var bits = initialBits
        var literalLengthState = bits.read(tables.literalLengthLog)
        var offsetState = bits.read(tables.offsetLog)
        var matchLengthState = bits.read(tables.matchLengthLog)
        bits.reload()
        let literalLengthTable = tables.literalLengths
        let offsetTable = tables.offsets
        let matchLengthTable = tables.matchLengths
        var (repeat1, repeat2, repeat3) = repeats
        var output = span.start
        let outputEnd = span.end
        let historyStart = span.historyStart
        var literal = literals
        let literalsEnd = literals + literalCount
        var remaining = count
        while true {
            let literalLengthCell = literalLengthTable[literalLengthState]
            let offsetCell = offsetTable[offsetState]
            let matchLengthCell = matchLengthTable[matchLengthState]
            let offsetBits = Int(offsetCell.extraBits)
            let matchLengthBits = Int(matchLengthCell.extraBits)
            let literalLengthBits = Int(literalLengthCell.extraBits)

            let offsetValue = Int(offsetCell.base) &+ bits.read(offsetBits)
            let matchLength = Int(matchLengthCell.base) &+ bits.read(matchLengthBits)
            // 57 bits after a reload: the states' 26 bits must fit after the extra bits.
            if offsetBits &+ matchLengthBits &+ literalLengthBits >= 31 { bits.reload() }
            let literalLength = Int(literalLengthCell.base) &+ bits.read(literalLengthBits)

            var offset: Int
            if offsetValue > 3 {
                offset = offsetValue &- 3
                repeat3 = repeat2
                repeat2 = repeat1
                repeat1 = offset
            } else {
                let index = offsetValue &- 1 &+ (literalLength == 0 ? 1 : 0)
                if index == 0 {
                    offset = repeat1
                } else {
                    offset = index == 1 ? repeat2 : (index == 2 ? repeat3 : repeat1 &- 1)
                    if index != 1 { repeat3 = repeat2 }
                    repeat2 = repeat1
                    repeat1 = offset
                }
            }

            guard literalLength <= literalsEnd - literal else {
                throw zstdCorrupt("a sequence takes more literals than its block has")
            }
            guard literalLength &+ matchLength <= outputEnd - output else {
                throw Self.pastEnd(span)
            }
            // Literals, 16 bytes at a time (the literals and the output have slack).
            copy16(output, literal, literalLength)
            output += literalLength
            literal += literalLength

            // The match.
            let history = output - historyStart
            if offset > history || offset < 1 {
                try copyFromDictionary(output, offset: offset, history: history, length: matchLength, span: span)
            } else {
                copyMatch(output, offset: offset, length: matchLength)
            }
            output += matchLength

            remaining &-= 1
            if remaining == 0 { break }
            // The states, in the order the format gives: literal lengths, match lengths, offsets.
            literalLengthState = Int(literalLengthCell.nextBase) &+ bits.read(Int(literalLengthCell.stateBits))
            matchLengthState = Int(matchLengthCell.nextBase) &+ bits.read(Int(matchLengthCell.stateBits))
            offsetState = Int(offsetCell.nextBase) &+ bits.read(Int(offsetCell.stateBits))
            bits.reload()
        }
        guard bits.reload() == .completed || bits.isExactlyConsumed else {
            throw zstdCorrupt("a block's sequence bit stream does not end where its sequences do")
        }
        repeats = (repeat1, repeat2, repeat3)
        output = try copyLastLiterals(literal, count: literalsEnd - literal, to: output, span: span)
        return output - span.start
    }

    /// Copies the literals left after the last sequence; returns the new end of the output.
    static func copyLastLiterals(
        _ literal: UnsafePointer<UInt8>,
        count: Int,
        to output: UnsafeMutablePointer<UInt8>,
        span: ZstdOutputSpan
    ) throws -> UnsafeMutablePointer<UInt8> {
        guard count <= span.end - output else { throw pastEnd(span) }
        output.update(from: literal, count: count)
        return output + count
    }

    @inline(never)
    static func pastEnd(_ span: ZstdOutputSpan) -> HotUpdateError {
        span.endIsOutputLimit
            ? HotUpdateError(.limitExceeded, "zstd: the input decodes to more bytes than the limit allows")
            : zstdCorrupt("a block decodes past its frame's block size or content size")
    }

    /// A match that starts in the dictionary, before the frame's first byte.
    @inline(never)
    static func copyFromDictionary(
        _ output: UnsafeMutablePointer<UInt8>,
        offset: Int,
        history: Int,
        length: Int,
        span: ZstdOutputSpan
    ) throws {
        guard offset >= 1 else { throw zstdCorrupt("a sequence has offset 0") }
        let back = offset - history
        guard let dictionary = span.dictionary, let base = dictionary.baseAddress, back <= dictionary.count else {
            throw zstdCorrupt("a match reaches back \(offset) bytes, before the data it may refer to")
        }
        let source = base.assumingMemoryBound(to: UInt8.self) + (dictionary.count - back)
        if back >= length {
            output.update(from: source, count: length)
            return
        }
        output.update(from: source, count: back)
        // The rest continues from the frame's first byte.
        copyMatch(output + back, offset: offset, length: length - back)
    }

    /// Copies `length` bytes (at least 1) from `source` to `destination`, 16 at a time,
    /// writing up to 15 bytes past the end.
    @inline(__always)
    static func copy16(_ destination: UnsafeMutablePointer<UInt8>, _ source: UnsafePointer<UInt8>, _ length: Int) {
        let destinationRaw = UnsafeMutableRawPointer(destination)
        let sourceRaw = UnsafeRawPointer(source)
        var offset = 0
        repeat {
            let low = sourceRaw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            let high = sourceRaw.loadUnaligned(fromByteOffset: offset &+ 8, as: UInt64.self)
            destinationRaw.storeBytes(of: low, toByteOffset: offset, as: UInt64.self)
            destinationRaw.storeBytes(of: high, toByteOffset: offset &+ 8, as: UInt64.self)
            offset &+= 16
        } while offset < length
    }

    /// Copies a match of `length` bytes from `offset` bytes back (1 or more, inside the
    /// output), writing up to 15 bytes past its end.
    @inline(__always)
    static func copyMatch(_ output: UnsafeMutablePointer<UInt8>, offset: Int, length: Int) {
        if offset >= 16 {
            copy16(output, output - offset, length)
            return
        }
        copyShortOffset(output, offset: offset, length: length)
    }

    /// A match whose source overlaps its destination: the first 8 bytes one at a time, then
    /// 8 at a time from a distance of at least 8 that is a multiple of the offset.
    @inline(never)
    static func copyShortOffset(_ output: UnsafeMutablePointer<UInt8>, offset: Int, length: Int) {
        let source = output - offset
        for index in 0..<8 { output[index] = source[index] }
        guard length > 8 else { return }
        let distance = offset >= 8 ? offset : offset * ((8 + offset - 1) / offset)
        let raw = UnsafeMutableRawPointer(output)
        var position = 8
        repeat {
            let word = UnsafeRawPointer(raw).loadUnaligned(fromByteOffset: position - distance, as: UInt64.self)
            raw.storeBytes(of: word, toByteOffset: position, as: UInt64.self)
            position += 8
        } while position < length
    }
}
