import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// HotArchive's own ZIP reader, over zlib's raw inflate (libdeflate, where it is linked, decodes deflate
/// entries of up to 1 MiB whole and computes CRC-32: the `Deflate` trait, on by default off Apple
/// platforms, whose SDKs lack libdeflate).
///
/// It reads the archive with `pread` from one descriptor shared by all workers,
/// extracts entries in parallel (one 256 KiB input and output buffer and one
/// zlib stream per worker, whatever the entries' sizes), and writes with
/// `write(2)` straight from those buffers.
///
/// What it reads: stored and deflate entries, zip64 (end record, locator and
/// extra fields), data descriptors with and without signature, PKWARE
/// traditional encryption ("ZipCrypto", with `ExtractOptions.password`), WinZip AES
/// (AE-1 and AE-2, AES-128, -192 and -256, where the build links a crypto library: see
/// ``readsWinZipAES``; the password verifier is checked first, the HMAC-SHA1 authentication
/// code over the encrypted bytes before the CRC-32, which only AE-1 records),
/// UTF-8 names (bit 11), Info-ZIP Unicode Path fields, and code page 437 names
/// (a name not flagged UTF-8 is read as UTF-8 only when the archive was made on
/// Unix or macOS and the bytes are valid UTF-8, as Info-ZIP's tools write them), and the
/// per-file SHA-256 ``ZipWriter`` records, reported instead of hashing a file again when
/// `ExtractOptions.trustsRecordedDigests` is set (the CRC-32 is checked all the same).
///
/// What it refuses, before writing anything:
/// - `HotUpdateError.Code.notAnArchive`: an empty file, a file without an end record;
/// - `HotUpdateError.Code.corruptArchive`: a truncated file, a local header that
///   disagrees with the central directory, entries whose bytes overlap each other or
///   the central directory (overlapping-file zip bombs);
/// - `HotUpdateError.Code.unsafeEntry`: `..`, absolute, UNC and drive-letter paths
///   (`\` counts as a separator), NUL bytes, empty names, duplicates, a file where a
///   directory is needed, devices, FIFOs and sockets, and symlinks unless
///   `ExtractOptions.symlinks` is `ExtractOptions.SymlinkPolicy.allowWithinDestination` and the
///   target stays inside (then the links are created last, and no entry may lie beneath one);
/// - `HotUpdateError.Code.limitExceeded`: too many entries, a name too long or with a
///   component over 255 bytes, declared sizes over `ExtractOptions.maxTotalBytes`, a
///   compression ratio over the limit;
/// - `HotUpdateError.Code.unsupportedMethod` (also inside WinZip AES) and
///   `HotUpdateError.Code.unsupportedEncryption` (PKWARE strong encryption; WinZip AES of an
///   unknown vendor version or strength, or in a build without a crypto library),
///   `HotUpdateError.Code.passwordRequired`, and as `HotUpdateError.Code.corruptArchive` a
///   WinZip AES entry without its AES extra field, with a vendor other than "AE", or too short
///   for its salt, password verifier and authentication code.
///
/// And while inflating: more or fewer bytes than declared (`.corruptArchive`), a bad
/// CRC-32 or data descriptor (`.checksumMismatch`), a password that does not decrypt
/// (`.wrongPassword`; for WinZip AES, a password verifier that does not match, which an altered
/// verifier cannot be told from), WinZip AES bytes that do not match their authentication code
/// (`.authenticationFailed`), more than `ExtractOptions.maxTotalBytes` written (`.limitExceeded`).
///
/// Prefix and trailing data: bytes before the archive (a self-extractor stub, or an
/// archive appended to another file) are accepted the way Info-ZIP accepts them: the
/// distance between where the end record says the central directory ends and where the
/// end record is becomes an offset added to every position. Bytes after the end record
/// are accepted too. Split archives are refused (`HotUpdateError.Code.unsupported`).
///
/// Kinds: a name ending in `/`, a Unix directory mode or (without a Unix mode) the
/// MS-DOS directory attribute make a directory; a `./` entry (bsdtar writes one)
/// names the destination itself and is skipped. Files get the owner's permission
/// bits of a Unix archive (at least 0o600, never setuid, setgid or sticky),
/// directories 0o700; times are not restored and nothing is `fsync`ed (the caller
/// commits durability, as the store does with its metadata).
///
/// ```swift
/// let unzip = ZipUnarchiver()
/// let report = try await unzip.extract(package, to: destination, options: ExtractOptions(maxTotalBytes: 500 << 20))
/// for file in report.files { print(file.path, file.size) }
/// ```
public struct ZipUnarchiver: Unarchiver {
    /// Creates an unarchiver. It holds no state; one value serves any number of extractions.
    public init() {}

    /// Whether this build reads (and ``ZipWriter`` writes) WinZip AES entries: where it links a
    /// crypto library, libcrypto (the `Libcrypto` trait, on by default off Apple platforms) or
    /// swift-crypto (Apple platforms, and the `SwiftCrypto` trait elsewhere).
    ///
    /// ```swift
    /// let suite = UnarchiverConformance(readsWinZipAES: ZipUnarchiver.readsWinZipAES) { ZipUnarchiver() }
    /// ```
    public static var readsWinZipAES: Bool { CipherBackend.missing == nil }

    /// Lists the entries of `archive` without extracting anything.
    ///
    /// Names, kinds, limits and the symlink policy are checked as for ``extract(_:to:options:progress:)``,
    /// so an archive that lists is one that would be admitted; data is not inflated
    /// (except symlink targets, when links are allowed).
    ///
    /// - Parameters:
    ///   - archive: The ZIP file.
    ///   - options: Limits and policies.
    /// - Returns: The entries in central directory order, with normalised paths.
    /// - Throws: `HotUpdateError` (see the type's documentation).
    ///
    /// ```swift
    /// let names = try await ZipUnarchiver().entries(of: zip, options: ExtractOptions()).map(\.path)
    /// ```
    public func entries(of archive: URL, options: ExtractOptions) async throws -> [ArchiveEntry] {
        try await ZipArchivePlan.entries(of: archive) { file in try ZipArchivePlan.make(file, options: options) }
    }

    /// Extracts `archive` into `destination`, all or nothing.
    ///
    /// Entries are written into `<parent>/.<name>.partial-<uuid>` beside the destination,
    /// which is renamed onto `destination` once every entry has been written and checked;
    /// on any failure (or cancellation) that directory is removed and `destination` is left
    /// as it was. Entries are extracted by up to `ExtractOptions.concurrency` threads
    /// (0: one per active core).
    ///
    /// - Parameters:
    ///   - archive: The ZIP file.
    ///   - destination: A directory that does not exist or is empty; its parent is created if needed.
    ///   - options: Password, limits, symlink policy, concurrency, and an optional file hasher
    ///     whose digest of each file's bytes is reported in `ExtractionReport.File.digest`
    ///     (with `ExtractOptions.trustsRecordedDigests`, the SHA-256 the central directory
    ///     records for an entry is reported instead of hashing it again).
    ///   - progress: Called after each entry, from worker threads.
    /// - Returns: The files (in archive order), directories and symlinks written.
    /// - Throws: `HotUpdateError` (see the type's documentation); `.invalidArgument` when the
    ///   destination exists and is not empty; `.fileSystem` when writing fails; `.cancelled`.
    ///
    /// ```swift
    /// let report = try await ZipUnarchiver().extract(zip, to: dir, options: ExtractOptions(), progress: { p in
    ///     print("\(p.entriesCompleted)/\(p.entriesTotal)")
    /// })
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
            let plan = try ZipArchivePlan.make(file, options: options)
            for entry in plan.entries where entry.kind == .file {
                try EntryDataReader.checkReadable(
                    entry.record,
                    name: entry.name,
                    archive: name,
                    hasPassword: options.password != nil
                )
            }
            return plan
        } run: { file, plan, partial, state, workers in
            // Largest first, so one big file does not finish alone while the other workers idle.
            var fileIndices = plan.entries.indices.filter { plan.entries[$0].kind == .file }
                .sorted { plan.entries[$0].record.uncompressedSize > plan.entries[$1].record.uncompressedSize }
            // A large stored file that needs no hashing in order is copied by every worker at once.
            let sliced = fileIndices.prefix { index in
                let entry = plan.entries[index]
                return StoredSlices.applies(to: entry.record, workers: workers)
                    && (options.fileHasher == nil || Self.trustedDigest(entry.record, options) != nil)
            }
            for index in sliced {
                let entry = plan.entries[index]
                // The recorded digest stands for the file only when the hasher computes SHA-256.
                var digest: Digest?
                if let make = options.fileHasher {
                    guard let hasher = try? make(), hasher.algorithm == .sha256 else { break }
                    digest = Self.trustedDigest(entry.record, options)
                }
                guard
                    await StoredSlices.copy(
                        entry.record,
                        name: entry.name,
                        path: entry.path,
                        mode: entry.mode,
                        file: file,
                        partial: partial,
                        state: state,
                        workers: workers
                    )
                else { return }
                let record = ExtractionReport.File(
                    path: entry.path,
                    size: Int64(entry.record.uncompressedSize),
                    digest: digest
                )
                state.finished(file: (index, record))
                fileIndices.removeFirst()
            }
            let remaining = fileIndices
            await BlockingThreads.run(count: min(workers, remaining.count)) { _ in
                Self.work(
                    file: file,
                    plan: plan,
                    fileIndices: remaining,
                    partial: partial,
                    options: options,
                    state: state
                )
            }
        }
    }

    /// The SHA-256 `record` carries, when the options trust recorded digests.
    private static func trustedDigest(_ record: ZipEntryRecord, _ options: ExtractOptions) -> Digest? {
        guard options.trustsRecordedDigests, let bytes = record.sha256 else { return nil }
        return try? Digest(algorithm: .sha256, bytes: bytes)
    }

    /// One worker: takes files until none is left or the extraction stops.
    private static func work(
        file: ReadOnlyFile,
        plan: ZipArchivePlan,
        fileIndices: [Int],
        partial: PartialDirectory,
        options: ExtractOptions,
        state: ExtractionState
    ) {
        let reader = EntryDataReader(file: file, password: options.password)
        while let slot = state.claim(of: fileIndices.count) {
            let index = fileIndices[slot]
            let entry = plan.entries[index]
            do {
                let fd = try partial.createFile(entry.path, mode: entry.mode)
                var open = true
                defer { if open { close(fd) } }
                // A digest the verified archive records spares hashing the file again.
                let created = try options.fileHasher?()
                let recorded = created?.algorithm == .sha256 ? Self.trustedDigest(entry.record, options) : nil
                let hasher = recorded == nil ? created : nil
                let path = entry.path
                try reader.read(
                    entry.record,
                    name: entry.name,
                    isCancelled: { state.isStopping },
                    consume: { chunk in
                        try state.account(chunk.count, entry: path)
                        hasher?.update(chunk)
                        try writeAll(fd, chunk, path: partial.path(path))
                    }
                )
                open = false
                guard close(fd) == 0 else {
                    throw ArchiveError.system("closing", path: partial.path(path), errno: errno)
                }
                let record = ExtractionReport.File(
                    path: entry.path,
                    size: Int64(entry.record.uncompressedSize),
                    digest: recorded ?? hasher?.finalize()
                )
                state.finished(file: (index, record))
            } catch {
                state.fail(HotUpdateError.wrap(error, as: .fileSystem, "extracting '\(entry.name)'"))
                return
            }
        }
    }
}
