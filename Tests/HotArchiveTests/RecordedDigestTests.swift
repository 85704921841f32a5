import Foundation
import HotArchive
import HotCore
import HotTestServers
import HotTesting
import Testing

/// Counts the bytes fed to the hashers of one test (each test its own, as suites run in parallel).
final class ByteCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var fed = 0

    /// Adds `bytes` to the count.
    func add(_ bytes: Int) { lock.withLock { fed += bytes } }

    /// Bytes counted since the last call, and the count reset.
    func take() -> Int {
        lock.withLock {
            defer { fed = 0 }
            return fed
        }
    }
}

/// A SHA-256 hasher (FakeVerifier's lanes, named SHA-256) that counts the bytes it is fed,
/// to tell a file that was hashed from one whose recorded digest was taken.
final class CountingHasher: DigestHasher {
    private let counter: ByteCounter
    private let inner: any DigestHasher

    init(_ counter: ByteCounter) throws {
        self.counter = counter
        inner = try FakeVerifier().makeHasher(for: .sha256)
    }

    var algorithm: Digest.Algorithm { inner.algorithm }

    func update(_ bytes: UnsafeRawBufferPointer) {
        counter.add(bytes.count)
        inner.update(bytes)
    }

    func finalize() -> Digest { inner.finalize() }
}

/// ZipWriter records each file's SHA-256 in the central directory when given a hasher;
/// ZipUnarchiver reports those digests instead of hashing again only when told to trust
/// them, and still checks every entry's CRC-32.
@Suite(.serialized) struct RecordedDigestTests {
    private static func sha256(of url: URL) throws -> Digest {
        try FakeVerifier().digest(of: try Data(contentsOf: url), using: .sha256)
    }

    private static func packWithDigests(_ scratch: Scratch) throws -> (source: URL, archive: URL) {
        let source = scratch.path("src")
        try Trees.makeMixed(at: source, largeBytes: 3_000_000)
        let archive = scratch.path("pkg.zip")
        try ZipWriter.write(
            directory: source,
            to: archive,
            options: ZipWriter.Options(fileHasher: { try FakeVerifier().makeHasher(for: .sha256) })
        )
        return (source, archive)
    }

    @Test func trustedRecordedDigestsAreReportedWithoutHashing() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (source, archive) = try Self.packWithDigests(scratch)
        let counter = ByteCounter()
        var options = ExtractOptions(fileHasher: { try CountingHasher(counter) }, trustsRecordedDigests: true)
        let trusted = try await ZipUnarchiver().extract(archive, to: scratch.path("trusted"), options: options)
        #expect(counter.take() == 0, "a file was hashed although its digest was recorded")
        #expect(trusted.files.count == 8)
        for file in trusted.files {
            #expect(file.digest == (try Self.sha256(of: source.appendingPathComponent(file.path))), "\(file.path)")
        }
        try Trees.expectEqual(scratch.path("trusted"), source)

        // Not trusted: every file is hashed, to the same digests.
        options.trustsRecordedDigests = false
        let hashed = try await ZipUnarchiver().extract(archive, to: scratch.path("hashed"), options: options)
        #expect(counter.take() == Int(hashed.totalBytes))
        #expect(hashed.files.map(\.digest) == trusted.files.map(\.digest))
    }

    @Test func archiveWithoutRecordedDigestsIsHashed() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = scratch.path("src")
        try Trees.makeMixed(at: source, largeBytes: 300_000)
        let archive = scratch.path("plain.zip")
        try ZipWriter.write(directory: source, to: archive)
        let counter = ByteCounter()
        let options = ExtractOptions(fileHasher: { try CountingHasher(counter) }, trustsRecordedDigests: true)
        let report = try await ZipUnarchiver().extract(archive, to: scratch.path("out"), options: options)
        #expect(counter.take() == Int(report.totalBytes))
        for file in report.files {
            #expect(file.digest == (try Self.sha256(of: source.appendingPathComponent(file.path))), "\(file.path)")
        }
    }

    @Test func otherReadersSkipTheField() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (source, archive) = try Self.packWithDigests(scratch)
        let test = try await Subprocess.run("unzip", ["-t", archive.path])
        #expect(test.status == 0, "\(test.stdout)\(test.stderr)")
        #expect(test.stdout.contains("No errors detected"))
        let out = scratch.path("bsdtar")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let bsdtar = try await Subprocess.run("bsdtar", ["-xf", archive.path, "-C", out.path])
        #expect(bsdtar.status == 0, "\(bsdtar.stderr)")
        try Trees.expectEqual(out, source)
    }

    @Test func aDamagedEntryIsRefusedEvenWithTrustedDigests() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (source, archive) = try Self.packWithDigests(scratch)
        // Flip a byte inside the stored data of the photo (random bytes, so stored as they are).
        var bytes = try Data(contentsOf: archive)
        let photo = try Data(contentsOf: source.appendingPathComponent("img/photo.jpg"))
        let found = try #require(bytes.range(of: photo.prefix(64)))
        bytes[found.lowerBound + 1_000] ^= 0x5A
        try bytes.write(to: archive)
        let counter = ByteCounter()
        let options = ExtractOptions(fileHasher: { try CountingHasher(counter) }, trustsRecordedDigests: true)
        let destination = scratch.path("out")
        let error = await #expect(throws: HotUpdateError.self) {
            _ = try await ZipUnarchiver().extract(archive, to: destination, options: options)
        }
        #expect(error?.code == .checksumMismatch, "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: destination.path))
    }
}

/// A stand-in for SHA-256 quick enough for tens of megabytes in a debug build: 32 bytes from
/// four 64-bit lanes mixed word by word (not a cryptographic hash; any deterministic digest
/// of the right length serves these tests).
final class QuickHasher: DigestHasher {
    private var lanes: [UInt64] = [1, 2, 3, 4]
    private var count = 0
    private var tail: [UInt8] = []
    var algorithm: Digest.Algorithm { .sha256 }

    func update(_ bytes: UnsafeRawBufferPointer) {
        tail += bytes
        var offset = 0
        tail.withUnsafeBytes { raw in
            while offset + 8 <= raw.count {
                let word = raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                let lane = (count >> 3) & 3
                lanes[lane] = (lanes[lane] ^ word) &* 0x9E37_79B9_7F4A_7C15
                offset += 8
                count += 8
            }
        }
        tail.removeFirst(offset)
    }

    func finalize() -> Digest {
        var bytes: [UInt8] = []
        for (index, lane) in lanes.enumerated() {
            let mixed =
                lane ^ UInt64(count + tail.count) &* UInt64(index + 1) ^ UInt64(tail.reduce(0) { $0 &* 31 &+ Int($1) })
            bytes += (0..<8).map { UInt8(truncatingIfNeeded: mixed >> (8 * UInt64($0))) }
        }
        // 32 bytes, the length of a SHA-256.
        return try! Digest(algorithm: .sha256, bytes: bytes)
    }

    static func digest(of data: Data) -> Digest {
        let hasher = QuickHasher()
        data.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }
}

/// Counts the bytes fed to it, digesting with ``QuickHasher``.
final class QuickCountingHasher: DigestHasher {
    private let counter: ByteCounter
    private let inner = QuickHasher()
    init(_ counter: ByteCounter) { self.counter = counter }
    var algorithm: Digest.Algorithm { .sha256 }
    func update(_ bytes: UnsafeRawBufferPointer) {
        counter.add(bytes.count)
        inner.update(bytes)
    }
    func finalize() -> Digest { inner.finalize() }
}

/// A large stored file is copied by every worker at once when no hasher needs its bytes in
/// order; its CRC-32 is checked all the same, from the slices' CRCs combined.
@Suite(.serialized) struct StoredSliceTests {
    /// A tree with one 40 MB file of random bytes (stored: deflate cannot shrink it) and a few small ones.
    private static func packLarge(_ scratch: Scratch, digests: Bool) throws -> (source: URL, archive: URL, big: Data) {
        let source = scratch.path("src")
        try Trees.makeMixed(at: source, largeBytes: 200_000)
        let random = try #require(FileHandle(forReadingAtPath: "/dev/urandom"))
        let big = random.readData(ofLength: 40_000_123)
        try random.close()
        try big.write(to: source.appendingPathComponent("img/movie.bin"))
        let archive = scratch.path("large.zip")
        let options =
            digests
            ? ZipWriter.Options(fileHasher: { QuickHasher() }) : ZipWriter.Options()
        try ZipWriter.write(directory: source, to: archive, options: options)
        return (source, archive, big)
    }

    @Test func aLargeStoredFileIsCopiedWholeByTwoWorkers() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (source, archive, big) = try Self.packLarge(scratch, digests: true)
        let counter = ByteCounter()
        let trusted = ExtractOptions(
            concurrency: 2,
            fileHasher: { QuickCountingHasher(counter) },
            trustsRecordedDigests: true
        )
        let report = try await ZipUnarchiver().extract(archive, to: scratch.path("trusted"), options: trusted)
        #expect(counter.take() == 0)
        try Trees.expectEqual(scratch.path("trusted"), source)
        let movie = try #require(report.files.first { $0.path == "img/movie.bin" })
        #expect(movie.size == Int64(big.count))
        #expect(movie.digest == QuickHasher.digest(of: big))

        // No hasher at all: sliced too; a hasher that must see the bytes: read in order, hashed.
        _ = try await ZipUnarchiver().extract(
            archive,
            to: scratch.path("plain"),
            options: ExtractOptions(concurrency: 2)
        )
        try Trees.expectEqual(scratch.path("plain"), source)
        let hashed = try await ZipUnarchiver().extract(
            archive,
            to: scratch.path("hashed"),
            options: ExtractOptions(concurrency: 2, fileHasher: { QuickCountingHasher(counter) })
        )
        #expect(counter.take() == Int(hashed.totalBytes))
        #expect(hashed.files.map(\.digest) == report.files.map(\.digest))
    }

    @Test func aDamagedSliceFailsTheWholeExtraction() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (_, archive, big) = try Self.packLarge(scratch, digests: true)
        var bytes = try Data(contentsOf: archive)
        let found = try #require(bytes.range(of: big.prefix(64)))
        bytes[found.lowerBound + 25_000_000] ^= 0x01  // in the fourth 8 MiB slice
        try bytes.write(to: archive)
        let destination = scratch.path("out")
        let counter = ByteCounter()
        let options = ExtractOptions(
            concurrency: 2,
            fileHasher: { QuickCountingHasher(counter) },
            trustsRecordedDigests: true
        )
        let error = await #expect(throws: HotUpdateError.self) {
            _ = try await ZipUnarchiver().extract(archive, to: destination, options: options)
        }
        #expect(error?.code == .checksumMismatch, "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path)
        #expect(!leftovers.contains { $0.contains(".partial-") }, "\(leftovers)")
    }

    @Test func theByteLimitHoldsForLargeStoredFiles() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (_, archive, _) = try Self.packLarge(scratch, digests: false)
        let destination = scratch.path("out")
        let options = ExtractOptions(maxTotalBytes: 30_000_000, compressionRatioFloor: 1 << 30, concurrency: 2)
        let error = await #expect(throws: HotUpdateError.self) {
            _ = try await ZipUnarchiver().extract(archive, to: destination, options: options)
        }
        #expect(error?.code == .limitExceeded, "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: destination.path))
    }
}
