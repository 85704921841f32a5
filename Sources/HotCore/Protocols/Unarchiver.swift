import Foundation

/// Lists and extracts archives.
///
/// The contract every implementation keeps, whatever the archive says:
/// - nothing is ever written outside the destination;
/// - extraction is all or nothing: the archive is unpacked into a sibling
///   staging directory and moved into place only when every entry succeeded;
///   on failure the destination is left exactly as it was;
/// - the limits in ``ExtractOptions`` are enforced while inflating, not trusted
///   from headers;
/// - errors are ``HotUpdateError``s naming the entry and the reason.
///
/// Implementations: `ZipUnarchiver` and `LibArchiveUnarchiver` (in `HotArchive`).
///
/// ```swift
/// let report = try await unarchiver.extract(zip, to: destination, options: ExtractOptions())
/// print(report.files.count, report.totalBytes)
/// ```
public protocol Unarchiver: Sendable {
    /// Lists the entries of an archive without extracting anything.
    ///
    /// - Throws: ``HotUpdateError`` (``HotUpdateError/Code/notAnArchive``,
    ///   ``HotUpdateError/Code/corruptArchive``, ``HotUpdateError/Code/limitExceeded`` …).
    func entries(of archive: URL, options: ExtractOptions) async throws -> [ArchiveEntry]

    /// Extracts an archive into `destination`.
    ///
    /// - Parameters:
    ///   - archive: The archive file.
    ///   - destination: A directory that does not exist yet or is empty. It is created.
    ///   - options: Password, limits and policies.
    ///   - progress: Called as entries complete, from any thread; keep it cheap.
    /// - Returns: What was written.
    /// - Throws: ``HotUpdateError``; the destination is then as it was before the call.
    func extract(
        _ archive: URL,
        to destination: URL,
        options: ExtractOptions,
        progress: (@Sendable (ExtractionReport.Progress) -> Void)?
    ) async throws -> ExtractionReport
}

extension Unarchiver {
    /// Extracts with no progress reporting.
    public func extract(
        _ archive: URL,
        to destination: URL,
        options: ExtractOptions = ExtractOptions()
    ) async throws
        -> ExtractionReport
    {
        try await extract(archive, to: destination, options: options, progress: nil)
    }
}

/// One entry of an archive, as listed.
public struct ArchiveEntry: Sendable, Hashable {
    /// The entry's path inside the archive, `/`-separated, as decoded.
    public var path: String
    /// What the entry is.
    public var kind: ArchiveEntry.Kind
    /// The uncompressed size the archive declares.
    public var uncompressedSize: Int64
    /// The compressed size the archive declares.
    public var compressedSize: Int64
    /// The CRC-32 the archive declares, when the format has one.
    public var crc32: UInt32?
    /// POSIX permission bits, when the archive records them.
    public var permissions: UInt16?
    /// Whether the entry is encrypted.
    public var isEncrypted: Bool
    /// The link target of a symlink.
    public var linkTarget: String?

    /// Creates an entry description.
    public init(
        path: String,
        kind: ArchiveEntry.Kind,
        uncompressedSize: Int64,
        compressedSize: Int64,
        crc32: UInt32? = nil,
        permissions: UInt16? = nil,
        isEncrypted: Bool = false,
        linkTarget: String? = nil
    ) {
        self.path = path
        self.kind = kind
        self.uncompressedSize = uncompressedSize
        self.compressedSize = compressedSize
        self.crc32 = crc32
        self.permissions = permissions
        self.isEncrypted = isEncrypted
        self.linkTarget = linkTarget
    }
}

/// Password, limits and policies for listing and extracting.
public struct ExtractOptions: Sendable {
    /// The password for encrypted entries.
    public var password: String?
    /// The most bytes all entries may inflate to together.
    public var maxTotalBytes: Int64
    /// The most entries an archive may have.
    public var maxEntries: Int
    /// The longest entry path, in UTF-8 bytes.
    public var maxNameLength: Int
    /// The highest uncompressed-to-compressed ratio an entry may have, checked for
    /// entries larger than ``compressionRatioFloor``.
    public var maxCompressionRatio: Double
    /// Entries that inflate to fewer bytes than this are not held to ``maxCompressionRatio``.
    public var compressionRatioFloor: Int64
    /// What to do with symbolic links.
    public var symlinks: ExtractOptions.SymlinkPolicy
    /// How many entries may be extracted at once; 0 means one per core.
    public var concurrency: Int
    /// When set, every extracted file is hashed while it is written and the digest
    /// reported in ``ExtractionReport/File/digest``.
    public var fileHasher: (@Sendable () throws -> any DigestHasher)?
    /// Whether a SHA-256 the archive records for an entry may stand for hashing the file
    /// again, when ``fileHasher`` computes SHA-256 (HotArchive's `ZipWriter` records one per
    /// file when given a hasher; an unarchiver that reads none hashes as usual).
    ///
    /// Set it only for an archive whose own digest has been checked against a signed
    /// manifest: the recorded digests are then as trustworthy as the archive's bytes. Each
    /// entry's CRC-32 and size are still checked while it is inflated, so the bytes written
    /// are the bytes that were packed and hashed; an entry whose CRC-32 fails is refused
    /// as always.
    public var trustsRecordedDigests: Bool

    /// Creates options. The defaults admit any real resource package and refuse bombs.
    public init(
        password: String? = nil,
        maxTotalBytes: Int64 = 4 << 30,
        maxEntries: Int = 200_000,
        maxNameLength: Int = 1024,
        maxCompressionRatio: Double = 1_000,
        compressionRatioFloor: Int64 = 1 << 20,
        symlinks: ExtractOptions.SymlinkPolicy = .refuse,
        concurrency: Int = 0,
        fileHasher: (@Sendable () throws -> any DigestHasher)? = nil,
        trustsRecordedDigests: Bool = false
    ) {
        self.password = password
        self.maxTotalBytes = maxTotalBytes
        self.maxEntries = maxEntries
        self.maxNameLength = maxNameLength
        self.maxCompressionRatio = maxCompressionRatio
        self.compressionRatioFloor = compressionRatioFloor
        self.symlinks = symlinks
        self.concurrency = concurrency
        self.fileHasher = fileHasher
        self.trustsRecordedDigests = trustsRecordedDigests
    }
}

/// What an extraction wrote.
public struct ExtractionReport: Sendable, Hashable {
    /// Regular files written, in archive order.
    public var files: [ExtractionReport.File]
    /// Directories created, relative to the destination.
    public var directories: [String]
    /// Symlinks created, relative to the destination.
    public var symlinks: [String]
    /// The bytes written in all.
    public var totalBytes: Int64
    /// Creates a report.
    public init(files: [ExtractionReport.File], directories: [String], symlinks: [String] = [], totalBytes: Int64) {
        self.files = files
        self.directories = directories
        self.symlinks = symlinks
        self.totalBytes = totalBytes
    }
}

extension ArchiveEntry {
    /// What an archive entry is.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        /// A regular file.
        public static let file = ArchiveEntry.Kind("file")
        /// A directory.
        public static let directory = ArchiveEntry.Kind("directory")
        /// A symbolic link.
        public static let symlink = ArchiveEntry.Kind("symlink")
        /// Anything else (device, FIFO, socket): never created.
        public static let other = ArchiveEntry.Kind("other")
        public var description: String { name }
    }
}

extension ExtractOptions {
    /// How symbolic links in an archive are treated.
    public struct SymlinkPolicy: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        /// Any symlink entry fails the extraction. The default.
        public static let refuse = ExtractOptions.SymlinkPolicy("refuse")
        /// Links whose target stays inside the destination are created; no later entry
        /// may be written through a link.
        public static let allowWithinDestination = ExtractOptions.SymlinkPolicy("allowWithinDestination")
        public var description: String { name }
    }
}

extension ExtractionReport {
    /// One file written by an extraction.
    public struct File: Sendable, Hashable {
        /// The path relative to the destination, `/`-separated.
        public var path: String
        /// The file's size.
        public var size: Int64
        /// The file's digest, when ``ExtractOptions/fileHasher`` was set.
        public var digest: Digest?
        /// Creates a record.
        public init(path: String, size: Int64, digest: Digest? = nil) {
            self.path = path
            self.size = size
            self.digest = digest
        }
    }
}

extension ExtractionReport {
    /// Extraction progress.
    public struct Progress: Sendable, Hashable {
        /// Entries finished.
        public var entriesCompleted: Int
        /// Entries in the archive.
        public var entriesTotal: Int
        /// Bytes written so far.
        public var bytesWritten: Int64
        /// Bytes the archive declares in all.
        public var bytesTotal: Int64
        /// Creates a progress value.
        public init(entriesCompleted: Int, entriesTotal: Int, bytesWritten: Int64, bytesTotal: Int64) {
            self.entriesCompleted = entriesCompleted
            self.entriesTotal = entriesTotal
            self.bytesWritten = bytesWritten
            self.bytesTotal = bytesTotal
        }
    }
}
