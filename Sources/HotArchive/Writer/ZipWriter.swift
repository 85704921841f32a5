import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a directory as a ZIP archive, deterministically: the publisher's side
/// of a package (`hot pack`).
///
/// The same tree always gives the same bytes: entries sorted by path (byte-wise),
/// directories included as `name/` entries, one fixed timestamp for every entry
/// (1980-01-01 00:00 unless ``Options/modificationDate`` says otherwise), Unix
/// permissions recorded ("version made by" Unix), names flagged UTF-8. Files are
/// deflated with zlib and stored instead when deflate does not shrink them
/// (images, media); zip64 records are written only when a size, an offset or the
/// entry count needs them. Local headers carry the real sizes and CRC (no data
/// descriptors). Given ``Options/fileHasher``, the central directory also records each
/// file's SHA-256, which clients that checked the archive take instead of hashing again.
/// Given ``Options/encryption``, files and symlinks are encrypted with WinZip AES or
/// ZipCrypto (see ``Encryption``), by the compressing workers.
///
/// Files are streamed (256 KiB at a time) and compressed in parallel, each worker
/// into an unlinked spill file beside the archive; the archive is then assembled
/// sequentially into a temporary file beside the target, flushed to disk and
/// renamed onto it, so readers never see half an archive.
///
/// It is synchronous: it blocks the calling thread while it works (worker threads
/// of its own do the compression). Call it from a command-line tool or a detached task.
///
/// ```swift
/// let summary = try ZipWriter.write(directory: build, to: output.appendingPathComponent("fonts-1.2.0.zip"))
/// print(summary.fileCount, summary.archiveBytes)
/// ```
public enum ZipWriter {
    /// How ``ZipWriter`` treats symbolic links in the source directory.
    public struct SymlinkHandling: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        /// A symlink fails the packing with `HotUpdateError.Code.invalidArgument`. The default.
        public static let refuse = SymlinkHandling("refuse")
        /// Symlinks are stored as links (mode `S_IFLNK`, the target as data).
        public static let store = SymlinkHandling("store")
        public var description: String { name }
    }

    /// How ``ZipWriter`` encrypts the entries of an archive: every file and symlink with one
    /// password, each WinZip AES entry under a salt of its own drawn from the system's
    /// cryptographically secure generator. Directories are not encrypted (no tool does).
    ///
    /// WinZip AES entries are written as 7-Zip writes them: AE-2 (the CRC-32 field is 0, so
    /// nothing about a file's contents shows outside the encrypted bytes; the authentication
    /// code vouches for them), vendor version 2, "version needed" 5.1. Names, sizes and the
    /// listing stay readable, as in every ZIP file. The per-file SHA-256 of
    /// ``Options/fileHasher`` is not recorded in an encrypted archive: it would let anyone
    /// confirm a guess of a file's contents.
    ///
    /// ```swift
    /// let options = ZipWriter.Options(encryption: .init(.aes256, password: "correct horse"))
    /// try ZipWriter.write(directory: pack, to: zip, options: options)
    /// ```
    public struct Encryption: Sendable, Hashable {
        /// The cipher.
        public struct Method: Hashable, Sendable, CustomStringConvertible {
            private let name: String
            /// The WinZip AES strength, nil for ZipCrypto.
            let strength: WinZipAES.Strength?
            private init(_ name: String, _ strength: WinZipAES.Strength?) {
                self.name = name
                self.strength = strength
            }
            /// WinZip AES with a 128-bit key.
            public static let aes128 = Method("aes128", .aes128)
            /// WinZip AES with a 192-bit key.
            public static let aes192 = Method("aes192", .aes192)
            /// WinZip AES with a 256-bit key: the default.
            public static let aes256 = Method("aes256", .aes256)
            /// PKWARE's traditional encryption, which every unzip reads and anyone can break
            /// with 12 known bytes of a file (a known-plaintext attack): only for readers that
            /// know nothing else.
            public static let zipCrypto = Method("zipcrypto", nil)
            /// Every method, strongest first.
            public static let all: [Method] = [.aes256, .aes192, .aes128, .zipCrypto]
            /// `aes256`, `aes192`, `aes128` or `zipcrypto`, as `hot pack --encryption` spells them.
            public var description: String { name }
        }

        /// The cipher.
        public var method: Method
        /// The password; its UTF-8 bytes key the cipher.
        public var password: String

        /// Creates an encryption setting.
        ///
        /// - Parameters:
        ///   - method: The cipher; WinZip AES-256 unless said otherwise.
        ///   - password: The password; must not be empty.
        public init(_ method: Method = .aes256, password: String) {
            self.method = method
            self.password = password
        }
    }

    /// Options for ``ZipWriter/write(directory:to:options:)``.
    public struct Options: Sendable {
        /// zlib compression level, 0…9. 0 stores every file.
        public var compressionLevel: Int
        /// The timestamp recorded for every entry (UTC); nil means 1980-01-01 00:00.
        public var modificationDate: Date?
        /// What to do with symbolic links.
        public var symlinks: SymlinkHandling
        /// How many files are compressed at once; 0 means one per core.
        public var concurrency: Int
        /// When set to a SHA-256 hasher, every file's SHA-256 is recorded in the central
        /// directory (an extra field other readers skip), computed while the file is read for
        /// compressing. A client that has checked the archive against a signed manifest then
        /// takes these digests instead of hashing every unpacked file again
        /// (`ExtractOptions.trustsRecordedDigests`). Hashers of other algorithms are ignored.
        /// Not recorded when ``encryption`` is set.
        public var fileHasher: (@Sendable () throws -> any DigestHasher)?
        /// Encrypts every file and symlink with a password; nil writes a plain archive.
        public var encryption: Encryption?

        /// Creates options.
        public init(
            compressionLevel: Int = 6,
            modificationDate: Date? = nil,
            symlinks: SymlinkHandling = .refuse,
            concurrency: Int = 0,
            fileHasher: (@Sendable () throws -> any DigestHasher)? = nil,
            encryption: Encryption? = nil
        ) {
            self.compressionLevel = compressionLevel
            self.modificationDate = modificationDate
            self.symlinks = symlinks
            self.concurrency = concurrency
            self.fileHasher = fileHasher
            self.encryption = encryption
        }
    }

    /// What was written.
    public struct Summary: Sendable, Hashable {
        /// Regular files stored.
        public var fileCount: Int
        /// Directory entries stored.
        public var directoryCount: Int
        /// Symlinks stored.
        public var symlinkCount: Int
        /// The files' bytes before compression.
        public var uncompressedBytes: Int64
        /// The archive's size.
        public var archiveBytes: Int64
        /// Whether zip64 records were needed.
        public var usesZip64: Bool
    }

    /// Packs `directory` into the ZIP file `archive`.
    ///
    /// - Parameters:
    ///   - directory: The tree to pack; its contents become the archive's top level.
    ///   - archive: The file to write; replaced atomically if it exists. When it lies inside
    ///     `directory` it is left out of the archive.
    ///   - options: Compression level, timestamp, symlink handling, concurrency.
    /// - Returns: Counts and sizes.
    /// - Throws: `HotUpdateError`: `.invalidArgument` (not a directory, a symlink when they
    ///   are refused, a device or FIFO, a name that is not UTF-8, a level out of range, an
    ///   empty password), `.fileSystem` (reading or writing failed, a file changed while being
    ///   packed), `.unsupportedEncryption` (WinZip AES in a build without a crypto library).
    ///
    /// ```swift
    /// try ZipWriter.write(directory: site, to: zip, options: .init(compressionLevel: 9))
    /// ```
    @discardableResult
    public static func write(directory: URL, to archive: URL, options: Options = Options()) throws -> Summary {
        guard (0...9).contains(options.compressionLevel) else {
            throw HotUpdateError(
                .invalidArgument,
                "compression level \(options.compressionLevel) is not in 0…9"
            )
        }
        if let encryption = options.encryption {
            guard !encryption.password.isEmpty else {
                throw HotUpdateError(.invalidArgument, "the encryption password is empty")
            }
            if encryption.method.strength != nil, let missing = CipherBackend.missing {
                throw HotUpdateError(.unsupportedEncryption, "cannot write WinZip AES: \(missing)")
            }
        }
        let root = directory.standardizedFileURL.path
        let target = archive.standardizedFileURL
        let temporary = target.deletingLastPathComponent()
            .appendingPathComponent(".\(target.lastPathComponent).tmp-\(UUID().uuidString)").path
        let items = try SourceTree.scan(
            root,
            storeSymlinks: options.symlinks == .store,
            skipping: [target.path, temporary]
        )
        let dos = DOSTimestamp(options.modificationDate)

        let cores = options.concurrency > 0 ? options.concurrency : ProcessInfo.processInfo.activeProcessorCount
        let compressed = try compressAll(
            items,
            root: root,
            level: Int32(options.compressionLevel),
            workers: max(1, cores),
            spillDirectory: target.deletingLastPathComponent().path,
            hasher: options.encryption == nil ? options.fileHasher : nil,
            encryption: options.encryption
        )

        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ArchiveError.system("creating", path: temporary, errno: errno) }
        var closed = false
        do {
            let output = BufferedOutput(descriptor: fd, path: temporary)
            var assembler = ArchiveAssembler(output: output, timestamp: dos)
            for (index, item) in items.enumerated() {
                try assembler.add(item, data: compressed.results[index], spills: compressed.spills)
            }
            let usesZip64 = try assembler.finish()
            try output.flush()
            guard fsync(fd) == 0 else { throw ArchiveError.system("flushing", path: temporary, errno: errno) }
            closed = true
            guard close(fd) == 0 else { throw ArchiveError.system("closing", path: temporary, errno: errno) }
            guard rename(temporary, target.path) == 0 else {
                throw ArchiveError.system("renaming onto", path: target.path, errno: errno)
            }
            var summary = Summary(
                fileCount: 0,
                directoryCount: 0,
                symlinkCount: 0,
                uncompressedBytes: 0,
                archiveBytes: Int64(output.written),
                usesZip64: usesZip64
            )
            for item in items {
                switch item.kind {
                case .file:
                    summary.fileCount += 1
                    summary.uncompressedBytes += item.size
                case .directory: summary.directoryCount += 1
                case .symlink: summary.symlinkCount += 1
                }
            }
            return summary
        } catch {
            if !closed { close(fd) }
            unlink(temporary)
            throw HotUpdateError.wrap(error, as: .fileSystem, "writing '\(target.path)'")
        }
    }

    /// The compressed form of every item, spread over per-worker spill files.
    private struct Compressed {
        var results: [Deflater.Result?]
        var spills: [Deflater]
    }

    /// Compresses files (and symlink targets) on `workers` threads.
    private static func compressAll(
        _ items: [SourceItem],
        root: String,
        level: Int32,
        workers: Int,
        spillDirectory: String,
        hasher: (@Sendable () throws -> any DigestHasher)?,
        encryption: Encryption?
    ) throws -> Compressed {
        let work = items.indices.filter {
            if case .directory = items[$0].kind { return false }
            return true
        }
        let count = min(workers, max(1, work.count))
        var deflaters: [Deflater] = []
        for worker in 0..<count {
            let path = spillDirectory + "/.hot-pack-spill-\(UUID().uuidString)-\(worker)"
            let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw ArchiveError.system("creating spill file", path: path, errno: errno) }
            unlink(path)  // The descriptor keeps it alive; nothing is left behind on any exit.
            deflaters.append(Deflater(level: level, spill: fd, spillPath: path))
        }
        let shared = CompressionQueue(itemCount: items.count, work: work)
        let tasks = deflaters
        let threads = DispatchGroup()
        for (worker, deflater) in tasks.enumerated() {
            threads.enter()
            let thread = Thread { [deflater] in
                defer { threads.leave() }
                while let index = shared.claim() {
                    do {
                        let item = items[index]
                        var result: Deflater.Result
                        if case .symlink(let target) = item.kind {
                            result = try deflater.addStored(Array(target.utf8))
                        } else {
                            result = try deflater.add(
                                path: root + "/" + item.path,
                                expectedSize: item.size,
                                hasher: try hasher?()
                            )
                        }
                        if let encryption { try deflater.encrypt(&result, with: encryption) }
                        shared.store(index: index, result: result, worker: worker)
                    } catch {
                        shared.fail(HotUpdateError.wrap(error, as: .fileSystem, "packing '\(items[index].path)'"))
                        return
                    }
                }
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
        threads.wait()
        if let failure = shared.failure { throw failure }
        return Compressed(results: shared.results, spills: deflaters)
    }
}

/// Hands out work to compression threads and collects what they produce.
private final class CompressionQueue: Sendable {
    private struct State {
        var next = 0
        var stored: [Deflater.Result?]
        var error: HotUpdateError?
    }

    private let work: [Int]
    private let state: Locked<State>

    init(itemCount: Int, work: [Int]) {
        self.work = work
        state = Locked(State(stored: Array(repeating: nil, count: itemCount)))
    }

    func claim() -> Int? {
        state.withLock { state in
            guard state.error == nil, state.next < work.count else { return nil }
            state.next += 1
            return work[state.next - 1]
        }
    }

    func store(index: Int, result: Deflater.Result, worker: Int) {
        var tagged = result
        tagged.worker = worker
        state.withLock { $0.stored[index] = tagged }
    }

    func fail(_ failure: HotUpdateError) {
        state.withLock { state in
            if state.error == nil { state.error = failure }
        }
    }

    var failure: HotUpdateError? { state.withLock { $0.error } }

    var results: [Deflater.Result?] { state.withLock { $0.stored } }
}

/// An MS-DOS date and time, as ZIP headers record them.
struct DOSTimestamp {
    var time: UInt16
    var date: UInt16

    /// 1980-01-01 00:00 when `date` is nil; else `date` in UTC, clamped to 1980…2107.
    init(_ date: Date?) {
        guard let date else {
            time = 0
            self.date = (1 << 5) | 1
            return
        }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let year = min(max((parts.year ?? 1980), 1980), 2107)
        time = UInt16((parts.hour ?? 0) << 11 | (parts.minute ?? 0) << 5 | (parts.second ?? 0) / 2)
        self.date = UInt16((year - 1980) << 9 | (parts.month ?? 1) << 5 | (parts.day ?? 1))
    }
}
