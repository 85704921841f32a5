import HotCore

/// The structure of a ZIP file: its end records, central directory and local
/// headers, read and cross-checked without touching any entry's data.
///
/// Reading it refuses, with `HotUpdateError.Code.corruptArchive`, every
/// inconsistency a reader could be fooled by: a local header that disagrees
/// with the central directory (name, method, encryption, and CRC and sizes
/// unless a data descriptor defers them; names must be the same bytes or decode
/// to the same name through a Unicode Path field), data that runs past the central
/// directory or the end of the file, and entries whose bytes overlap (the
/// overlapping-files zip bomb).
///
/// Prefix policy (self-extractors, archives appended to another file): like
/// Info-ZIP, the distance between where the end record says the central
/// directory ends and where the end record really is, is taken as the length of
/// a prefix and added to every offset. Trailing bytes after the end record
/// (junk) are accepted when the end record's comment fits in the file; the last
/// end record signature in the file is the end record, and one whose comment runs
/// past the end of the file is refused rather than skipped.
struct ZipDirectory: Sendable {
    /// The entries in central directory order.
    var entries: [ZipEntryRecord]
    /// Absolute offset of the central directory.
    var centralDirectoryOffset: UInt64
    /// Bytes in front of the archive proper (self-extractor stub), 0 for most files.
    var prefixLength: UInt64

    /// Reads and checks the structure of `file`.
    ///
    /// - Parameter maxEntries: Refuse, before reading the directory, archives that declare more entries.
    /// - Throws: ``HotUpdateError`` with `HotUpdateError.Code.notAnArchive`,
    ///   `HotUpdateError.Code.corruptArchive`, `HotUpdateError.Code.limitExceeded`
    ///   or `HotUpdateError.Code.unsupported` (spanned archives).
    static func read(_ file: ReadOnlyFile, maxEntries: Int) throws -> ZipDirectory {
        let name = file.displayName
        guard file.size > 0 else { throw ArchiveError.notAnArchive(name, "the file is empty") }
        let end = try EndRecord.locate(in: file)
        // A count the directory cannot hold is a lie, not a large archive (Go's CVE-2021-33196 test).
        let capacity = end.directorySize / UInt64(ZipFormat.centralHeaderLength)
        if end.entryCount > capacity {
            throw ArchiveError.corrupt(
                name,
                "it declares \(end.entryCount) entries, but its central directory of \(end.directorySize) bytes holds at most \(capacity)"
            )
        }
        if end.entryCount > UInt64(max(0, maxEntries)) {
            throw ArchiveError.limit(
                name,
                "it declares \(end.entryCount) entries, more than the limit of \(maxEntries)"
            )
        }
        // Where the central directory really is: Info-ZIP's prefix adjustment.
        let (cdEnd, overflow) = end.directoryOffset.addingReportingOverflow(end.directorySize)
        guard !overflow, cdEnd <= end.directoryEndPosition else {
            throw ArchiveError.corrupt(
                name,
                "the central directory (offset \(end.directoryOffset), \(end.directorySize) bytes) runs past its end record"
            )
        }
        var prefix = end.directoryEndPosition - cdEnd
        if prefix > 0, end.entryCount > 0 {
            let shifted = try signature(in: file, at: end.directoryOffset + prefix)
            if shifted != ZipFormat.centralHeaderSignature {
                let plain = try signature(in: file, at: end.directoryOffset)
                guard plain == ZipFormat.centralHeaderSignature else {
                    throw ArchiveError.corrupt(name, "no central directory at offset \(end.directoryOffset)")
                }
                prefix = 0
            }
        }
        let cdOffset = end.directoryOffset + prefix
        guard end.directorySize <= UInt64(Int.max) else {
            throw ArchiveError.corrupt(name, "the central directory size \(end.directorySize) is impossible")
        }
        let cdBytes = try file.readExactly(
            Int(end.directorySize),
            at: Int64(cdOffset),
            what: "the central directory"
        )
        var entries = try parseCentralDirectory(
            cdBytes,
            declaredCount: end.entryCount,
            prefix: prefix,
            cdOffset: cdOffset,
            archive: name
        )
        if entries.count > maxEntries {
            throw ArchiveError.limit(name, "it has \(entries.count) entries, more than the limit of \(maxEntries)")
        }
        try LocalHeaders.check(&entries, in: file, centralDirectoryOffset: cdOffset)
        return ZipDirectory(entries: entries, centralDirectoryOffset: cdOffset, prefixLength: prefix)
    }

    private static func signature(in file: ReadOnlyFile, at offset: UInt64) throws -> UInt32? {
        guard offset <= UInt64(Int64.max), Int64(offset) + 4 <= file.size else { return nil }
        let bytes = try file.readExactly(4, at: Int64(offset), what: "a signature")
        return bytes.uint32LE(at: 0)
    }

    /// Parses central directory headers until the directory's bytes are used up.
    private static func parseCentralDirectory(
        _ bytes: [UInt8],
        declaredCount: UInt64,
        prefix: UInt64,
        cdOffset: UInt64,
        archive: String
    ) throws -> [ZipEntryRecord] {
        var entries: [ZipEntryRecord] = []
        entries.reserveCapacity(Int(min(declaredCount, UInt64(bytes.count / ZipFormat.centralHeaderLength))))
        try bytes.withUnsafeBytes { buffer in
            var position = 0
            while position < buffer.count {
                guard buffer.count - position >= ZipFormat.centralHeaderLength else {
                    throw ArchiveError.corrupt(archive, "central directory header \(entries.count + 1) is cut short")
                }
                guard buffer.uint32LE(at: position) == ZipFormat.centralHeaderSignature else {
                    throw ArchiveError.corrupt(
                        archive,
                        "central directory header \(entries.count + 1) has a bad signature"
                    )
                }
                let nameLength = Int(buffer.uint16LE(at: position + 28))
                let extraLength = Int(buffer.uint16LE(at: position + 30))
                let commentLength = Int(buffer.uint16LE(at: position + 32))
                let total = ZipFormat.centralHeaderLength + nameLength + extraLength + commentLength
                guard buffer.count - position >= total else {
                    throw ArchiveError.corrupt(
                        archive,
                        "central directory header \(entries.count + 1) runs past the directory"
                    )
                }
                let nameStart = position + ZipFormat.centralHeaderLength
                let rawName = Array(buffer[nameStart..<(nameStart + nameLength)])
                var record = ZipEntryRecord(
                    index: entries.count,
                    rawName: rawName,
                    versionMadeBy: buffer.uint16LE(at: position + 4),
                    flags: buffer.uint16LE(at: position + 8),
                    method: buffer.uint16LE(at: position + 10),
                    dosTime: buffer.uint16LE(at: position + 12),
                    dosDate: buffer.uint16LE(at: position + 14),
                    crc32: buffer.uint32LE(at: position + 16),
                    compressedSize: UInt64(buffer.uint32LE(at: position + 20)),
                    uncompressedSize: UInt64(buffer.uint32LE(at: position + 24)),
                    localHeaderOffset: UInt64(buffer.uint32LE(at: position + 42)),
                    externalAttributes: buffer.uint32LE(at: position + 38),
                    unicodePath: nil,
                    usesZip64: false
                )
                let extra = UnsafeRawBufferPointer(
                    rebasing: buffer[(nameStart + nameLength)..<(nameStart + nameLength + extraLength)]
                )
                try ExtraFields.apply(extra, to: &record, central: true, archive: archive)
                let (offset, overflow) = record.localHeaderOffset.addingReportingOverflow(prefix)
                guard !overflow, offset < cdOffset else {
                    throw ArchiveError.corrupt(
                        archive,
                        "its local header offset \(record.localHeaderOffset) is past the central directory",
                        entry: record.displayName
                    )
                }
                record.localHeaderOffset = offset
                entries.append(record)
                position += total
            }
        }
        // Writers that exceed 65,535 entries without zip64 store the count modulo 2^16.
        let count = UInt64(entries.count)
        guard count == declaredCount || (declaredCount < 0xFFFF && count & 0xFFFF == declaredCount) else {
            throw ArchiveError.corrupt(
                archive,
                "the end record declares \(declaredCount) entries but the central directory holds \(count)"
            )
        }
        return entries
    }
}

/// The end of central directory record, with its zip64 counterpart applied.
struct EndRecord {
    var entryCount: UInt64
    var directorySize: UInt64
    var directoryOffset: UInt64
    /// Where the central directory should end: the zip64 end record if there is one, else the end record.
    var directoryEndPosition: UInt64

    /// Finds the end record by scanning back from the end of the file.
    ///
    /// The last end record signature is the end record: when its comment would run past
    /// the end of the file it is refused, not skipped for an earlier one (which could
    /// describe another archive hidden inside this one: Go's issue 66869).
    static func locate(in file: ReadOnlyFile) throws -> EndRecord {
        let name = file.displayName
        let tailLength = Int(min(file.size, Int64(ZipFormat.endOfCentralDirectoryLength + ZipFormat.maxCommentLength)))
        let tailStart = file.size - Int64(tailLength)
        let tail = try file.readExactly(tailLength, at: tailStart, what: "the end of the file")
        var found: Int?
        tail.withUnsafeBytes { buffer in
            var index = buffer.count - ZipFormat.endOfCentralDirectoryLength
            while index >= 0 {
                // Cheap first-byte test before the full signature.
                if buffer[index] == 0x50, buffer.uint32LE(at: index) == ZipFormat.endOfCentralDirectorySignature {
                    found = index
                    return
                }
                index -= 1
            }
        }
        guard let index = found else {
            let head = try file.readExactly(Int(min(4, file.size)), at: 0, what: "the file's first bytes")
            // A local header, or another ZIP record (a spanned archive starts with PK\7\8 or PK00).
            let zipRecords: Set<UInt32> = [
                ZipFormat.localHeaderSignature, ZipFormat.centralHeaderSignature, ZipFormat.dataDescriptorSignature,
                ZipFormat.zip64EndSignature, ZipFormat.zip64LocatorSignature, 0x3030_4b50,
            ]
            if head.count == 4, zipRecords.contains(head.uint32LE(at: 0)) {
                throw ArchiveError.corrupt(
                    name,
                    "it begins like a ZIP archive but has no end of central directory record (truncated?)"
                )
            }
            throw ArchiveError.notAnArchive(name, "no end of central directory record")
        }
        let commentLength = Int(tail.uint16LE(at: index + 20))
        guard index + ZipFormat.endOfCentralDirectoryLength + commentLength <= tail.count else {
            throw ArchiveError.corrupt(
                name,
                "its end of central directory record declares a comment of \(commentLength) bytes, which runs past the end of the file"
            )
        }
        let position = UInt64(tailStart) + UInt64(index)
        let disk = tail.uint16LE(at: index + 4)
        let directoryDisk = tail.uint16LE(at: index + 6)
        let entriesOnDisk = tail.uint16LE(at: index + 8)
        var record = EndRecord(
            entryCount: UInt64(tail.uint16LE(at: index + 10)),
            directorySize: UInt64(tail.uint32LE(at: index + 12)),
            directoryOffset: UInt64(tail.uint32LE(at: index + 16)),
            directoryEndPosition: position
        )

        let saturated =
            record.entryCount == 0xFFFF || record.directorySize == 0xFFFF_FFFF
            || record.directoryOffset == 0xFFFF_FFFF
        if let zip64 = try readZip64(in: file, endRecordPosition: position, required: saturated) {
            record = zip64
        } else {
            guard (disk == 0 || disk == 0xFFFF) && (directoryDisk == 0 || directoryDisk == 0xFFFF) else {
                throw HotUpdateError(
                    .unsupported,
                    "'\(name)' is split across several disks, which is not supported",
                    subject: name
                )
            }
            guard entriesOnDisk == tail.uint16LE(at: index + 10) else {
                throw ArchiveError.corrupt(name, "the end record's entry counts disagree")
            }
        }
        return record
    }

    /// Reads the zip64 end record through its locator, when there is one.
    private static func readZip64(
        in file: ReadOnlyFile,
        endRecordPosition: UInt64,
        required: Bool
    ) throws
        -> EndRecord?
    {
        let name = file.displayName
        guard endRecordPosition >= UInt64(ZipFormat.zip64LocatorLength) else {
            if required {
                throw ArchiveError.corrupt(name, "the end record needs zip64 values but has no zip64 locator")
            }
            return nil
        }
        let locatorPosition = endRecordPosition - UInt64(ZipFormat.zip64LocatorLength)
        let locator = try file.readExactly(
            ZipFormat.zip64LocatorLength,
            at: Int64(locatorPosition),
            what: "the zip64 locator"
        )
        guard locator.uint32LE(at: 0) == ZipFormat.zip64LocatorSignature else {
            if required {
                throw ArchiveError.corrupt(name, "the end record needs zip64 values but has no zip64 locator")
            }
            return nil
        }
        let totalDisks = locator.uint32LE(at: 16)
        guard locator.uint32LE(at: 4) == 0, totalDisks <= 1 else {
            // An end record that needs no zip64 values says this is disk 0: a locator that
            // disagrees is stray bytes, not a spanned archive (Go's issue 12449).
            if !required { return nil }
            throw HotUpdateError(
                .unsupported,
                "'\(name)' is split across several disks, which is not supported",
                subject: name
            )
        }
        // The locator's offset ignores any prefix; the record normally sits right before the locator.
        let declared = locator.uint64LE(at: 8)
        let adjacent =
            locatorPosition >= UInt64(ZipFormat.zip64EndLength)
            ? locatorPosition - UInt64(ZipFormat.zip64EndLength) : nil
        var candidates: [UInt64] = [declared]
        if let adjacent, adjacent != declared { candidates.append(adjacent) }
        for candidate in candidates {
            let (candidateEnd, overflow) = candidate.addingReportingOverflow(UInt64(ZipFormat.zip64EndLength))
            guard !overflow, candidateEnd <= locatorPosition else { continue }
            let bytes = try file.readExactly(
                ZipFormat.zip64EndLength,
                at: Int64(candidate),
                what: "the zip64 end record"
            )
            guard bytes.uint32LE(at: 0) == ZipFormat.zip64EndSignature else { continue }
            // Version 6.2 and later in the zip64 end record: the central directory may be encrypted.
            if bytes.uint16LE(at: 14) & 0xFF >= 62 {
                throw HotUpdateError(
                    .unsupportedEncryption,
                    "'\(name)' has an encrypted central directory (PKWARE strong encryption), which is not supported",
                    subject: name
                )
            }
            guard bytes.uint32LE(at: 16) == 0, bytes.uint32LE(at: 20) == 0 else {
                throw HotUpdateError(
                    .unsupported,
                    "'\(name)' is split across several disks, which is not supported",
                    subject: name
                )
            }
            let entryCount = bytes.uint64LE(at: 32)
            guard bytes.uint64LE(at: 24) == entryCount else {
                throw ArchiveError.corrupt(name, "the zip64 end record's entry counts disagree")
            }
            return EndRecord(
                entryCount: entryCount,
                directorySize: bytes.uint64LE(at: 40),
                directoryOffset: bytes.uint64LE(at: 48),
                directoryEndPosition: candidate
            )
        }
        throw ArchiveError.corrupt(name, "the zip64 locator points at no zip64 end record")
    }
}
