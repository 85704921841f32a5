#if LibArchive && canImport(CHotArchive)
import CHotArchive
import CHotZlib
import Foundation
import HotCore

/// A ZIP unarchiver over libarchive: libarchive decodes the entries (so it reads
/// what libarchive reads: bzip2, LZMA, zstd, xz, WinZip AES… as built) and
/// HotArchive writes them, under the same contract as ``ZipUnarchiver``.
///
/// Same checks, same errors: before libarchive touches the file, the archive's
/// structure is checked and every name admitted by the same code ``ZipUnarchiver``
/// uses (libarchive trusts local headers and does not notice overlapping entries
/// or a local name that disagrees with the central directory). Each entry
/// libarchive returns is matched to its central directory record by name (names
/// are unique by then), and written under the path and mode that check produced,
/// so both unarchivers write the same tree. libarchive runs on threads of their own
/// with a UTF-8 `LC_CTYPE` for those threads only, so non-ASCII names convert. Limits
/// are enforced on the data blocks as libarchive delivers them; entries go into a
/// partial directory renamed onto the destination at the end. When links are allowed,
/// their targets come from libarchive too (it decodes them with the header, in any method
/// it reads, LZMA included), are checked against the declared size and CRC-32, and are
/// admitted by the shared validator before any file is written; an encrypted link, whose
/// target libarchive does not decrypt, is `HotUpdateError.Code.unsupportedEncryption`.
/// WinZip AES entries whose data libarchive decrypts but cannot then decompress (3.6.2
/// with bzip2, LZMA, PPMd, xz or zstd inside) are `HotUpdateError.Code.unsupportedMethod`.
///
/// libarchive is only the decoder (`archive_read_data_block`); `archive_write_disk`
/// is not used. Files are created by the partial directory ``ZipUnarchiver`` writes
/// with: `open` with `O_CREAT | O_EXCL | O_NOFOLLOW` under the partial directory,
/// at a path the shared validator has cleared of `/`, drive letters and `..`.
/// No link can be on the way while files are written: the partial directory is
/// new, its directories are created first by this code, and symlinks (refused
/// unless `ExtractOptions.symlinks` admits them, and then never with an entry
/// beneath one) are created only after every file has been written and closed.
///
/// Extraction is parallel: up to `ExtractOptions.concurrency` workers (0: one per
/// active core), each with its own libarchive reader on the archive, opened with
/// the seekable ZIP reader (`archive_read_support_format_zip_seekable`, driven by the
/// central directory). Entries are split, in the order of their local headers, into
/// contiguous shares of about equal bytes; a worker skips the entries before its
/// share (without decoding them), extracts its share and stops. Every entry of the
/// plan must be returned by libarchive to the worker that owns it.
///
/// Only the ZIP format is enabled, so an empty file or anything else is
/// `HotUpdateError.Code.notAnArchive`.
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
    /// - Throws: `HotUpdateError` with the codes ``ZipUnarchiver`` uses.
    ///
    /// ```swift
    /// let entries = try await LibArchiveUnarchiver().entries(of: zip, options: ExtractOptions())
    /// ```
    public func entries(of archive: URL, options: ExtractOptions) async throws -> [ArchiveEntry] {
        try await ZipArchivePlan.entries(of: archive) { file in
            try Self.plan(file, archive: archive, options: options, readsAll: true)
        }
    }

    /// Extracts `archive` into `destination`, all or nothing.
    ///
    /// - Parameters:
    ///   - archive: The ZIP file.
    ///   - destination: A directory that does not exist or is empty.
    ///   - options: Password (given to `archive_read_add_passphrase`), limits, symlink
    ///     policy, concurrency (0: one worker per active core), and an optional hasher for
    ///     `ExtractionReport.File.digest`.
    ///   - progress: Called after each entry, from worker threads.
    /// - Returns: What was written.
    /// - Throws: `HotUpdateError`; the destination is then untouched.
    ///
    /// ```swift
    /// let report = try await LibArchiveUnarchiver().extract(zip, to: dir, options: ExtractOptions(), progress: nil)
    /// ```
    public func extract(
        _ archive: URL,
        to destination: URL,
        options: ExtractOptions,
        progress: (@Sendable (ExtractionReport.Progress) -> Void)?
    ) async throws -> ExtractionReport {
        let name = archive.lastPathComponent
        return try await PartialDirectory.extract(archive, to: destination, options: options, progress: progress) {
            file in
            let plan = try Self.plan(file, archive: archive, options: options, readsAll: false)
            for entry in plan.entries where entry.kind == .file && entry.record.isEncrypted {
                if entry.record.flags & ZipFormat.flagStrongEncryption != 0 {
                    throw ArchiveError.make(
                        .unsupportedEncryption,
                        name,
                        "it uses PKWARE strong encryption, which is not supported",
                        entry: entry.name
                    )
                }
                // A WinZip AES field is judged as our reader judges it: libarchive takes an unknown
                // strength for damage and an unknown vendor version for AE-1.
                if entry.record.method == ZipFormat.methodAES {
                    _ = try WinZipAES.parameters(of: entry.record, name: entry.name, archive: name, anyMethod: true)
                }
                if options.password == nil {
                    throw ArchiveError.make(
                        .passwordRequired,
                        name,
                        "it is encrypted and no password was given",
                        entry: entry.name
                    )
                }
            }
            return plan
        } run: { _, plan, partial, state, workers in
            let fileCount = plan.entries.count(where: { $0.kind == .file })
            let shares = Shares(plan: plan, workers: min(workers, max(1, fileCount)))
            await BlockingThreads.run(count: shares.count) { worker in
                do {
                    try withUTF8ThreadLocale {
                        try Self.work(
                            worker,
                            shares: shares,
                            archive: archive,
                            plan: plan,
                            partial: partial,
                            options: options,
                            state: state
                        )
                    }
                } catch {
                    state.fail(HotUpdateError.wrap(error, as: .fileSystem, "extracting '\(name)'"))
                }
            }
        }
    }

    /// The archive's plan, with its symlink targets as libarchive decodes them (any method
    /// it reads; encrypted links are `HotUpdateError.Code.unsupportedEncryption`), each
    /// checked against the entry's declared size and CRC-32 and admitted by the plan's
    /// validator before anything is written.
    ///
    /// - Parameter readsAll: Whether libarchive reads every header even when there is no
    ///   link (a listing's check that libarchive reads the archive at all).
    private static func plan(
        _ file: ReadOnlyFile,
        archive: URL,
        options: ExtractOptions,
        readsAll: Bool
    ) throws
        -> ZipArchivePlan
    {
        var plan = try ZipArchivePlan.make(file, options: options, readsLinkTargets: false)
        let links = plan.entries.indices.filter { plan.entries[$0].kind == .symlink }
        // libarchive reads a link's target with its header and does not decrypt it.
        if let encrypted = links.first(where: { plan.entries[$0].record.isEncrypted }) {
            throw ArchiveError.make(
                .unsupportedEncryption,
                file.displayName,
                "it is an encrypted symlink, whose target libarchive does not decrypt",
                entry: plan.entries[encrypted].name
            )
        }
        // Nothing for libarchive to decode in an archive that is just an end record.
        guard readsAll || !links.isEmpty, !plan.entries.isEmpty || !plan.rootEntries.isEmpty else { return plan }
        try withUTF8ThreadLocale {
            let reader = try LibArchiveReader(archive: archive, plan: plan, password: options.password)
            while let index = try reader.nextEntry() {
                guard plan.entries[index].kind == .symlink else { continue }
                try plan.admitLinkTarget(try reader.linkTarget(of: plan.entries[index]), at: index)
            }
            try reader.expectAllSeen()
        }
        return plan
    }

    /// One worker: reads the archive with its own libarchive handle up to the end of its
    /// share, writing the share's files; throws when libarchive leaves one of them out.
    private static func work(
        _ worker: Int,
        shares: Shares,
        archive: URL,
        plan: ZipArchivePlan,
        partial: PartialDirectory,
        options: ExtractOptions,
        state: ExtractionState
    ) throws {
        let name = archive.lastPathComponent
        let reader = try LibArchiveReader(archive: archive, plan: plan, password: options.password)
        var remaining = shares.sizes[worker]
        while remaining > 0, let index = try reader.nextEntry() {
            guard shares.owner[index] == worker else { continue }
            remaining -= 1
            let entry = plan.entries[index]
            guard entry.kind == .file else { continue }
            if state.isStopping { return }
            let path = entry.path
            let fd = try partial.createFile(path, mode: entry.mode)
            var open = true
            defer { if open { close(fd) } }
            let hasher = try options.fileHasher?()
            var written: Int64 = 0
            let declared = Int64(entry.record.uncompressedSize)
            try reader.readData(of: entry) { block, offset in
                guard offset == written else {
                    throw ArchiveError.corrupt(
                        name,
                        "libarchive delivered its data out of order (at \(offset), expected \(written))",
                        entry: entry.name
                    )
                }
                guard Int64(block.count) <= declared - written else {
                    throw ArchiveError.corrupt(
                        name,
                        "its data inflates to more than the \(declared) bytes it declares",
                        entry: entry.name
                    )
                }
                try state.account(block.count, entry: path)
                hasher?.update(block)
                try writeAll(fd, block, path: partial.path(path))
                written += Int64(block.count)
            }
            guard written == declared else {
                throw ArchiveError.corrupt(
                    name,
                    "its data inflates to \(written) bytes, fewer than the \(declared) it declares",
                    entry: entry.name
                )
            }
            open = false
            guard close(fd) == 0 else { throw ArchiveError.system("closing", path: partial.path(path), errno: errno) }
            state.finished(file: (index, ExtractionReport.File(path: path, size: written, digest: hasher?.finalize())))
        }
        if remaining > 0, !state.isStopping,
            let missing = plan.entries.indices.first(where: { shares.owner[$0] == worker && !reader.hasSeen($0) })
        {
            throw ArchiveError.corrupt(name, "libarchive did not return this entry", entry: plan.entries[missing].name)
        }
    }
}

/// How the plan's entries are split among workers: contiguous runs in the order of
/// their local headers (the order libarchive's seekable reader returns them), of
/// about equal weight (bytes read and written, plus a fixed cost per entry).
private struct Shares: Sendable {
    /// The worker of each plan entry.
    var owner: [Int]
    /// How many entries each worker owns.
    var sizes: [Int]
    var count: Int { sizes.count }

    init(plan: ZipArchivePlan, workers: Int) {
        let order = plan.entries.indices.sorted {
            plan.entries[$0].record.localHeaderOffset < plan.entries[$1].record.localHeaderOffset
        }
        func weight(_ index: Int) -> UInt64 {
            let record = plan.entries[index].record
            return 16 * 1024 + (plan.entries[index].kind == .file ? record.compressedSize + record.uncompressedSize : 0)
        }
        let total = order.reduce(UInt64(0)) { $0 + weight($1) }
        var owner = [Int](repeating: 0, count: plan.entries.count)
        var sizes = [Int](repeating: 0, count: max(1, workers))
        var worker = 0
        var sum: UInt64 = 0
        for index in order {
            // Move to the next worker once this one has its fair part of the total.
            if worker < sizes.count - 1, sum >= total / UInt64(sizes.count) * UInt64(worker + 1) { worker += 1 }
            owner[index] = worker
            sizes[worker] += 1
            sum += weight(index)
        }
        // A worker left without entries would read the archive for nothing.
        let used = sizes.indices.filter { sizes[$0] > 0 }
        if used.count < sizes.count {
            var renumber = [Int](repeating: 0, count: sizes.count)
            for (new, old) in used.enumerated() { renumber[old] = new }
            owner = owner.map { renumber[$0] }
            sizes = used.map { sizes[$0] }
        }
        // An archive without entries (just an end record) has nothing for libarchive to decode,
        // and its seekable reader does not recognise one; `./` entries alone still get a reader.
        if plan.entries.isEmpty { sizes = plan.rootEntries.isEmpty ? [] : [0] }
        self.owner = owner
        self.sizes = sizes
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
    /// libarchive's header of the current entry (valid until the next `nextEntry`).
    private var currentHeader: OpaquePointer?

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
        // Driven by the central directory: skipping an entry's data costs nothing.
        archive_read_support_format_zip_seekable(handle)
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
    /// Data the caller does not read is skipped by the next call.
    func nextEntry() throws -> Int? {
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
                    archiveName,
                    "libarchive returned an entry the central directory does not list",
                    entry: shown
                )
            }
            if index == Self.root {
                try skipData()
                continue
            }
            return try admit(index, entry)
        }
    }

    private func admit(_ index: Int, _ entry: OpaquePointer) throws -> Int {
        guard seen.insert(index).inserted else {
            throw ArchiveError.corrupt(
                archiveName,
                "libarchive returned the same entry twice",
                entry: plan.entries[index].name
            )
        }
        let planned = plan.entries[index]
        current = planned.name
        currentHeader = entry
        // libarchive's own view of the name must be safe too (defence in depth).
        if let raw = archive_entry_pathname(entry) {
            _ = try EntryPathValidator.components(
                of: String(cString: raw),
                archive: archiveName,
                maxNameLength: Int.max
            )
        }
        return index
    }

    /// The target of the current entry, a symlink, as libarchive decoded it while reading
    /// its header, checked against the size and CRC-32 the archive declares for it.
    ///
    /// - Throws: `.corruptArchive` without a target or with another size,
    ///   `.checksumMismatch` when the CRC-32 differs.
    func linkTarget(of entry: PlannedEntry) throws -> [UInt8] {
        guard let header = currentHeader, let target = archive_entry_symlink(header) else {
            throw ArchiveError.corrupt(archiveName, "libarchive read no target for this symlink", entry: entry.name)
        }
        let bytes = Array(UnsafeRawBufferPointer(start: target, count: strlen(target)))
        guard UInt64(bytes.count) == entry.record.uncompressedSize else {
            throw ArchiveError.corrupt(
                archiveName,
                "its link target is \(bytes.count) bytes long, not the \(entry.record.uncompressedSize) it declares",
                entry: entry.name
            )
        }
        let crc = bytes.withUnsafeBufferPointer { UInt32(truncatingIfNeeded: crc32(0, $0.baseAddress, uInt($0.count))) }
        guard crc == entry.record.crc32 else {
            throw ArchiveError.make(
                .checksumMismatch,
                archiveName,
                "its link target's CRC-32 is \(hex(crc)) but the archive declares \(hex(entry.record.crc32))",
                entry: entry.name
            )
        }
        return bytes
    }

    /// Whether libarchive has returned the plan's entry `index`.
    func hasSeen(_ index: Int) -> Bool { seen.contains(index) }

    func skipData() throws {
        guard archive_read_data_skip(handle) == ARCHIVE_OK else { throw failure("skipping data") }
    }

    /// Hands out the current entry's data blocks with their offsets.
    func readData(of entry: PlannedEntry, _ consume: (UnsafeRawBufferPointer, Int64) throws -> Void) throws {
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
                archiveName,
                "libarchive did not return this entry",
                entry: plan.entries[missing].name
            )
        }
    }

    /// A failure reading `entry`'s data. WinZip AES over a method other than stored or deflate
    /// is one libarchive may not decode (3.6.2 decrypts, then cannot decompress bzip2, LZMA,
    /// PPMd, xz or zstd): that is `HotUpdateError.Code.unsupportedMethod`, not a corrupt archive.
    private func dataFailure(_ entry: PlannedEntry) -> HotUpdateError {
        let error = failure("reading data")
        guard entry.record.method == ZipFormat.methodAES, let inner = entry.record.aesMethod,
            inner != ZipFormat.methodStored, inner != ZipFormat.methodDeflate, error.code == .corruptArchive
        else { return error }
        let message = archive_error_string(handle).map { String(cString: $0) } ?? "unknown error"
        let version = archive_version_string().map { String(cString: $0) } ?? "libarchive"
        return ArchiveError.make(
            .unsupportedMethod,
            archiveName,
            "it is WinZip AES-encrypted \(ZipFormat.methodName(inner)) data (method \(inner)), which \(version) cannot decrypt and decompress (\(message))",
            entry: entry.name,
            cause: error
        )
    }

    /// Turns libarchive's last error into a ``HotUpdateError`` with the code its cause deserves.
    private func failure(_ doing: String) -> HotUpdateError { failure(doing, entry: current) }

    private func failure(_ doing: String, entry: String?) -> HotUpdateError {
        let message = archive_error_string(handle).map { String(cString: $0) } ?? "unknown error"
        let lower = message.lowercased()
        let code: HotUpdateError.Code
        if lower.contains("authentication code") {
            code = .authenticationFailed
        } else if lower.contains("crc") {
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

#endif
