import CHotZstd
import Foundation
import HotCore

/// Binary patches in zstd's patch-from format (`zstd --patch-from=BASE`): the target
/// compressed with the base as its dictionary prefix, in one frame that records the
/// target's size.
///
/// Memory: both sides hold the base, the target and the patch in memory. Applying needs at
/// most base + 2 × target + patch bytes (the output buffer and zstd's window over it), and
/// files larger than ``maxFileBytes`` (64 MiB by default) are refused before anything is
/// read, so a client's peak is bounded by about 4 × ``maxFileBytes``. Making a patch at level
/// 19 with long-distance matching needs several times the window (the publisher's side).
///
/// ```swift
/// let patcher = ZstdPatcher()
/// let patch = try patcher.makePatch(base: oldBundle, target: newBundle)
/// try patcher.apply(patch: patchFile, base: oldFile, to: output, expectedSize: Int64(newBundle.count))
/// ```
public struct ZstdPatcher: BinaryPatcher {
    /// `zstd`.
    public let method = "zstd"
    /// The largest base or target file patched or applied.
    public var maxFileBytes: Int64
    /// The compression level patches are made at (1–22).
    public var level: Int32

    /// Creates a patcher.
    public init(maxFileBytes: Int64 = 64 << 20, level: Int32 = 19) {
        self.maxFileBytes = maxFileBytes
        self.level = level
    }

    /// The window log that covers `size` bytes of base plus target, within zstd's default limit.
    static func windowLog(for size: Int) -> Int32 {
        var log: Int32 = 10
        while log < 27, (1 << log) < size { log += 1 }
        return log
    }

    /// A patch turning `base` into `target`.
    ///
    /// - Throws: `HotUpdateError.Code.limitExceeded` for a file over ``maxFileBytes``,
    ///   `HotUpdateError.Code.internalInconsistency` when zstd fails.
    public func makePatch(base: Data, target: Data) throws -> Data {
        guard Int64(base.count) <= maxFileBytes, Int64(target.count) <= maxFileBytes else {
            throw HotUpdateError(.limitExceeded, "a file over \(maxFileBytes) bytes is not patched")
        }
        guard let context = ZSTD_createCCtx() else {
            throw HotUpdateError(.internalInconsistency, "zstd cannot allocate a compression context")
        }
        defer { ZSTD_freeCCtx(context) }
        try check(ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, level), "set the level")
        try check(
            ZSTD_CCtx_setParameter(context, ZSTD_c_windowLog, Self.windowLog(for: base.count + target.count)),
            "set the window"
        )
        try check(ZSTD_CCtx_setParameter(context, ZSTD_c_enableLongDistanceMatching, 1), "enable long matching")
        try check(ZSTD_CCtx_setParameter(context, ZSTD_c_contentSizeFlag, 1), "record the size")
        // A checksum of the result: a patch applied to another base fails in zstd already.
        try check(ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1), "add a checksum")
        let bound = ZSTD_compressBound(target.count)
        var output = [UInt8](repeating: 0, count: bound)
        let written = try base.withUnsafeBytes { baseBytes in
            try target.withUnsafeBytes { targetBytes in
                try check(ZSTD_CCtx_refPrefix(context, baseBytes.baseAddress, baseBytes.count), "use the base")
                return try output.withUnsafeMutableBytes { out in
                    try check(
                        ZSTD_compress2(context, out.baseAddress, out.count, targetBytes.baseAddress, targetBytes.count),
                        "compress"
                    )
                }
            }
        }
        return Data(output[0..<written])
    }

    /// `data` compressed alone at ``level``: what a patch is measured against.
    ///
    /// - Throws: `HotUpdateError.Code.internalInconsistency` when zstd fails.
    public func compressedSize(of data: Data) throws -> Int {
        var output = [UInt8](repeating: 0, count: ZSTD_compressBound(data.count))
        return try data.withUnsafeBytes { input in
            try output.withUnsafeMutableBytes { out in
                try check(ZSTD_compress(out.baseAddress, out.count, input.baseAddress, input.count, level), "compress")
            }
        }
    }

    /// `base` patched by `patch`, which must produce exactly `expectedSize` bytes.
    ///
    /// - Throws: `HotUpdateError.Code.corruptArchive` for a patch that does not apply or
    ///   produces another size, `HotUpdateError.Code.limitExceeded` over ``maxFileBytes``.
    public func applied(patch: Data, base: Data, expectedSize: Int64) throws -> Data {
        guard Int64(base.count) <= maxFileBytes, expectedSize <= maxFileBytes, expectedSize >= 0 else {
            throw HotUpdateError(.limitExceeded, "a file over \(maxFileBytes) bytes is not patched")
        }
        let declared = patch.withUnsafeBytes { ZSTD_getFrameContentSize($0.baseAddress, $0.count) }
        guard hot_zstd_content_size_known(declared) != 0, declared == UInt64(expectedSize) else {
            throw HotUpdateError(.corruptArchive, "the patch does not declare the listed size \(expectedSize)")
        }
        guard let context = ZSTD_createDCtx() else {
            throw HotUpdateError(.internalInconsistency, "zstd cannot allocate a decompression context")
        }
        defer { ZSTD_freeDCtx(context) }
        // Room for one byte more than expected, so a patch that produces more is caught.
        var output = [UInt8](repeating: 0, count: Int(expectedSize) + 1)
        let produced: Int = try base.withUnsafeBytes { baseBytes in
            try patch.withUnsafeBytes { patchBytes in
                try output.withUnsafeMutableBytes { out in
                    try corrupt(ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, 27))
                    try corrupt(ZSTD_DCtx_refPrefix(context, baseBytes.baseAddress, baseBytes.count))
                    var input = ZSTD_inBuffer(src: patchBytes.baseAddress, size: patchBytes.count, pos: 0)
                    var buffer = ZSTD_outBuffer(dst: out.baseAddress, size: out.count, pos: 0)
                    while try corrupt(ZSTD_decompressStream(context, &buffer, &input)) != 0 {
                        guard buffer.pos < buffer.size else {
                            throw HotUpdateError(.corruptArchive, "the patch produces more than \(expectedSize) bytes")
                        }
                        guard input.pos < input.size else {
                            throw HotUpdateError(.corruptArchive, "the patch ends before its frame does")
                        }
                    }
                    guard input.pos == input.size else {
                        throw HotUpdateError(.corruptArchive, "the patch has bytes after its frame")
                    }
                    return buffer.pos
                }
            }
        }
        guard produced == Int(expectedSize) else {
            throw HotUpdateError(.corruptArchive, "the patch produces \(produced) bytes, the list says \(expectedSize)")
        }
        return Data(output[0..<produced])
    }

    public func apply(patch: URL, base: URL, to output: URL, expectedSize: Int64) throws {
        for url in [patch, base] {
            let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.int64Value
            guard let size, size <= maxFileBytes else {
                throw HotUpdateError(
                    .limitExceeded,
                    "a file over \(maxFileBytes) bytes is not patched",
                    subject: url.path
                )
            }
        }
        let result: Data
        do {
            result = try applied(
                patch: Data(contentsOf: patch),
                base: Data(contentsOf: base),
                expectedSize: expectedSize
            )
        } catch let error as HotUpdateError {
            throw error
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot read the patch or its base")
        }
        let writer = try FileWriter(creating: output)
        try writer.write(result)
        try writer.close(sync: false)
    }

    @discardableResult
    private func check(_ code: Int, _ what: String) throws -> Int {
        if ZSTD_isError(code) != 0 {
            throw HotUpdateError(
                .internalInconsistency,
                "zstd cannot \(what): \(String(cString: ZSTD_getErrorName(code)))"
            )
        }
        return code
    }

    @discardableResult
    private func corrupt(_ code: Int) throws -> Int {
        if ZSTD_isError(code) != 0 {
            throw HotUpdateError(
                .corruptArchive,
                "the patch does not apply: \(String(cString: ZSTD_getErrorName(code)))"
            )
        }
        return code
    }
}
