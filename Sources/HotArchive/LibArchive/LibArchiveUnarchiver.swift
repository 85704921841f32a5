#if canImport(CArchive)
import CArchive
import Foundation
import HotCore

/// A ZIP unarchiver over libarchive: libarchive decodes the entries (so it reads
/// what libarchive reads: bzip2, LZMA, zstd, xz, WinZip AES… as built) and
/// `archive_write_disk` writes them, under the same contract as ``ZipUnarchiver``.
///
/// Same checks, same errors: before libarchive touches the file, the archive's
/// structure is checked and every name admitted by the same code ``ZipUnarchiver``
/// uses (libarchive trusts local headers and does not notice overlapping entries
/// or a local name that disagrees with the central directory). Each entry
/// libarchive returns is matched to its central directory record by name (names
/// are unique by then), and written under the path and mode that check produced,
/// so both unarchivers write the same tree. libarchive runs on a thread of its own
/// with a UTF-8 `LC_CTYPE` for that thread only, so non-ASCII names convert. Limits are enforced on the data blocks
/// as libarchive delivers them; entries go into a staging directory renamed onto
/// the destination at the end. Symlink targets are the ones libarchive decodes
/// (whatever their compression method), checked like ``ZipUnarchiver``'s before any
/// link is created. WinZip AES entries whose data libarchive decrypts but cannot then
/// decompress (3.6.2 with bzip2, LZMA, PPMd, xz or zstd inside) are
/// ``HotUpdateError/Code/unsupportedMethod``.
///
/// `archive_write_disk` runs with `ARCHIVE_EXTRACT_SECURE_SYMLINKS`,
/// `ARCHIVE_EXTRACT_SECURE_NODOTDOT`, `ARCHIVE_EXTRACT_NO_OVERWRITE` and
/// `ARCHIVE_EXTRACT_PERM`. `ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS` is not set:
/// `archive_write_disk` resolves relative paths against the process's working
/// directory, which a library must not change, so every path handed to it is the
/// absolute staging directory (its symlinks resolved) joined to a relative path
/// that the shared validator has already cleared of `/`, drive letters and `..`.
///
/// Only the ZIP format is enabled (`archive_read_support_format_zip`), so an empty
/// file or anything else is ``HotUpdateError/Code/notAnArchive``. Extraction is
/// sequential (libarchive reads one entry at a time).
///
/// ```swift
/// let report = try await LibArchiveUnarchiver().extract(zip, to: dir, options: ExtractOptions(password: "s3cret"))
/// ```
public struct LibArchiveUnarchiver: Unarchiver {
    /// Creates an unarchiver.
    public init() {}

    /// Lists the entries of `archive` without extracting anything, checking names and
    /// limits as ``extract(_:to:options:progress:)`` does, and that libarchive reads every header.
    ///
    /// - Parameters:
    ///   - archive: The ZIP file.
    ///   - options: Limits and policies.
    /// - Returns: The entries in central directory order.
    /// - Throws: ``HotUpdateError`` with the codes ``ZipUnarchiver`` uses.
    ///
    /// ```swift
    /// let entries = try await LibArchiveUnarchiver().entries(of: zip, options: ExtractOptions())
    /// ```
    public func entries(of archive: URL, options: ExtractOptions) async throws -> [ArchiveEntry] {
        try await BlockingThreads.perform {
            do {
                var plan = try ZipArchivePlan.make(try ReadOnlyFile(archive), options: options, readsLinkTargets: false)
                try withUTF8ThreadLocale {
                    let reader = try LibArchiveReader(archive: archive, plan: plan, password: options.password)
                    while let (index, entry) = try reader.nextEntry() {
                        if plan.entries[index].kind == .symlink {
                            try plan.admitLinkTarget(reader.linkTarget(of: entry, for: plan.entries[index]), at: index)
                        }
                        try reader.skipData()
                    }
                    try reader.expectAllSeen()
                }
                return plan.entries.map(\.archiveEntry)
            } catch {
                throw HotUpdateError.wrap(error, as: .fileSystem, "listing '\(archive.lastPathComponent)'")
            }
        }
    }

    /// Extracts `archive` into `destination`, all or nothing.
    ///
    /// - Parameters:
    ///   - archive: The ZIP file.
    ///   - destination: A directory that does not exist or is empty.
    ///   - options: Password (given to `archive_read_add_passphrase`), limits, symlink
    ///     policy, and an optional hasher for ``ExtractedFile/digest``. `concurrency` is ignored.
    ///   - progress: Called after each entry.
    /// - Returns: What was written.
    /// - Throws: ``HotUpdateError``; the destination is then untouched.
    ///
    /// ```swift
    /// let report = try await LibArchiveUnarchiver().extract(zip, to: dir, options: ExtractOptions(), progress: nil)
    /// ```
    public func extract(
        _ archive: URL, to destination: URL, options: ExtractOptions,
        progress: (@Sendable (ExtractionProgress) -> Void)?
    ) async throws -> ExtractionReport {
        try Task.checkCancellation()
        let name = archive.lastPathComponent
        let (plan, staging) = try await BlockingThreads.perform {
            do {
                let plan = try ZipArchivePlan.make(
                    try ReadOnlyFile(archive), options: options, readsLinkTargets: false)
                for entry in plan.entries where entry.kind == .file && entry.record.isEncrypted {
                    if entry.record.flags & ZipFormat.flagStrongEncryption != 0 {
                        throw ArchiveError.make(
                            .unsupportedEncryption, name, "it uses PKWARE strong encryption, which is not supported",
                            entry: entry.name)
                    }
                    if options.password == nil {
                        throw ArchiveError.make(
                            .passwordRequired, name, "it is encrypted and no password was given", entry: entry.name)
                    }
                }
                return (plan, try StagingArea.create(for: destination))
            } catch {
                throw HotUpdateError.wrap(error, as: .fileSystem, "extracting '\(name)'")
            }
        }
        let state = ExtractionState(
            archive: name, workCount: 0, entriesTotal: plan.entries.count, bytesTotal: plan.declaredBytes,
            maxTotalBytes: options.maxTotalBytes, progress: progress)
        do {
            let links = try await withTaskCancellationHandler {
                try await BlockingThreads.perform {
                    try withUTF8ThreadLocale {
                        try Self.write(archive: archive, plan: plan, staging: staging, options: options, state: state)
                    }
                }
            } onCancel: {
                state.cancel()
            }
            if let failure = state.outcome { throw failure }
            try Task.checkCancellation()
            try staging.commit()
            let files = state.writtenFiles
            return ExtractionReport(
                files: files, directories: plan.directories, symlinks: links,
                totalBytes: files.reduce(0) { $0 + $1.size })
        } catch {
            staging.discard()
            throw HotUpdateError.wrap(error, as: .fileSystem, "extracting '\(name)'")
        }
    }

    /// Reads with libarchive and writes with `archive_write_disk`; returns the symlinks made.
    private static func write(
        archive: URL, plan: ZipArchivePlan, staging: StagingArea, options: ExtractOptions, state: ExtractionState
    ) throws -> [String] {
        var plan = plan
        let name = archive.lastPathComponent
        try staging.createDirectories(plan.directories)
        let explicitDirectories = plan.entries.count(where: { $0.kind == .directory })
        if explicitDirectories > 0 { state.finished(entries: explicitDirectories) }

        let reader = try LibArchiveReader(archive: archive, plan: plan, password: options.password)
        let writer = try DiskWriter(archive: name)
        while let (index, header) = try reader.nextEntry() {
            let entry = plan.entries[index]
            guard entry.kind == .file else {
                // libarchive decodes link targets (whatever their method); checked before any link is made.
                if entry.kind == .symlink {
                    try plan.admitLinkTarget(reader.linkTarget(of: header, for: entry), at: index)
                }
                try reader.skipData()
                continue
            }
            if state.isStopping { break }
            let hasher = try options.fileHasher?()
            try writer.begin(entry, path: staging.path(entry.path))
            var written: Int64 = 0
            let declared = Int64(entry.record.uncompressedSize)
            try reader.readData(entry: entry) { block, offset in
                guard Int64(block.count) <= declared - written else {
                    throw ArchiveError.corrupt(
                        name, "its data inflates to more than the \(declared) bytes it declares", entry: entry.name)
                }
                try state.account(block.count, entry: entry.path)
                hasher?.update(block)
                try writer.write(block, at: offset, entry: entry)
                written += Int64(block.count)
            }
            guard written == declared else {
                throw ArchiveError.corrupt(
                    name, "its data inflates to \(written) bytes, fewer than the \(declared) it declares",
                    entry: entry.name)
            }
            try writer.finish(entry)
            state.finished(file: (index, ExtractedFile(path: entry.path, size: written, digest: hasher?.finalize())))
        }
        if let failure = state.outcome { throw failure }
        try reader.expectAllSeen()

        var links: [String] = []
        for entry in plan.entries where entry.kind == .symlink {
            guard let target = entry.linkTarget else {
                throw HotUpdateError(
                    .internalInconsistency, "symlink '\(entry.name)' was admitted without a target", subject: entry.name)
            }
            try writer.symlink(entry, path: staging.path(entry.path), target: target)
            links.append(entry.path)
            state.finished()
        }
        try writer.close()
        return links
    }
}

/// A libarchive read handle restricted to ZIP, whose entries are matched to a plan.
private final class LibArchiveReader {
    private let handle: OpaquePointer
    private let plan: ZipArchivePlan
    private let archiveName: String
    private let hasPassword: Bool
    /// Plan indices by raw name (without a trailing `/`); ``root`` for `./` entries.
    private let byName: [[UInt8]: Int]
    private static let root = -1
    private var seen: Set<Int> = []
    private var current: String?

    init(archive: URL, plan: ZipArchivePlan, password: String?) throws {
        archiveName = archive.lastPathComponent
        self.plan = plan
        hasPassword = password != nil
        guard let handle = archive_read_new() else {
            throw HotUpdateError(.internalInconsistency, "libarchive could not allocate a reader")
        }
        self.handle = handle
        var names: [[UInt8]: Int] = [:]
        for (index, entry) in plan.entries.enumerated() {
            names[Self.key(entry.record.rawName)] = index
            names[Self.key(entry.name.utf8)] = index
            if let unicode = entry.record.unicodePath { names[Self.key(unicode)] = index }
            if let local = entry.record.localName { names[Self.key(local)] = index }
        }
        for root in plan.rootEntries { names[Self.key(root.rawName)] = Self.root }
        byName = names
        archive_read_support_format_zip(handle)
        archive_read_support_filter_all(handle)
        // Keep AppleDouble entries as entries of their own, as the plan lists them.
        _ = archive_read_set_options(handle, "zip:!mac-ext")
        if let password { archive_read_add_passphrase(handle, password) }
        guard archive_read_open_filename(handle, archive.path, 256 * 1024) == ARCHIVE_OK else {
            throw failure("opening")
        }
    }

    deinit { archive_read_free(handle) }

    /// The name with `\\` as `/` and no trailing `/`: libarchive turns DOS separators into
    /// slashes and may add or drop a slash on directories. Names that collide under this
    /// key have already been refused as duplicates.
    private static func key<Bytes: Collection>(_ bytes: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        var key = bytes.map { $0 == UInt8(ascii: "\\") ? UInt8(ascii: "/") : $0 }
        if key.last == UInt8(ascii: "/") { key.removeLast() }
        return key
    }

    /// The next entry's index in the plan, or nil at the end.
    ///
    /// Entries are matched by name: the structure check has made local and central
    /// names agree and names unique, and libarchive returns either the raw bytes or
    /// a UTF-8 form (of a flagged name or a Unicode Path field), which is our decoded
    /// name. An ambiguous match fails safely: the same entry seen twice is an error.
    func nextEntry() throws -> (Int, OpaquePointer)? {
        while true {
            var entry: OpaquePointer?
            let status = archive_read_next_header(handle, &entry)
            if status == ARCHIVE_EOF { return nil }
            guard status == ARCHIVE_OK || status == ARCHIVE_WARN, let entry else {
                // libarchive reads in central directory order: the header that failed is the first not seen.
                let next = plan.entries.indices.first { !seen.contains($0) }.map { plan.entries[$0].name }
                throw failure("reading a header", entry: next ?? current)
            }
            let raw = archive_entry_pathname(entry)
            let utf8 = archive_entry_pathname_utf8(entry)
            let candidates = [raw, utf8].compactMap { $0 }.map { pointer in
                Self.key(UnsafeRawBufferPointer(start: pointer, count: strlen(pointer)))
            }
            guard let index = candidates.lazy.compactMap({ self.byName[$0] }).first else {
                let shown = utf8.map { String(cString: $0) } ?? raw.map { String(cString: $0) } ?? "?"
                throw ArchiveError.corrupt(
                    archiveName, "libarchive returned an entry the central directory does not list", entry: shown)
            }
            if index == Self.root {
                try skipData()
                continue
            }
            return try admit(index, entry)
        }
    }

    private func admit(_ index: Int, _ entry: OpaquePointer) throws -> (Int, OpaquePointer) {
        guard seen.insert(index).inserted else {
            throw ArchiveError.corrupt(archiveName, "libarchive returned the same entry twice", entry: plan.entries[index].name)
        }
        let planned = plan.entries[index]
        current = planned.name
        // libarchive's own view of the name must be safe too (defence in depth).
        if let raw = archive_entry_pathname(entry) {
            _ = try EntryPathValidator.components(
                of: String(cString: raw), archive: archiveName, maxNameLength: Int.max)
        }
        return (index, entry)
    }

    /// The target libarchive read for the symlink `entry` (libarchive decodes it with the header).
    func linkTarget(of entry: OpaquePointer, for planned: PlannedEntry) throws -> [UInt8] {
        guard let target = archive_entry_symlink(entry) else {
            throw ArchiveError.corrupt(archiveName, "libarchive read no link target for this symlink", entry: planned.name)
        }
        return Array(UnsafeRawBufferPointer(start: target, count: strlen(target)))
    }

    func skipData() throws {
        guard archive_read_data_skip(handle) == ARCHIVE_OK else { throw failure("skipping data") }
    }

    /// Hands out the current entry's data blocks with their offsets.
    func readData(entry: PlannedEntry, _ consume: (UnsafeRawBufferPointer, Int64) throws -> Void) throws {
        while true {
            var buffer: UnsafeRawPointer?
            var size = 0
            var offset: la_int64_t = 0
            let status = archive_read_data_block(handle, &buffer, &size, &offset)
            if status == ARCHIVE_EOF { return }
            // For ZIP data, libarchive reports a bad CRC or size as a mere warning: refuse it.
            guard status == ARCHIVE_OK else { throw dataFailure(entry) }
            if size > 0, let buffer { try consume(UnsafeRawBufferPointer(start: buffer, count: size), Int64(offset)) }
        }
    }

    /// Throws when libarchive skipped entries the central directory lists.
    func expectAllSeen() throws {
        if let missing = plan.entries.indices.first(where: { !seen.contains($0) }) {
            throw ArchiveError.corrupt(
                archiveName, "libarchive did not return this entry", entry: plan.entries[missing].name)
        }
    }

    /// A failure reading `entry`'s data. WinZip AES over a method other than stored or deflate
    /// is one libarchive may not decode (3.6.2 decrypts, then cannot decompress bzip2, LZMA,
    /// PPMd, xz or zstd): that is ``HotUpdateError/Code/unsupportedMethod``, not a corrupt archive.
    private func dataFailure(_ entry: PlannedEntry) -> HotUpdateError {
        let error = failure("reading data")
        guard entry.record.method == ZipFormat.methodAES, let inner = entry.record.aesMethod,
            inner != ZipFormat.methodStored, inner != ZipFormat.methodDeflate, error.code == .corruptArchive
        else { return error }
        let message = archive_error_string(handle).map { String(cString: $0) } ?? "unknown error"
        let version = archive_version_string().map { String(cString: $0) } ?? "libarchive"
        return ArchiveError.make(
            .unsupportedMethod, archiveName,
            "it is WinZip AES-encrypted \(ZipFormat.methodName(inner)) data (method \(inner)), which \(version) cannot decrypt and decompress (\(message))",
            entry: entry.name, cause: error)
    }

    /// Turns libarchive's last error into a ``HotUpdateError`` with the code its cause deserves.
    private func failure(_ doing: String) -> HotUpdateError { failure(doing, entry: current) }

    private func failure(_ doing: String, entry: String?) -> HotUpdateError {
        let message = archive_error_string(handle).map { String(cString: $0) } ?? "unknown error"
        let lower = message.lowercased()
        let code: HotUpdateError.Code
        if lower.contains("crc") {
            code = .checksumMismatch
        } else if lower.contains("passphrase") || lower.contains("password") {
            code = hasPassword ? .wrongPassword : .passwordRequired
        } else if lower.contains("encrypt") || lower.contains("decryption") {
            code = .unsupportedEncryption
        } else if lower.contains("unsupported") || lower.contains("not supported") {
            code = .unsupportedMethod
        } else if current == nil && doing == "opening" || lower.contains("unrecognized archive format") {
            code = .notAnArchive
        } else {
            code = .corruptArchive
        }
        return ArchiveError.make(code, archiveName, "libarchive failed \(doing): \(message)", entry: entry)
    }
}

/// An `archive_write_disk` handle with the secure extraction flags.
private final class DiskWriter {
    private let handle: OpaquePointer
    private let archiveName: String

    init(archive: String) throws {
        archiveName = archive
        guard let handle = archive_write_disk_new() else {
            throw HotUpdateError(.internalInconsistency, "libarchive could not allocate a disk writer")
        }
        self.handle = handle
        let flags =
            ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_NO_OVERWRITE
            | ARCHIVE_EXTRACT_PERM
        archive_write_disk_set_options(handle, flags)
    }

    deinit { archive_write_free(handle) }

    /// Starts a regular file at the absolute `path`.
    func begin(_ entry: PlannedEntry, path: String) throws {
        let header = archive_entry_new()
        defer { archive_entry_free(header) }
        archive_entry_set_pathname(header, path)
        archive_entry_set_filetype(header, 0o100000)  // AE_IFREG
        archive_entry_set_perm(header, mode_t(entry.mode))
        archive_entry_set_size(header, la_int64_t(entry.record.uncompressedSize))
        guard archive_write_header(handle, header) == ARCHIVE_OK else { throw failure("creating", entry: entry) }
    }

    func write(_ block: UnsafeRawBufferPointer, at offset: Int64, entry: PlannedEntry) throws {
        guard archive_write_data_block(handle, block.baseAddress, block.count, la_int64_t(offset)) >= 0 else {
            throw failure("writing", entry: entry)
        }
    }

    func finish(_ entry: PlannedEntry) throws {
        guard archive_write_finish_entry(handle) == ARCHIVE_OK else { throw failure("finishing", entry: entry) }
    }

    /// Creates a symlink (after every file, so nothing is written through it).
    func symlink(_ entry: PlannedEntry, path: String, target: String) throws {
        let header = archive_entry_new()
        defer { archive_entry_free(header) }
        archive_entry_set_pathname(header, path)
        archive_entry_set_filetype(header, 0o120000)  // AE_IFLNK
        archive_entry_set_perm(header, 0o777)
        archive_entry_set_symlink(header, target)
        guard archive_write_header(handle, header) == ARCHIVE_OK else { throw failure("creating symlink", entry: entry) }
        guard archive_write_finish_entry(handle) == ARCHIVE_OK else { throw failure("finishing symlink", entry: entry) }
    }

    func close() throws {
        guard archive_write_close(handle) == ARCHIVE_OK else {
            let message = archive_error_string(handle).map { String(cString: $0) } ?? "unknown error"
            throw HotUpdateError(.fileSystem, "'\(archiveName)': finishing the extraction failed: \(message)")
        }
    }

    private func failure(_ doing: String, entry: PlannedEntry) -> HotUpdateError {
        let message = archive_error_string(handle).map { String(cString: $0) } ?? "unknown error"
        let lower = message.lowercased()
        let code: HotUpdateError.Code =
            lower.contains("symlink") || lower.contains("..") || lower.contains("absolute") ? .unsafeEntry : .fileSystem
        return ArchiveError.make(code, archiveName, "libarchive failed \(doing) it on disk: \(message)", entry: entry.name)
    }
}
#endif
