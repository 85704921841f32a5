import HotCore

/// A zstd format error: the input breaks RFC 8878 at `what`.
@inline(never)
func zstdCorrupt(_ what: String) -> HotUpdateError {
    HotUpdateError(.corruptArchive, "zstd: \(what)")
}

/// What a reload of a ``BackwardBits`` found, as zstd's reference decoder names it.
enum BitsStatus: Int {
    /// At least 57 bits can be read before the next reload.
    case unfinished = 0
    /// The reader reached the stream's first byte; fewer bits are left.
    case endOfBuffer = 1
    /// Every bit was read, none more.
    case completed = 2
    /// More bits were read than the stream holds (the extra ones read as zero).
    case overflow = 3
}

/// Reads a bit stream from its end towards its start, as zstd writes FSE and Huffman
/// streams: the last byte holds a marker bit above the first bit to read.
///
/// `container` holds the eight bytes at `cursor` (fewer for streams under eight bytes,
/// zero-padded at the top); `consumed` counts the bits already read from its top. Reading
/// more bits than the stream holds reads zeros and is caught by ``isExactlyConsumed`` or
/// ``reload()``.
struct BackwardBits {
    private(set) var container: UInt64
    private(set) var consumed: Int
    private var cursor: UnsafePointer<UInt8>
    private let start: UnsafePointer<UInt8>
    /// `start + 8`: from here down, reloads are whole eight-byte loads.
    private let fastLimit: UnsafePointer<UInt8>

    /// A reader of the `count` bytes at `start`.
    ///
    /// - Throws: `corruptArchive` for an empty stream or one whose last byte is zero.
    init(_ start: UnsafePointer<UInt8>, count: Int) throws {
        guard count >= 1 else { throw zstdCorrupt("a bit stream is empty") }
        guard start[count - 1] != 0 else { throw zstdCorrupt("a bit stream ends without its marker bit") }
        self.start = start
        self.fastLimit = start + 8
        if count >= 8 {
            cursor = start + (count - 8)
            container = UInt64(littleEndian: UnsafeRawPointer(cursor).loadUnaligned(as: UInt64.self))
        } else {
            cursor = start
            var value: UInt64 = 0
            for index in 0..<count { value |= UInt64(start[index]) << (8 * UInt64(index)) }
            container = value
        }
        // The marker bit and the zeros above it (and the missing bytes of a short stream).
        consumed = container.leadingZeroBitCount + 1
    }

    /// The next `count` bits (0 to 56) without reading them.
    @inline(__always)
    func peek(_ count: Int) -> UInt64 {
        ((container &<< UInt64(truncatingIfNeeded: consumed)) &>> 1) &>> UInt64(truncatingIfNeeded: 63 - count)
    }

    /// The next `count` bits (1 to 56) without reading them: one shift fewer than ``peek(_:)``.
    @inline(__always)
    func peekNonZero(_ count: Int) -> Int {
        Int(
            truncatingIfNeeded: (container &<< UInt64(truncatingIfNeeded: consumed))
                &>> UInt64(truncatingIfNeeded: 64 - count)
        )
    }

    /// Marks `count` bits read.
    @inline(__always)
    mutating func skip(_ count: Int) {
        consumed &+= count
    }

    /// Reads `count` bits (0 to 56).
    @inline(__always)
    mutating func read(_ count: Int) -> Int {
        let value = peek(count)
        consumed &+= count
        return Int(truncatingIfNeeded: value)
    }

    /// Refills the container so that at least 57 bits can be read, where the stream has them.
    @inline(__always)
    @discardableResult
    mutating func reload() -> BitsStatus {
        if consumed > 64 { return .overflow }
        if cursor >= fastLimit {
            cursor -= consumed &>> 3
            consumed &= 7
            container = UInt64(littleEndian: UnsafeRawPointer(cursor).loadUnaligned(as: UInt64.self))
            return .unfinished
        }
        return reloadNearStart()
    }

    /// Whether a reload is a whole eight-byte load (the fast loops' condition).
    @inline(__always)
    var hasFastReload: Bool { cursor >= fastLimit }

    @inline(never)
    private mutating func reloadNearStart() -> BitsStatus {
        if cursor == start { return consumed < 64 ? .endOfBuffer : .completed }
        var bytes = consumed >> 3
        var status = BitsStatus.unfinished
        if cursor - bytes < start {
            bytes = cursor - start
            status = .endOfBuffer
        }
        cursor -= bytes
        consumed -= bytes * 8
        container = UInt64(littleEndian: UnsafeRawPointer(cursor).loadUnaligned(as: UInt64.self))
        return status
    }

    /// Whether every bit of the stream was read, and no more.
    var isExactlyConsumed: Bool { cursor == start && consumed == 64 }
}

/// Reads bits from the start of a buffer forwards (FSE table descriptions), reading zeros past
/// its end; ``bytesUsed`` tells whether the reads stayed inside it.
struct ForwardBits {
    private let base: UnsafePointer<UInt8>
    private let count: Int
    /// Bits read so far.
    private(set) var position = 0

    init(_ base: UnsafePointer<UInt8>, count: Int) {
        self.base = base
        self.count = count
    }

    /// The next `width` bits (at most 25) without reading them.
    func peek(_ width: Int) -> Int {
        var value = 0
        let first = position >> 3
        for index in 0..<4 where first + index < count {
            value |= Int(base[first + index]) << (8 * index)
        }
        return (value >> (position & 7)) & ((1 << width) - 1)
    }

    /// Marks `width` bits read.
    mutating func skip(_ width: Int) { position += width }

    /// The bytes the reads covered.
    var bytesUsed: Int { (position + 7) >> 3 }
}

/// The index of the highest set bit of `value` (which is not zero).
@inline(__always)
func highBit(_ value: Int) -> Int {
    Int.bitWidth - 1 - value.leadingZeroBitCount
}
