import HotCore

/// Reads every local header, checks it against the central directory and
/// checks that no two entries share bytes.
///
/// A data descriptor's CRC-32 (read with or without its optional signature) must
/// equal the central directory's: a disagreement is ``HotUpdateError/Code/checksumMismatch``.
/// Its sizes are not compared (writers disagree on their width).
enum LocalHeaders {
    /// Fills in each entry's data offset.
    ///
    /// - Throws: ``HotUpdateError/Code/corruptArchive`` on any disagreement or overlap.
    static func check(
        _ entries: inout [ZipEntryRecord], in file: ReadOnlyFile, centralDirectoryOffset: UInt64
    ) throws {
        let archive = file.displayName
        var spans: [(start: UInt64, end: UInt64, index: Int)] = []
        spans.reserveCapacity(entries.count)
        for index in entries.indices {
            var entry = entries[index]
            let available = centralDirectoryOffset - entry.localHeaderOffset
            guard available >= UInt64(ZipFormat.localHeaderLength) else {
                throw ArchiveError.corrupt(
                    archive, "its local header runs into the central directory", entry: entry.displayName)
            }
            let guess = UInt64(ZipFormat.localHeaderLength + entry.rawName.count + 64)
            var header = try file.readExactly(
                Int(min(guess, available)), at: Int64(entry.localHeaderOffset),
                what: "the local header of '\(entry.displayName)'")
            guard header.uint32LE(at: 0) == ZipFormat.localHeaderSignature else {
                throw ArchiveError.corrupt(
                    archive, "there is no local header at offset \(entry.localHeaderOffset)",
                    entry: entry.displayName)
            }
            let nameLength = Int(header.uint16LE(at: 26))
            let extraLength = Int(header.uint16LE(at: 28))
            let headerLength = ZipFormat.localHeaderLength + nameLength + extraLength
            guard UInt64(headerLength) <= available else {
                throw ArchiveError.corrupt(
                    archive, "its local header runs into the central directory", entry: entry.displayName)
            }
            if headerLength > header.count {
                header = try file.readExactly(
                    headerLength, at: Int64(entry.localHeaderOffset),
                    what: "the local header of '\(entry.displayName)'")
            }
            let localName = header[ZipFormat.localHeaderLength..<(ZipFormat.localHeaderLength + nameLength)]
            guard localName.elementsEqual(entry.rawName) else {
                throw ArchiveError.corrupt(
                    archive,
                    "the local header names it '\(String(decoding: localName, as: UTF8.self))', the central directory disagrees",
                    entry: entry.displayName)
            }
            let localFlags = header.uint16LE(at: 6)
            let localMethod = header.uint16LE(at: 8)
            guard localMethod == entry.method else {
                throw ArchiveError.corrupt(
                    archive, "the local header says method \(localMethod), the central directory \(entry.method)",
                    entry: entry.displayName)
            }
            guard localFlags & ZipFormat.flagEncrypted == entry.flags & ZipFormat.flagEncrypted else {
                throw ArchiveError.corrupt(
                    archive, "the local header and the central directory disagree on encryption",
                    entry: entry.displayName)
            }
            if localFlags & ZipFormat.flagDataDescriptor == 0 {
                var local = entry
                local.crc32 = header.uint32LE(at: 14)
                local.compressedSize = UInt64(header.uint32LE(at: 18))
                local.uncompressedSize = UInt64(header.uint32LE(at: 22))
                try header.withUnsafeBytes { bytes in
                    let start = ZipFormat.localHeaderLength + nameLength
                    try ExtraFields.apply(
                        UnsafeRawBufferPointer(rebasing: bytes[start..<(start + extraLength)]), to: &local,
                        central: false, archive: archive)
                }
                guard local.crc32 == entry.crc32 else {
                    throw ArchiveError.corrupt(
                        archive, "the local header's CRC-32 disagrees with the central directory",
                        entry: entry.displayName)
                }
                guard local.compressedSize == entry.compressedSize,
                    local.uncompressedSize == entry.uncompressedSize
                else {
                    throw ArchiveError.corrupt(
                        archive,
                        "the local header declares \(local.compressedSize)/\(local.uncompressedSize) bytes, the central directory \(entry.compressedSize)/\(entry.uncompressedSize)",
                        entry: entry.displayName)
                }
                entry.usesZip64 = entry.usesZip64 || local.usesZip64
                entry.flags &= ~ZipFormat.flagDataDescriptor
            } else {
                // The local header's zip64 field tells the descriptor's width.
                var local = entry
                local.usesZip64 = false
                local.compressedSize = UInt64(header.uint32LE(at: 18))
                local.uncompressedSize = UInt64(header.uint32LE(at: 22))
                try header.withUnsafeBytes { bytes in
                    let start = ZipFormat.localHeaderLength + nameLength
                    try ExtraFields.apply(
                        UnsafeRawBufferPointer(rebasing: bytes[start..<(start + extraLength)]), to: &local,
                        central: false, archive: archive)
                }
                entry.usesZip64 = entry.usesZip64 || local.usesZip64
                entry.flags |= ZipFormat.flagDataDescriptor
            }
            entry.dataOffset = entry.localHeaderOffset + UInt64(headerLength)
            let descriptor: UInt64 = entry.hasDataDescriptor ? 12 : 0
            let (dataEnd, overflow) = entry.dataOffset.addingReportingOverflow(entry.compressedSize)
            guard !overflow, dataEnd <= centralDirectoryOffset, descriptor <= centralDirectoryOffset - dataEnd else {
                throw ArchiveError.corrupt(
                    archive, "its \(entry.compressedSize) bytes of data run into the central directory",
                    entry: entry.displayName)
            }
            if entry.hasDataDescriptor { try checkDescriptor(entry, at: dataEnd, in: file) }
            spans.append((entry.localHeaderOffset, dataEnd + descriptor, index))
            entries[index] = entry
        }
        spans.sort { $0.start < $1.start }
        for (previous, next) in zip(spans, spans.dropFirst()) where previous.end > next.start {
            throw ArchiveError.corrupt(
                archive,
                "its data overlaps entry '\(entries[next.index].displayName)' (overlapping entries are a zip bomb technique)",
                entry: entries[previous.index].displayName)
        }
    }

    private static func checkDescriptor(_ entry: ZipEntryRecord, at offset: UInt64, in file: ReadOnlyFile) throws {
        let bytes = try file.readExactly(
            8, at: Int64(offset), what: "the data descriptor of '\(entry.displayName)'")
        let first = bytes.uint32LE(at: 0)
        let crc = first == ZipFormat.dataDescriptorSignature ? bytes.uint32LE(at: 4) : first
        guard crc == entry.crc32 else {
            throw ArchiveError.make(
                .checksumMismatch, file.displayName,
                "its data descriptor says CRC-32 \(hex(crc)), the central directory \(hex(entry.crc32))",
                entry: entry.displayName)
        }
    }
}
