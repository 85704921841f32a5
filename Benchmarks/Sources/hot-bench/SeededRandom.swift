/// SplitMix64: a tiny, fast generator whose output depends only on its seed, so
/// the corpora are the same bytes on every run, machine and Swift version (the
/// standard library's `random(in:using:)` algorithms are not promised to stay put,
/// so bounded values are derived here too).
struct SeededRandom {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A value in `range` (multiply-shift; the bias is far below anything a corpus notices).
    mutating func int(in range: ClosedRange<Int>) -> Int {
        let span = UInt64(range.upperBound - range.lowerBound + 1)
        let high = ((next() >> 32) &* span) >> 32
        return range.lowerBound + Int(high)
    }

    /// A value in `[low, high)`.
    mutating func uniform(_ low: Double, _ high: Double) -> Double {
        let unit = Double(next() >> 11) / Double(UInt64(1) << 53)
        return low + (high - low) * unit
    }

    /// One element of a non-empty array.
    mutating func pick<T>(_ items: [T]) -> T { items[int(in: 0...(items.count - 1))] }

    /// Fills `buffer` with random bytes.
    mutating func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        var offset = 0
        while offset + 8 <= buffer.count {
            buffer.storeBytes(of: next().littleEndian, toByteOffset: offset, as: UInt64.self)
            offset += 8
        }
        if offset < buffer.count {
            var last = next()
            while offset < buffer.count {
                buffer[offset] = UInt8(truncatingIfNeeded: last)
                last >>= 8
                offset += 1
            }
        }
    }
}
