import Foundation
import HotCore

#if Zstd && canImport(CHotZstd)
import CHotZstd
#endif

/// Binary patches in zstd's patch-from format (`zstd --patch-from=BASE`): the target
/// compressed with the base as its dictionary prefix, in one frame that records the
/// target's size.
///
/// Applying runs ``ZstdDecoder``, HotArchive's own decoder, on every platform. Making a patch
/// needs libzstd's encoder: it is there where the `Zstd` trait is on (Linux and the other
/// platforms that install libzstd, by default), which is where publishers run `hot pack`.
/// Elsewhere, ``canMakePatches`` is false and ``makePatch(base:target:)`` throws
/// `HotUpdateError.Code.unsupported`; applying works everywhere.
///
/// Memory: both sides hold the base, the target and the patch in memory. Applying needs
/// base + target + patch bytes (the result is decoded in place, the base is read where it
/// lies), and files larger than ``maxFileBytes`` (64 MiB by default) are refused before
/// anything is read, so a client's peak is bounded by about 3 × ``maxFileBytes``. Making a
/// patch at level 19 with long-distance matching needs several times the window (the
/// publisher's side).
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

    /// Whether this build can make patches: true where libzstd's encoder is linked (the
    /// `Zstd` trait, on by default off Apple platforms). Applying needs no library.
    public static var canMakePatches: Bool {
        #if Zstd && canImport(CHotZstd)
        true
        #else
        false
        #endif
    }

    static let noEncoder = HotUpdateError(
        .unsupported,
        "this build cannot make binary patches: making them needs libzstd's encoder (the Zstd trait, on Linux); applying them needs nothing"
    )

    /// The window log that covers `size` bytes of base plus target, within zstd's default limit.
    static func windowLog(for size: Int) -> Int32 {
        var log: Int32 = 10
        while log < 27, (1 << log) < size { log += 1 }
        return log
    }

    /// A patch turning `base` into `target`.
    ///
    /// - Throws: `HotUpdateError.Code.limitExceeded` for a file over ``maxFileBytes``,
    ///   `HotUpdateError.Code.internalInconsistency` when zstd fails,
    ///   `HotUpdateError.Code.unsupported` where ``canMakePatches`` is false.
    public func makePatch(base: Data, target: Data) throws -> Data {
        guard Int64(base.count) <= maxFileBytes, Int64(target.count) <= maxFileBytes else {
            throw HotUpdateError(.limitExceeded, "a file over \(maxFileBytes) bytes is not patched")
        }
        #if Zstd && canImport(CHotZstd)
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
        #else
        throw Self.noEncoder
        #endif
    }

    /// `data` compressed alone at ``level``: what a patch is measured against.
    ///
    /// - Throws: `HotUpdateError.Code.internalInconsistency` when zstd fails,
    ///   `HotUpdateError.Code.unsupported` where ``canMakePatches`` is false.
    public func compressedSize(of data: Data) throws -> Int {
        #if Zstd && canImport(CHotZstd)
        var output = [UInt8](repeating: 0, count: ZSTD_compressBound(data.count))
        return try data.withUnsafeBytes { input in
            try output.withUnsafeMutableBytes { out in
                try check(ZSTD_compress(out.baseAddress, out.count, input.baseAddress, input.count, level), "compress")
            }
        }
        #else
        throw Self.noEncoder
        #endif
    }

    /// `base` patched by `patch`, which must produce exactly `expectedSize` bytes.
    ///
    /// - Throws: `HotUpdateError.Code.corruptArchive` for a patch that does not apply or
    ///   produces another size, `HotUpdateError.Code.limitExceeded` over ``maxFileBytes``.
    public func applied(patch: Data, base: Data, expectedSize: Int64) throws -> Data {
        guard Int64(base.count) <= maxFileBytes, expectedSize <= maxFileBytes, expectedSize >= 0 else {
            throw HotUpdateError(.limitExceeded, "a file over \(maxFileBytes) bytes is not patched")
        }
        return try patch.withUnsafeBytes { patchBytes in
            try base.withUnsafeBytes { baseBytes in
                try Self.decode(patch: patchBytes, base: baseBytes, expectedSize: expectedSize)
            }
        }
    }

    /// The patch decoded against `base` into exactly `expectedSize` bytes.
    static func decode(
        patch: UnsafeRawBufferPointer,
        base: UnsafeRawBufferPointer,
        expectedSize: Int64
    ) throws -> Data {
        // One frame that declares the size the signed file list gives: anything else is
        // refused before memory is taken for the result.
        let header: ZstdFrameHeader
        do {
            header = try ZstdFrameHeader(patch)
        } catch let error as HotUpdateError {
            throw HotUpdateError(.corruptArchive, "the patch is not a zstd frame", cause: error)
        }
        guard header.contentSize == UInt64(expectedSize) else {
            throw HotUpdateError(.corruptArchive, "the patch does not declare the listed size \(expectedSize)")
        }
        let limits = ZstdDecoder.Limits(maxWindowBytes: 1 << 27, maxOutputBytes: expectedSize)
        let frames = ZstdFrames(input: patch, prefix: base, limits: limits)
        let result: Data
        do {
            result = try frames.decodeAllToData(singleFrame: true)
        } catch let error as HotUpdateError where error.code != .corruptArchive {
            throw HotUpdateError(.corruptArchive, "the patch does not apply", cause: error)
        }
        guard result.count == Int(expectedSize) else {
            throw HotUpdateError(
                .corruptArchive,
                "the patch produces \(result.count) bytes, the list says \(expectedSize)"
            )
        }
        return result
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
            // Mapped, not read: the pages of the base that matches never reach stay on disk.
            result = try applied(
                patch: Data(contentsOf: patch),
                base: Data(contentsOf: base, options: .alwaysMapped),
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

    #if Zstd && canImport(CHotZstd)
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
    #endif
}
