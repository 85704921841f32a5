import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Decodes the frames of one input, one after another (RFC 8878 §3.1).
struct ZstdFrames {
    private let input: UnsafeRawBufferPointer
    private let dictionary: ZstdDictionary?
    private let prefix: UnsafeRawBufferPointer?
    private let limits: ZstdDecoder.Limits

    /// Frames compressed with `dictionary`, if any.
    init(input: UnsafeRawBufferPointer, dictionary: ZstdDictionary?, limits: ZstdDecoder.Limits) {
        self.input = input
        self.dictionary = dictionary
        self.prefix = nil
        self.limits = limits
    }

    /// Frames compressed against the raw content `prefix` (`--patch-from`).
    init(input: UnsafeRawBufferPointer, prefix: UnsafeRawBufferPointer, limits: ZstdDecoder.Limits) {
        self.input = input
        self.dictionary = nil
        self.prefix = prefix
        self.limits = limits
    }

    /// Decodes every frame, handing the output to `output` a piece at a time; each frame
    /// keeps its window, as much again (at least 1 MiB) and one block.
    func decodeAll(output: (UnsafeRawBufferPointer) throws -> Void) throws {
        try withDictionary { content, tables in
            let buffer = OutputBuffer(growing: false)
            try run(content: content, tables: tables, buffer: buffer, singleFrame: false, emit: output)
        }
    }

    /// Decodes every frame into one `Data`, decoded in place.
    ///
    /// - Parameter singleFrame: Refuse anything but one frame (a patch).
    func decodeAllToData(singleFrame: Bool = false) throws -> Data {
        try withDictionary { content, tables in
            let buffer = OutputBuffer(growing: true)
            try run(content: content, tables: tables, buffer: buffer, singleFrame: singleFrame) { _ in }
            return buffer.takeData()
        }
    }

    /// The dictionary's content and tables, valid during `body`.
    private func withDictionary<Result>(
        _ body: (UnsafeRawBufferPointer?, ZstdDictionaryTables?) throws -> Result
    ) throws -> Result {
        if let prefix { return try body(prefix, nil) }
        guard let dictionary else { return try body(nil, nil) }
        return try dictionary.data.withUnsafeBytes { bytes in
            guard dictionary.isFormatted else { return try body(bytes, nil) }
            let tables = try ZstdDictionaryTables(bytes)
            return try body(UnsafeRawBufferPointer(rebasing: bytes[tables.contentOffset...]), tables)
        }
    }

    private func run(
        content: UnsafeRawBufferPointer?,
        tables: ZstdDictionaryTables?,
        buffer: OutputBuffer,
        singleFrame: Bool,
        emit: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let blocks = ZstdBlockDecoder()
        var offset = 0
        var total: Int64 = 0
        var frames = 0
        while offset < input.count {
            let rest = UnsafeRawBufferPointer(rebasing: input[offset...])
            guard rest.count >= 4 else { throw zstdCorrupt("the input has \(rest.count) bytes after its last frame") }
            let magic = UInt32(littleEndian: rest.loadUnaligned(as: UInt32.self))
            if magic & ZstdFrameHeader.skippableMask == ZstdFrameHeader.skippableMagic, !singleFrame {
                guard rest.count >= 8 else { throw zstdCorrupt("a skippable frame's header is cut short") }
                let size = Int(UInt32(littleEndian: rest.loadUnaligned(fromByteOffset: 4, as: UInt32.self)))
                guard size <= rest.count - 8 else { throw zstdCorrupt("a skippable frame runs past the input") }
                offset += 8 + size
                continue
            }
            guard !singleFrame || frames == 0 else { throw zstdCorrupt("the input has bytes after its frame") }
            let header = try ZstdFrameHeader(rest)
            if header.dictionaryID != 0 {
                guard let tables else {
                    throw HotUpdateError(
                        .invalidArgument,
                        "zstd: the frame needs dictionary \(header.dictionaryID), and none with an ID was given"
                    )
                }
                guard tables.id == header.dictionaryID else {
                    throw HotUpdateError(
                        .invalidArgument,
                        "zstd: the frame needs dictionary \(header.dictionaryID), not dictionary \(tables.id)"
                    )
                }
            }
            guard header.windowSize <= UInt64(limits.maxWindowBytes) else {
                throw HotUpdateError(
                    .limitExceeded,
                    "zstd: a frame's window of \(header.windowSize) bytes is over the limit of \(limits.maxWindowBytes)"
                )
            }
            let allowed = limits.maxOutputBytes - total
            if let size = header.contentSize, size > UInt64(max(allowed, 0)) {
                throw HotUpdateError(
                    .limitExceeded,
                    "zstd: a frame declares \(size) bytes, over the \(allowed) the limit leaves"
                )
            }
            blocks.startFrame(dictionary: tables)
            let used = try decodeFrame(
                rest,
                header: header,
                blocks: blocks,
                buffer: buffer,
                dictionary: content,
                allowed: allowed,
                emit: emit
            )
            total += Int64(buffer.frameBytes)
            offset += used
            frames += 1
        }
        guard frames > 0 || !singleFrame else { throw zstdCorrupt("the input holds no frame") }
    }

    /// Decodes one frame's blocks and checks its size and checksum; returns the bytes it took.
    private func decodeFrame(
        _ input: UnsafeRawBufferPointer,
        header: ZstdFrameHeader,
        blocks: ZstdBlockDecoder,
        buffer: OutputBuffer,
        dictionary: UnsafeRawBufferPointer?,
        allowed: Int64,
        emit: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Int {
        guard let source = input.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return 0 }
        let window = Int(header.windowSize)
        try buffer.startFrame(window: window, contentSize: header.contentSize.map { Int($0) }, emit: emit)
        var hasher = XXHash64()
        var offset = header.size
        let blockLimit = min(window, ZstdBlockDecoder.maxBlockSize)
        let remainingLimit = { allowed - Int64(buffer.frameBytes) }
        while true {
            guard input.count - offset >= 3 else { throw zstdCorrupt("the input ends inside a frame") }
            let blockHeader = Int(source[offset]) | Int(source[offset + 1]) << 8 | Int(source[offset + 2]) << 16
            offset += 3
            let isLast = blockHeader & 1 != 0
            let type = (blockHeader >> 1) & 3
            let size = blockHeader >> 3
            guard type != 3 else { throw zstdCorrupt("a block has the reserved type") }
            let taken = type == 1 ? 1 : size
            guard taken <= input.count - offset else { throw zstdCorrupt("a block runs past the input") }
            // A block takes, and decodes to, at most the frame's largest block: 128 KiB, or the
            // window when smaller (RFC 8878 §3.1.1.2.3).
            guard size <= blockLimit else {
                throw zstdCorrupt("a block of \(size) bytes is over the frame's block size of \(blockLimit)")
            }
            var formatBound = blockLimit
            if let content = header.contentSize { formatBound = min(formatBound, Int(content) - buffer.frameBytes) }
            let limitBound = Int(min(remainingLimit(), Int64(Int.max)))
            let bound = min(formatBound, limitBound)
            try buffer.makeRoom(bound, emit: emit)
            let start = buffer.writePointer
            let written: Int
            switch type {
            case 0, 1:
                guard size <= bound else {
                    throw size > limitBound
                        ? HotUpdateError(.limitExceeded, "zstd: the input decodes to more bytes than the limit allows")
                        : zstdCorrupt("a block decodes past its frame's content size or block size")
                }
                if type == 0 {
                    start.update(from: source + offset, count: size)
                } else {
                    start.update(repeating: source[offset], count: size)
                }
                written = size
            default:
                let span = ZstdOutputSpan(
                    historyStart: buffer.historyStart,
                    start: start,
                    end: start + bound,
                    endIsOutputLimit: limitBound < formatBound,
                    dictionary: buffer.hasSlid ? nil : dictionary
                )
                written = try blocks.decodeCompressed(source + offset, size: size, blockLimit: blockLimit, into: span)
            }
            if header.hasChecksum { hasher.update(start, count: written) }
            buffer.advance(written)
            offset += taken
            if isLast { break }
        }
        if let content = header.contentSize, buffer.frameBytes != Int(content) {
            throw zstdCorrupt("a frame decodes to \(buffer.frameBytes) bytes, its header says \(content)")
        }
        if header.hasChecksum {
            guard input.count - offset >= 4 else { throw zstdCorrupt("the input ends before a frame's checksum") }
            let stored = UInt32(littleEndian: input.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
            let computed = UInt32(truncatingIfNeeded: hasher.digest())
            guard stored == computed else {
                throw HotUpdateError(
                    .checksumMismatch,
                    "zstd: a frame's content checksum is \(String(computed, radix: 16)), the frame says \(String(stored, radix: 16))"
                )
            }
            offset += 4
        }
        try buffer.endFrame(emit: emit)
        return offset
    }
}

/// The output of the frames: the window the matches reach back over, and the bytes not yet
/// handed out. Growing, it holds every frame's output for a `Data`; otherwise it keeps about
/// twice a frame's window and slides.
private final class OutputBuffer {
    private let growing: Bool
    private var base: UnsafeMutablePointer<UInt8>?
    /// Usable bytes; ``ZstdBlockDecoder/slack`` more are allocated.
    private var capacity = 0
    /// The next byte to write.
    private var position = 0
    /// Where the current frame's history starts.
    private var frameStart = 0
    /// Bytes before this are handed out (sliding mode).
    private var emitted = 0
    private var window = 0
    /// The current frame's bytes so far.
    private(set) var frameBytes = 0
    /// Whether the current frame's earliest bytes (and so its dictionary) are gone.
    private(set) var hasSlid = false

    init(growing: Bool) {
        self.growing = growing
    }

    deinit { free(base) }

    var historyStart: UnsafeMutablePointer<UInt8> { unsafeBase + frameStart }
    var writePointer: UnsafeMutablePointer<UInt8> { unsafeBase + position }

    private var unsafeBase: UnsafeMutablePointer<UInt8> {
        guard let base else { preconditionFailure("the output buffer is used before a frame starts") }
        return base
    }

    func startFrame(window: Int, contentSize: Int?, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        self.window = window
        frameBytes = 0
        hasSlid = false
        if growing {
            frameStart = position
            // A declared size is reserved up to 256 MiB; past that the buffer grows as bytes come,
            // so a header's claim alone never takes memory.
            try reserve(position + min(contentSize ?? min(window, 1 << 20), 1 << 28))
        } else {
            position = 0
            emitted = 0
            frameStart = 0
            let sliding = window + max(window, 1 << 20) + ZstdBlockDecoder.maxBlockSize
            try reserve(contentSize.map { min($0, sliding) } ?? sliding)
        }
    }

    /// Makes room for `bytes` more at the write position.
    func makeRoom(_ bytes: Int, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard capacity - position < bytes else { return }
        if growing {
            try reserve(max(capacity * 2, position + bytes))
            return
        }
        // Hand out what is not yet, and keep the last window's bytes.
        let base = unsafeBase
        if position > emitted { try emit(UnsafeRawBufferPointer(start: base + emitted, count: position - emitted)) }
        let keep = min(position, window)
        (base).update(from: base + (position - keep), count: keep)
        position = keep
        emitted = keep
        hasSlid = true
        guard capacity - position >= bytes else {
            preconditionFailure("a sliding output buffer is smaller than its window and a block")
        }
    }

    func advance(_ bytes: Int) {
        position += bytes
        frameBytes += bytes
    }

    func endFrame(emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard !growing, position > emitted else { return }
        try emit(UnsafeRawBufferPointer(start: unsafeBase + emitted, count: position - emitted))
        emitted = position
    }

    /// The bytes decoded, handed over without a copy.
    func takeData() -> Data {
        guard let base, position > 0 else { return Data() }
        self.base = nil
        return Data(bytesNoCopy: base, count: position, deallocator: .free)
    }

    private func reserve(_ wanted: Int) throws {
        guard wanted > capacity || base == nil else { return }
        let size = max(wanted, capacity)
        guard let grown = realloc(base, size + ZstdBlockDecoder.slack) else {
            throw HotUpdateError(.limitExceeded, "zstd: cannot allocate \(size) bytes for the output")
        }
        base = grown.assumingMemoryBound(to: UInt8.self)
        capacity = size
    }
}
