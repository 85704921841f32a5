import Foundation
import HotArchive
import HotCore
import HotTesting
import Testing

/// A SHA-256 hasher (FakeVerifier's lanes, named SHA-256) that counts the bytes it is fed,
/// to tell a file that was hashed from one whose recorded digest was taken.
final class CountingHasher: DigestHasher {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var fed = 0
    private let inner: any DigestHasher

    init() throws { inner = try FakeVerifier().makeHasher(for: .sha256) }

    var algorithm: Digest.Algorithm { inner.algorithm }

    func update(_ bytes: UnsafeRawBufferPointer) {
        Self.lock.withLock { Self.fed += bytes.count }
        inner.update(bytes)
    }

    func finalize() -> Digest { inner.finalize() }

    /// Bytes fed to every counting hasher since the last call, and the count reset.
    static func takeFed() -> Int {
        lock.withLock {
            defer { fed = 0 }
            return fed
        }
    }
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
        _ = CountingHasher.takeFed()
        var options = ExtractOptions(fileHasher: { try CountingHasher() }, trustsRecordedDigests: true)
        let trusted = try await ZipUnarchiver().extract(archive, to: scratch.path("trusted"), options: options)
        #expect(CountingHasher.takeFed() == 0, "a file was hashed although its digest was recorded")
        #expect(trusted.files.count == 8)
        for file in trusted.files {
            #expect(file.digest == (try Self.sha256(of: source.appendingPathComponent(file.path))), "\(file.path)")
        }
        try Trees.expectEqual(scratch.path("trusted"), source)

        // Not trusted: every file is hashed, to the same digests.
        options.trustsRecordedDigests = false
        let hashed = try await ZipUnarchiver().extract(archive, to: scratch.path("hashed"), options: options)
        #expect(CountingHasher.takeFed() == Int(hashed.totalBytes))
        #expect(hashed.files.map(\.digest) == trusted.files.map(\.digest))
    }

    @Test func archiveWithoutRecordedDigestsIsHashed() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = scratch.path("src")
        try Trees.makeMixed(at: source, largeBytes: 300_000)
        let archive = scratch.path("plain.zip")
        try ZipWriter.write(directory: source, to: archive)
        _ = CountingHasher.takeFed()
        let options = ExtractOptions(fileHasher: { try CountingHasher() }, trustsRecordedDigests: true)
        let report = try await ZipUnarchiver().extract(archive, to: scratch.path("out"), options: options)
        #expect(CountingHasher.takeFed() == Int(report.totalBytes))
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
        let options = ExtractOptions(fileHasher: { try CountingHasher() }, trustsRecordedDigests: true)
        let destination = scratch.path("out")
        let error = await #expect(throws: HotUpdateError.self) {
            _ = try await ZipUnarchiver().extract(archive, to: destination, options: options)
        }
        #expect(error?.code == .checksumMismatch, "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: destination.path))
    }
}
