import CHotZlib

/// The extra fields HotArchive reads: zip64 sizes and offsets, the Info-ZIP
/// Unicode Path field, WinZip AES's field (judged by ``WinZipAES/parameters(of:name:archive:)``),
/// and the SHA-256
/// `ZipWriter` records.
enum ExtraFields {
    /// Applies the extra fields in `extra` to `record`.
    ///
    /// - Parameter central: Whether `extra` comes from the central directory (which
    ///   may also carry the local header offset). A Unicode Path field is kept only
    ///   when its CRC matches `record.rawName`.
    /// - Throws: `HotUpdateError.Code.corruptArchive` when a zip64 field is too short.
    static func apply(
        _ extra: UnsafeRawBufferPointer,
        to record: inout ZipEntryRecord,
        central: Bool,
        archive: String
    ) throws {
        var position = 0
        while extra.count - position >= 4 {
            let id = extra.uint16LE(at: position)
            let size = Int(extra.uint16LE(at: position + 2))
            let start = position + 4
            // A field running past the extra data ends the list; writers pad with junk.
            guard extra.count - start >= size else { break }
            let field = UnsafeRawBufferPointer(rebasing: extra[start..<(start + size)])
            switch id {
            case ZipFormat.extraZip64:
                try applyZip64(field, to: &record, central: central, archive: archive)
            case ZipFormat.extraUnicodePath:
                applyUnicodePath(field, to: &record)
            case ZipFormat.extraWinZipAES:
                record.aes = WinZipAES.ExtraField(field)
            case ZipFormat.extraSHA256 where central && field.count == ZipFormat.sha256Length:
                record.sha256 = Array(field)
            default:
                break
            }
            position = start + size
        }
    }

    private static func applyZip64(
        _ field: UnsafeRawBufferPointer,
        to record: inout ZipEntryRecord,
        central: Bool,
        archive: String
    ) throws {
        var position = 0
        func next(_ what: String) throws -> UInt64 {
            guard field.count - position >= 8 else {
                throw ArchiveError.corrupt(
                    archive,
                    "its zip64 extra field lacks the \(what)",
                    entry: record.displayName
                )
            }
            defer { position += 8 }
            return field.uint64LE(at: position)
        }
        let needsUncompressed = record.uncompressedSize == 0xFFFF_FFFF
        let needsCompressed = record.compressedSize == 0xFFFF_FFFF
        let needsOffset = central && record.localHeaderOffset == 0xFFFF_FFFF
        if needsUncompressed { record.uncompressedSize = try next("uncompressed size") }
        if needsCompressed { record.compressedSize = try next("compressed size") }
        if needsOffset { record.localHeaderOffset = try next("local header offset") }
        record.usesZip64 = true
    }

    private static func applyUnicodePath(_ field: UnsafeRawBufferPointer, to record: inout ZipEntryRecord) {
        guard field.count >= 5, field[0] == 1 else { return }
        let expected = field.uint32LE(at: 1)
        let actual = record.rawName.withUnsafeBufferPointer { name in
            UInt32(truncatingIfNeeded: crc32(0, name.baseAddress, uInt(name.count)))
        }
        guard expected == actual else { return }
        record.unicodePath = Array(field[5...])
    }
}
