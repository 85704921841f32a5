/// XXH64 with seed 0, fed in pieces: the content checksum of a zstd frame (its low 32 bits).
struct XXHash64 {
    private static let prime1: UInt64 = 11_400_714_785_074_694_791
    private static let prime2: UInt64 = 14_029_467_366_897_019_727
    private static let prime3: UInt64 = 1_609_587_929_392_839_161
    private static let prime4: UInt64 = 9_650_029_242_287_828_579
    private static let prime5: UInt64 = 2_870_177_450_012_600_261

    private var lanes: (UInt64, UInt64, UInt64, UInt64) = (
        prime1 &+ prime2, prime2, 0, 0 &- prime1
    )
    /// Bytes short of a 32-byte stripe, kept for the next piece.
    private var pending: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    private var pendingCount = 0
    private var total: UInt64 = 0

    @inline(__always)
    private static func round(_ accumulator: UInt64, _ input: UInt64) -> UInt64 {
        let sum = accumulator &+ input &* prime2
        return ((sum << 31) | (sum >> 33)) &* prime1
    }

    @inline(__always)
    private static func merge(_ hash: UInt64, _ lane: UInt64) -> UInt64 {
        (hash ^ round(0, lane)) &* prime1 &+ prime4
    }

    @inline(__always)
    private static func word(_ base: UnsafeRawPointer, _ offset: Int) -> UInt64 {
        UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    /// Adds `count` bytes at `base`.
    mutating func update(_ base: UnsafeRawPointer, count: Int) {
        total &+= UInt64(count)
        var offset = 0
        if pendingCount > 0 {
            let take = min(32 - pendingCount, count)
            withUnsafeMutableBytes(of: &pending) { stripe in
                stripe.baseAddress?.advanced(by: pendingCount).copyMemory(from: base, byteCount: take)
            }
            pendingCount += take
            offset = take
            guard pendingCount == 32 else { return }
            withUnsafeBytes(of: pending) { stripe in
                if let stripe = stripe.baseAddress { consume(stripe, count: 32) }
            }
            pendingCount = 0
        }
        let whole = (count - offset) & ~31
        if whole > 0 { consume(base + offset, count: whole) }
        offset += whole
        if offset < count {
            let rest = count - offset
            withUnsafeMutableBytes(of: &pending) { stripe in
                stripe.baseAddress?.copyMemory(from: base + offset, byteCount: rest)
            }
            pendingCount = rest
        }
    }

    /// Runs the four lanes over `count` bytes (a multiple of 32).
    private mutating func consume(_ base: UnsafeRawPointer, count: Int) {
        var (lane1, lane2, lane3, lane4) = lanes
        var offset = 0
        while offset < count {
            lane1 = Self.round(lane1, Self.word(base, offset))
            lane2 = Self.round(lane2, Self.word(base, offset + 8))
            lane3 = Self.round(lane3, Self.word(base, offset + 16))
            lane4 = Self.round(lane4, Self.word(base, offset + 24))
            offset += 32
        }
        lanes = (lane1, lane2, lane3, lane4)
    }

    /// The hash of every byte added.
    func digest() -> UInt64 {
        var hash: UInt64
        let (lane1, lane2, lane3, lane4) = lanes
        if total >= 32 {
            hash = rotate(lane1, 1) &+ rotate(lane2, 7) &+ rotate(lane3, 12) &+ rotate(lane4, 18)
            hash = Self.merge(hash, lane1)
            hash = Self.merge(hash, lane2)
            hash = Self.merge(hash, lane3)
            hash = Self.merge(hash, lane4)
        } else {
            hash = Self.prime5
        }
        hash &+= total
        withUnsafeBytes(of: pending) { stripe in
            guard let base = stripe.baseAddress else { return }
            var offset = 0
            while offset + 8 <= pendingCount {
                hash ^= Self.round(0, Self.word(base, offset))
                hash = rotate(hash, 27) &* Self.prime1 &+ Self.prime4
                offset += 8
            }
            if offset + 4 <= pendingCount {
                let half = UInt64(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
                hash ^= half &* Self.prime1
                hash = rotate(hash, 23) &* Self.prime2 &+ Self.prime3
                offset += 4
            }
            while offset < pendingCount {
                hash ^= UInt64(base.load(fromByteOffset: offset, as: UInt8.self)) &* Self.prime5
                hash = rotate(hash, 11) &* Self.prime1
                offset += 1
            }
        }
        hash ^= hash >> 33
        hash &*= Self.prime2
        hash ^= hash >> 29
        hash &*= Self.prime3
        hash ^= hash >> 32
        return hash
    }

    @inline(__always)
    private func rotate(_ value: UInt64, _ count: UInt64) -> UInt64 {
        (value << count) | (value >> (64 - count))
    }
}
