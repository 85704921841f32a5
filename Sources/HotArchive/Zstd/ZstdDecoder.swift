import Foundation
import HotCore

/// A Zstandard decoder written in Swift (RFC 8878): the frames `zstd` and libzstd write,
/// including the raw-content prefix that `zstd --patch-from` compresses against and the
/// dictionaries `zstd --train` makes.
///
/// No Apple SDK ships libzstd, so HotArchive decodes zstd itself and runs the same code on
/// every platform; libzstd stays on publishers' machines, where `hot pack` makes patches.
///
/// Hostile input is refused with a clear `HotUpdateError` and never costs more
/// memory than its limits allow:
/// - a frame's declared window and content size are checked against ``Limits`` before any
///   memory is taken for them;
/// - every length, offset, table and bit stream is checked as it is read
///   (`HotUpdateError.Code.corruptArchive`);
/// - a frame's content checksum (XXH64) is verified
///   (`HotUpdateError.Code.checksumMismatch`).
///
/// Memory: decoding to a sink keeps the frame's window (at most ``Limits/maxWindowBytes``),
/// as much again (at least 1 MiB) and one 128 KiB block beside the input, and hands out
/// pieces of at most that; a frame smaller than that takes its own size. Decoding to `Data`
/// holds the result, and reserves at most 256 MiB on a frame's declared size alone.
///
/// ```swift
/// let decoder = ZstdDecoder()
/// let text = try decoder.decode(compressed)
/// let patched = try decoder.decode(patch, dictionary: .prefix(oldBundle))
/// ```
public struct ZstdDecoder: Sendable {
    /// What a frame may ask of the decoder.
    public struct Limits: Sendable, Equatable {
        /// The largest window a frame may declare, in bytes. zstd's decoder refuses windows
        /// over 128 MiB (`--long=27`) unless told otherwise; so does this one by default.
        public var maxWindowBytes: Int
        /// The most bytes the input may decode to, all frames together: 1 GiB by default, so
        /// that a few kilobytes of RLE blocks cannot fill memory or a disk. Raise it for
        /// larger content.
        public var maxOutputBytes: Int64

        /// Creates limits.
        public init(maxWindowBytes: Int = 1 << 27, maxOutputBytes: Int64 = 1 << 30) {
            self.maxWindowBytes = maxWindowBytes
            self.maxOutputBytes = maxOutputBytes
        }
    }

    /// The limits every frame is held to.
    public var limits: Limits

    /// Creates a decoder.
    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Decodes every frame of `input` (skippable frames are skipped) and hands the result
    /// to `output` in order, a piece at a time.
    ///
    /// A piece is valid only during the call. Bytes handed out before an error are not
    /// taken back: a caller that must not keep a partial result discards it when this
    /// throws.
    ///
    /// - Parameters:
    ///   - input: One or more frames, back to back.
    ///   - dictionary: The dictionary or raw prefix the frames were compressed with.
    ///   - output: Receives the decoded bytes.
    /// - Throws: `HotUpdateError.Code.corruptArchive` for input that is not
    ///   zstd or breaks the format, `HotUpdateError.Code.limitExceeded` for a
    ///   window or output over ``limits``, `HotUpdateError.Code.checksumMismatch`
    ///   when a frame's checksum differs, `HotUpdateError.Code.invalidArgument`
    ///   when a frame names a dictionary other than `dictionary`; and whatever `output`
    ///   throws.
    public func decode(
        _ input: UnsafeRawBufferPointer,
        dictionary: ZstdDictionary? = nil,
        output: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        try ZstdFrames(input: input, dictionary: dictionary, limits: limits).decodeAll(output: output)
    }

    /// Decodes every frame of `input` into one `Data`.
    ///
    /// - Throws: As ``decode(_:dictionary:output:)``.
    public func decode(_ input: Data, dictionary: ZstdDictionary? = nil) throws -> Data {
        try input.withUnsafeBytes { bytes in
            try ZstdFrames(input: bytes, dictionary: dictionary, limits: limits).decodeAllToData()
        }
    }
}

/// A dictionary for ``ZstdDecoder``: either one made by `zstd --train` (it starts with
/// zstd's dictionary magic number and carries entropy tables and an ID), or raw content
/// that frames refer back to as if it preceded them, which is what `zstd --patch-from`
/// and libzstd's `ZSTD_CCtx_refPrefix` use.
public struct ZstdDictionary: Sendable {
    /// The bytes as given.
    public let data: Data
    /// Whether ``data`` is read as a formatted dictionary (`true`) or raw content.
    public let isFormatted: Bool

    /// A dictionary read as zstd reads `-D FILE`: formatted when it starts with zstd's
    /// dictionary magic number (`0xEC30A437`), raw content otherwise.
    public init(_ data: Data) {
        self.data = data
        self.isFormatted = data.count >= 8 && data.prefix(4).elementsEqual([0x37, 0xA4, 0x30, 0xEC])
    }

    /// Raw content whatever its first bytes: the base of a `--patch-from` patch.
    public static func prefix(_ data: Data) -> ZstdDictionary {
        ZstdDictionary(data: data, isFormatted: false)
    }

    private init(data: Data, isFormatted: Bool) {
        self.data = data
        self.isFormatted = isFormatted
    }
}
