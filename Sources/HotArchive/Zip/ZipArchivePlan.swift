import Foundation
import HotCore

/// One entry, decoded and admitted: its safe relative path, kind and the mode it gets.
struct PlannedEntry: Sendable {
    var record: ZipEntryRecord
    /// The name as decoded from the archive.
    var name: String
    /// The normalised path relative to the destination.
    var path: String
    var kind: ArchiveEntry.Kind
    /// The mode the entry is created with: owner bits only (files at least 0o600, directories 0o700).
    var mode: UInt16
    /// The symlink's target, for symlinks when the policy admits them.
    var linkTarget: String?

    /// The listing's view of this entry.
    var archiveEntry: ArchiveEntry {
        ArchiveEntry(
            path: path,
            kind: kind,
            uncompressedSize: Int64(record.uncompressedSize),
            compressedSize: Int64(record.compressedSize),
            crc32: record.crc32,
            permissions: record.unixMode.map { $0 & 0o7777 },
            isEncrypted: record.isEncrypted,
            linkTarget: linkTarget
        )
    }
}

/// Everything an extraction needs to know before writing a byte: the structure
/// checked (``ZipDirectory``), every name decoded and admitted by
/// ``EntryPathValidator``, the limits of ``ExtractOptions`` applied to the
/// declared sizes, and symlink targets read and checked.
///
/// Name decoding: UTF-8 when general purpose bit 11 is set; else the Info-ZIP
/// Unicode Path extra field when its CRC matches the raw name; else, for
/// archives made on Unix or macOS (which store the file system's bytes, UTF-8
/// today), UTF-8 when the bytes are valid UTF-8; else code page 437.
struct ZipArchivePlan: Sendable {
    var directory: ZipDirectory
    var entries: [PlannedEntry]
    /// Directory entries that name the destination itself (`./`): nothing to create.
    var rootEntries: [ZipEntryRecord]
    /// Every directory to create, explicit or implied, parents first.
    var directories: [String]
    /// The sum of the declared sizes of files and symlinks.
    var declaredBytes: Int64
    /// Every admitted path, for checking link targets.
    private var validator: EntryPathValidator

    /// Builds the plan for `file` under `options`.
    ///
    /// - Parameter readsLinkTargets: Whether symlink targets are decoded here (with
    ///   ``EntryDataReader``, stored and deflate only) and checked; when false the caller
    ///   decodes them (``LibArchiveUnarchiver`` through libarchive, any method it reads)
    ///   and hands each to ``admitLinkTarget(_:at:)`` before anything is written.
    /// - Throws: ``HotUpdateError``: structure errors, `.unsafeEntry`, `.limitExceeded`.
    static func make(
        _ file: ReadOnlyFile,
        options: ExtractOptions,
        readsLinkTargets: Bool = true
    ) throws
        -> ZipArchivePlan
    {
        let archive = file.displayName
        let directory = try ZipDirectory.read(file, maxEntries: options.maxEntries)
        var validator = EntryPathValidator(archive: archive, maxNameLength: options.maxNameLength)
        var entries: [PlannedEntry] = []
        entries.reserveCapacity(directory.entries.count)
        var declared: Int64 = 0
        var rootEntries: [ZipEntryRecord] = []
        for record in directory.entries {
            let name = try decodeName(record, archive: archive)
            let kind = kind(of: record, name: name)
            if kind == .symlink && options.symlinks != .allowWithinDestination {
                throw ArchiveError.unsafe(
                    archive,
                    "it is a symbolic link and the symlink policy refuses links",
                    entry: name
                )
            }
            guard let path = try validator.admit(name, kind: kind) else {
                rootEntries.append(record)
                continue
            }
            guard record.uncompressedSize <= UInt64(Int64.max), record.compressedSize <= UInt64(Int64.max) else {
                throw ArchiveError.corrupt(archive, "it declares an impossible size", entry: name)
            }
            if kind != .directory {
                let size = Int64(record.uncompressedSize)
                let (sum, overflow) = declared.addingReportingOverflow(size)
                guard !overflow, sum <= options.maxTotalBytes else {
                    throw ArchiveError.limit(
                        archive,
                        "the entries declare more than the limit of \(options.maxTotalBytes) bytes in all",
                        entry: name
                    )
                }
                declared = sum
                try checkRatio(record, name: name, options: options, archive: archive)
            }
            let mode: UInt16
            if kind == .directory {
                mode = 0o700
            } else {
                mode = ((record.unixMode ?? 0) & 0o700) | 0o600
            }
            entries.append(
                PlannedEntry(record: record, name: name, path: path, kind: kind, mode: mode, linkTarget: nil)
            )
        }
        if readsLinkTargets, entries.contains(where: { $0.kind == .symlink }) {
            let reader = EntryDataReader(file: file, password: options.password)
            for index in entries.indices where entries[index].kind == .symlink {
                let target = try readLinkTarget(entries[index], reader: reader, archive: archive)
                try validator.checkLinkTarget(target, of: entries[index].path, entry: entries[index].name)
                entries[index].linkTarget = target
            }
        }
        return ZipArchivePlan(
            directory: directory,
            entries: entries,
            rootEntries: rootEntries,
            directories: validator.directories,
            declaredBytes: declared,
            validator: validator
        )
    }

    /// The listing of `archive`: the entries of the plan `make` builds from it, read off
    /// the cooperative pool; failures are wrapped as failures to list the archive.
    static func entries(
        of archive: URL,
        _ make: @escaping @Sendable (ReadOnlyFile) throws -> ZipArchivePlan
    ) async throws -> [ArchiveEntry] {
        try await BlockingThreads.perform {
            do {
                return try make(try ReadOnlyFile(archive)).entries.map(\.archiveEntry)
            } catch {
                throw HotUpdateError.wrap(error, as: .fileSystem, "listing '\(archive.lastPathComponent)'")
            }
        }
    }

    /// Checks and records the target of the symlink at `index`, decoded by another reader.
    ///
    /// - Throws: `.unsafeEntry` when the target is too long, not UTF-8, or leaves the destination.
    mutating func admitLinkTarget(_ bytes: [UInt8], at index: Int) throws {
        let entry = entries[index]
        let target = try Self.linkTarget(bytes, of: entry, archive: validator.archive)
        try validator.checkLinkTarget(target, of: entry.path, entry: entry.name)
        entries[index].linkTarget = target
    }

    /// Decodes an entry's name (see the type's documentation for the rules).
    static func decodeName(_ record: ZipEntryRecord, archive: String) throws -> String {
        let raw = record.rawName
        if record.flags & ZipFormat.flagUTF8 != 0 {
            guard let name = validUTF8(raw) else {
                throw ArchiveError.corrupt(
                    archive,
                    "its name is flagged UTF-8 but is not valid UTF-8",
                    entry: record.displayName
                )
            }
            return name
        }
        if let unicode = record.unicodePath, let name = validUTF8(unicode) {
            return name
        }
        if !raw.contains(where: { $0 >= 0x80 }) { return String(decoding: raw, as: UTF8.self) }
        if record.hasUnixMode, let name = validUTF8(raw) { return name }
        return CodePage437.decode(raw)
    }

    /// What an entry is, from its name and (for Unix hosts) its mode.
    static func kind(of record: ZipEntryRecord, name: String) -> ArchiveEntry.Kind {
        // Without a Unix mode, the MS-DOS directory attribute (0x10) marks directories too.
        let dosDirectory = record.unixMode == nil && record.externalAttributes & 0x10 != 0
        let nameIsDirectory = name.hasSuffix("/") || name.hasSuffix("\\") || dosDirectory
        switch (record.unixMode ?? 0) & 0o170000 {
        case 0o040000: return .directory
        case 0o120000: return nameIsDirectory ? .directory : .symlink
        case 0o010000, 0o020000, 0o060000, 0o140000: return .other
        default: return nameIsDirectory ? .directory : .file
        }
    }

    private static func checkRatio(
        _ record: ZipEntryRecord,
        name: String,
        options: ExtractOptions,
        archive: String
    ) throws {
        let size = Int64(record.uncompressedSize)
        guard size > options.compressionRatioFloor else { return }
        let compressed = Double(record.compressedSize)
        let ratio = compressed > 0 ? Double(size) / compressed : .infinity
        guard ratio <= options.maxCompressionRatio else {
            throw ArchiveError.limit(
                archive,
                "it inflates \(record.compressedSize) bytes to \(size), a ratio above the limit of \(options.maxCompressionRatio)",
                entry: name
            )
        }
    }

    private static func readLinkTarget(
        _ entry: PlannedEntry,
        reader: EntryDataReader,
        archive: String
    ) throws
        -> String
    {
        guard entry.record.uncompressedSize <= 4095 else {
            throw ArchiveError.unsafe(archive, "its link target is longer than 4095 bytes", entry: entry.name)
        }
        var bytes: [UInt8] = []
        try reader.read(
            entry.record,
            name: entry.name,
            isCancelled: { false },
            consume: { bytes.append(contentsOf: $0) }
        )
        return try linkTarget(bytes, of: entry, archive: archive)
    }

    private static func linkTarget(_ bytes: [UInt8], of entry: PlannedEntry, archive: String) throws -> String {
        guard bytes.count <= 4095 else {
            throw ArchiveError.unsafe(archive, "its link target is longer than 4095 bytes", entry: entry.name)
        }
        guard let target = validUTF8(bytes) else {
            throw ArchiveError.unsafe(archive, "its link target is not valid UTF-8", entry: entry.name)
        }
        return target
    }
}

/// `bytes` as a string when they are valid UTF-8, else nil.
func validUTF8<Bytes: Collection>(_ bytes: Bytes) -> String? where Bytes.Element == UInt8 {
    let string = String(decoding: bytes, as: UTF8.self)
    return string.utf8.elementsEqual(bytes) ? string : nil
}
