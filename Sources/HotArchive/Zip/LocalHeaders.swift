import HotCore

/// Reads every local header, checks it against the central directory and
/// checks that no two entries share bytes.
///
/// A data descriptor's CRC-32 (read with or without its optional signature) must
/// equal the central directory's: a disagreement is `HotUpdateError.Code.checksumMismatch`.
/// Its sizes are not compared (writers disagree on their width).
enum LocalHeaders {
    /// Fills in each entry's data offset.
    ///
    /// - Throws: `HotUpdateError.Code.corruptArchive` on any disagreement or overlap.
    static func check(
        _ entries: inout [ZipEntryRecord],
        in file: ReadOnlyFile,
        centralDirectoryOffset: UInt64
    ) throws {
        let archive = file.displayName
        var spans: [(start: UInt64, end: UInt64, index: Int)] = []
        spans.reserveCapacity(entries.count)
        for index in entries.indices {
            var entry = entries[index]
            let available = centralDirectoryOffset - entry.localHeaderOffset
            guard available >= UInt64(ZipFormat.localHeaderLength) else {
                throw ArchiveError.corrupt(
                    archive,
                    "its local header runs into the central directory",
                    entry: entry.displayName
                )
            }
            let guess = UInt64(ZipFormat.localHeaderLength + entry.rawName.count + 64)
            var header = try file.readExactly(
                Int(min(guess, available)),
                at: Int64(entry.localHeaderOffset),
                what: "the local header of '\(entry.displayName)'"
            )
            guard header.uint32LE(at: 0) == ZipFormat.localHeaderSignature else {
                throw ArchiveError.corrupt(
                    archive,
                    "there is no local header at offset \(entry.localHeaderOffset)",
                    entry: entry.displayName
                )
            }
            let nameLength = Int(header.uint16LE(at: 26))
            let extraLength = Int(header.uint16LE(at: 28))
            let headerLength = ZipFormat.localHeaderLength + nameLength + extraLength
            guard UInt64(headerLength) <= available else {
                throw ArchiveError.corrupt(
                    archive,
                    "its local header runs into the central directory",
                    entry: entry.displayName
                )
            }
            if headerLength > header.count {
                header = try file.readExactly(
                    headerLength,
                    at: Int64(entry.localHeaderOffset),
                    what: "the local header of '\(entry.displayName)'"
                )
            }
            let localFlags = header.uint16LE(at: 6)
            let localMethod = header.uint16LE(at: 8)
            let deferred = localFlags & ZipFormat.flagDataDescriptor != 0
            let localName = Array(header[ZipFormat.localHeaderLength..<(ZipFormat.localHeaderLength + nameLength)])
            // The local header's own values, its extra fields applied.
            var local = entry
            local.rawName = localName
            local.flags = localFlags
            local.usesZip64 = false
            local.unicodePath = nil
            local.aes = nil
            local.crc32 = header.uint32LE(at: 14)
            local.compressedSize = UInt64(header.uint32LE(at: 18))
            local.uncompressedSize = UInt64(header.uint32LE(at: 22))
            try header.withUnsafeBytes { bytes in
                let start = ZipFormat.localHeaderLength + nameLength
                try ExtraFields.apply(
                    UnsafeRawBufferPointer(rebasing: bytes[start..<(start + extraLength)]),
                    to: &local,
                    central: false,
                    archive: archive
                )
            }
            // The names agree byte for byte, or once decoded (a legacy name in one header and
            // the same name in a Unicode Path field of the other).
            let namesAgree =
                try localName == entry.rawName
                || sameDecodedName(local, entry, header, nameLength, extraLength, archive)
            guard namesAgree else {
                throw ArchiveError.corrupt(
                    archive,
                    "the local header names it '\(String(decoding: localName, as: UTF8.self))', the central directory disagrees",
                    entry: entry.displayName
                )
            }
            if localName != entry.rawName { entry.localName = localName }
            guard localMethod == entry.method else {
                throw ArchiveError.corrupt(
                    archive,
                    "the local header says method \(localMethod), the central directory \(entry.method)",
                    entry: entry.displayName
                )
            }
            // A WinZip AES field in both headers says the same in both.
            if let localAES = local.aes, let centralAES = entry.aes, localAES != centralAES {
                throw ArchiveError.corrupt(
                    archive,
                    "the local header's AES extra field disagrees with the central directory's",
                    entry: entry.displayName
                )
            }
            guard localFlags & ZipFormat.flagEncrypted == entry.flags & ZipFormat.flagEncrypted else {
                throw ArchiveError.corrupt(
                    archive,
                    "the local header and the central directory disagree on encryption",
                    entry: entry.displayName
                )
            }
            if !deferred {
                guard local.crc32 == entry.crc32 else {
                    throw ArchiveError.corrupt(
                        archive,
                        "the local header's CRC-32 disagrees with the central directory",
                        entry: entry.displayName
                    )
                }
                guard local.compressedSize == entry.compressedSize,
                    local.uncompressedSize == entry.uncompressedSize
                else {
                    throw ArchiveError.corrupt(
                        archive,
                        "the local header declares \(local.compressedSize)/\(local.uncompressedSize) bytes, the central directory \(entry.compressedSize)/\(entry.uncompressedSize)",
                        entry: entry.displayName
                    )
                }
                entry.flags &= ~ZipFormat.flagDataDescriptor
            } else {
                entry.flags |= ZipFormat.flagDataDescriptor
            }
            // The local header's zip64 field also tells a descriptor's width.
            entry.usesZip64 = entry.usesZip64 || local.usesZip64
            entry.dataOffset = entry.localHeaderOffset + UInt64(headerLength)
            let (dataEnd, overflow) = entry.dataOffset.addingReportingOverflow(entry.compressedSize)
            guard !overflow, dataEnd <= centralDirectoryOffset else {
                throw ArchiveError.corrupt(
                    archive,
                    "its \(entry.compressedSize) bytes of data run into the central directory",
                    entry: entry.displayName
                )
            }
            var descriptor: UInt64 = 0
            if entry.hasDataDescriptor {
                descriptor = 12
                if centralDirectoryOffset - dataEnd < descriptor {
                    // Some WinZip AES writers set bit 3 and write no descriptor; AES does not use the CRC.
                    guard entry.method == ZipFormat.methodAES else {
                        throw ArchiveError.corrupt(
                            archive,
                            "its data descriptor runs into the central directory",
                            entry: entry.displayName
                        )
                    }
                    descriptor = 0
                } else if entry.method != ZipFormat.methodAES {
                    try checkDescriptor(entry, at: dataEnd, in: file)
                }
            }
            spans.append((entry.localHeaderOffset, dataEnd + descriptor, index))
            entries[index] = entry
        }
        spans.sort { $0.start < $1.start }
        for (previous, next) in zip(spans, spans.dropFirst()) where previous.end > next.start {
            throw ArchiveError.corrupt(
                archive,
                "its data overlaps entry '\(entries[next.index].displayName)' (overlapping entries are a zip bomb technique)",
                entry: entries[previous.index].displayName
            )
        }
    }

    /// Whether differing local and central names decode to the same name. A local
    /// Unicode Path field counts when its CRC matches either header's raw name.
    private static func sameDecodedName(
        _ local: ZipEntryRecord,
        _ central: ZipEntryRecord,
        _ header: [UInt8],
        _ nameLength: Int,
        _ extraLength: Int,
        _ archive: String
    ) throws -> Bool {
        var local = local
        if local.unicodePath == nil {
            var probe = local
            probe.rawName = central.rawName
            try header.withUnsafeBytes { bytes in
                let start = ZipFormat.localHeaderLength + nameLength
                try ExtraFields.apply(
                    UnsafeRawBufferPointer(rebasing: bytes[start..<(start + extraLength)]),
                    to: &probe,
                    central: false,
                    archive: archive
                )
            }
            local.unicodePath = probe.unicodePath
        }
        guard let localName = try? ZipArchivePlan.decodeName(local, archive: archive),
            let centralName = try? ZipArchivePlan.decodeName(central, archive: archive)
        else { return false }
        return localName == centralName
    }

    private static func checkDescriptor(_ entry: ZipEntryRecord, at offset: UInt64, in file: ReadOnlyFile) throws {
        let bytes = try file.readExactly(
            8,
            at: Int64(offset),
            what: "the data descriptor of '\(entry.displayName)'"
        )
        let first = bytes.uint32LE(at: 0)
        let crc = first == ZipFormat.dataDescriptorSignature ? bytes.uint32LE(at: 4) : first
        guard crc == entry.crc32 else {
            throw ArchiveError.make(
                .checksumMismatch,
                file.displayName,
                "its data descriptor says CRC-32 \(hex(crc)), the central directory \(hex(entry.crc32))",
                entry: entry.displayName
            )
        }
    }
}
