import Foundation
import HotArchive
import HotCore
import HotTestServers
import HotTesting
import Testing

/// FNV-1a 64, a hasher independent of any library, to check `fileHasher` plumbing.
final class FNVHasher: DigestHasher {
    static let algorithm = Digest.Algorithm(name: "fnv1a64", byteCount: 8)
    var algorithm: Digest.Algorithm { Self.algorithm }
    private var state: UInt64 = 0xcbf2_9ce4_8422_2325

    func update(_ bytes: UnsafeRawBufferPointer) {
        for byte in bytes {
            state ^= UInt64(byte)
            state = state &* 0x100_0000_01b3
        }
    }

    func finalize() -> Digest {
        let bytes = (0..<8).map { UInt8(truncatingIfNeeded: state >> (56 - 8 * UInt64($0))) }
        // The byte count always matches the algorithm.
        return try! Digest(algorithm: Self.algorithm, bytes: bytes)
    }

    static func digest(of data: Data) -> Digest {
        let hasher = FNVHasher()
        data.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }
}

/// Collects progress reports from any thread.
final class ProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [ExtractionReport.Progress] = []
    func add(_ value: ExtractionReport.Progress) {
        lock.lock()
        values.append(value)
        lock.unlock()
    }
    var all: [ExtractionReport.Progress] {
        lock.lock()
        defer { lock.unlock() }
        return values
    }
}

/// The parts of the ``Unarchiver`` contract beyond refusing hostile input.
@Suite struct ExtractionContractTests {
    private func makeArchive(_ scratch: Scratch) async throws -> (archive: URL, source: URL) {
        let source = scratch.path("src")
        try Trees.makeMixed(at: source, largeBytes: 1_500_000)
        try await Subprocess.check("zip", ["-qr", "../a.zip", "."], in: source)
        return (scratch.path("a.zip"), source)
    }

    @Test(arguments: Backend.allCases)
    func nonEmptyDestinationIsRefusedAndUntouched(_ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (archive, _) = try await makeArchive(scratch)
        let destination = scratch.path("out")
        try FileManager.default.createDirectory(at: destination, withIntermediateDirectories: false)
        try Data("keep me".utf8).write(to: destination.appendingPathComponent("existing.txt"))
        let before = scratch.listing()
        await expectHotError(.invalidArgument) { try await backend.unarchiver.extract(archive, to: destination) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: destination.path) == ["existing.txt"])
        #expect(scratch.listing() == before)
    }

    @Test(arguments: Backend.allCases)
    func emptyDestinationIsReplacedAndMissingParentsCreated(_ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (archive, source) = try await makeArchive(scratch)
        let empty = scratch.path("empty")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: false)
        _ = try await backend.unarchiver.extract(archive, to: empty)
        try Trees.expectEqual(empty, source)
        let nested = scratch.path("deep/er/out")
        _ = try await backend.unarchiver.extract(archive, to: nested)
        try Trees.expectEqual(nested, source)
        #expect(!scratch.listing().contains { $0.contains(".partial-") })
    }

    @Test(arguments: Backend.allCases)
    func missingArchiveIsNotFound(_ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        await expectHotError(.notFound) {
            try await backend.unarchiver.extract(scratch.path("nope.zip"), to: scratch.path("out"))
        }
        #expect(scratch.listing().isEmpty)
    }

    @Test(arguments: Backend.allCases)
    func progressAndDigests(_ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (archive, source) = try await makeArchive(scratch)
        let log = ProgressLog()
        let options = ExtractOptions(concurrency: 3, fileHasher: { FNVHasher() })
        let report = try await backend.unarchiver.extract(
            archive,
            to: scratch.path("out"),
            options: options,
            progress: { log.add($0) }
        )
        let values = log.all
        let entries = try await backend.unarchiver.entries(of: archive, options: ExtractOptions())
        #expect(values.last?.entriesCompleted == entries.count)
        #expect(values.last?.entriesTotal == entries.count)
        #expect(values.last?.bytesWritten == report.totalBytes)
        #expect(values.last?.bytesTotal == report.totalBytes)
        #expect(zip(values, values.dropFirst()).allSatisfy { $0.entriesCompleted < $1.entriesCompleted })
        #expect(report.files.count == 8)
        for file in report.files {
            let data = try Data(contentsOf: source.appendingPathComponent(file.path))
            #expect(file.size == Int64(data.count))
            #expect(file.digest == FNVHasher.digest(of: data), "\(file.path)")
        }
        // Files are reported in archive order.
        let order = entries.filter { $0.kind == .file }.map(\.path)
        #expect(report.files.map(\.path) == order)
    }

    @Test(arguments: Backend.allCases)
    func listingDescribesEntries(_ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await Python.run(
            """
            import zipfile
            with zipfile.ZipFile('a.zip', 'w', zipfile.ZIP_DEFLATED) as z:
                z.mkdir('assets')
                info = zipfile.ZipInfo('assets/run.sh')
                info.external_attr = 0o100755 << 16
                info.create_system = 3
                z.writestr(info, '#!/bin/sh\\n' * 100, compress_type=zipfile.ZIP_DEFLATED)
                z.writestr('assets/raw.bin', bytes(range(256)), compress_type=zipfile.ZIP_STORED)
            """,
            in: scratch.url
        )
        let entries = try await backend.unarchiver.entries(of: scratch.path("a.zip"), options: ExtractOptions())
        #expect(entries.map(\.path) == ["assets", "assets/run.sh", "assets/raw.bin"])
        #expect(entries.map(\.kind) == [.directory, .file, .file])
        let script = try #require(entries.first { $0.path == "assets/run.sh" })
        #expect(script.uncompressedSize == 1000)
        #expect(script.compressedSize < 1000)
        #expect(script.permissions == 0o755)
        #expect(script.isEncrypted == false)
        let raw = try #require(entries.first { $0.path == "assets/raw.bin" })
        #expect(raw.uncompressedSize == 256 && raw.compressedSize == 256)
        #expect(raw.crc32 == 0x2905_8C73)
        #expect(!FileManager.default.fileExists(atPath: scratch.path("out").path))
    }

    /// Modes: owner bits only, files at least 0o600, directories 0o700, never setuid.
    @Test(arguments: Backend.allCases)
    func modesKeepOwnerBitsOnly(_ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await Python.run(
            """
            from zipcraft import *
            build('a.zip', [Entry('d/', method=0, mode=0o40777),
                            Entry('d/tool', b'#!', mode=0o104755),
                            Entry('d/readonly.txt', b'r', mode=0o100444),
                            Entry('d/dos.txt', b'dos', host=0)])
            """,
            in: scratch.url
        )
        let out = scratch.path("out")
        _ = try await backend.unarchiver.extract(scratch.path("a.zip"), to: out)
        func mode(_ path: String) throws -> Int {
            try #require(
                FileManager.default.attributesOfItem(atPath: out.appendingPathComponent(path).path)[.posixPermissions]
                    as? Int
            )
        }
        #expect(try mode("d") == 0o700)
        #expect(try mode("d/tool") == 0o700)
        #expect(try mode("d/readonly.txt") == 0o600)
        #expect(try mode("d/dos.txt") == 0o600)
    }

    /// Symlinks inside the destination are created when the policy allows them.
    @Test(arguments: Backend.allCases)
    func symlinksWithinDestination(_ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await Python.run(
            """
            from zipcraft import *
            build('a.zip', [Entry('data/real.txt', b'real'),
                            Entry('data/alias.txt', b'real.txt', method=0, mode=0o120777),
                            Entry('top', b'data/../data', method=0, mode=0o120777)])
            """,
            in: scratch.url
        )
        let options = ExtractOptions(symlinks: .allowWithinDestination)
        let listed = try await backend.unarchiver.entries(of: scratch.path("a.zip"), options: options)
        #expect(listed.first { $0.path == "data/alias.txt" }?.linkTarget == "real.txt")
        let report = try await backend.unarchiver.extract(
            scratch.path("a.zip"),
            to: scratch.path("out"),
            options: options
        )
        #expect(report.symlinks == ["data/alias.txt", "top"])
        let tree = try Trees.snapshot(scratch.path("out"))
        #expect(tree["data/alias.txt"] == .symlink("real.txt"))
        #expect(tree["top"] == .symlink("data/../data"))
        #expect(try String(contentsOf: scratch.path("out/top/alias.txt"), encoding: .utf8) == "real")
    }

    /// One worker or many: the same tree.
    @Test func concurrencyDoesNotChangeTheResult() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (archive, source) = try await makeArchive(scratch)
        for workers in [1, 2, 8] {
            let out = scratch.path("out-\(workers)")
            _ = try await ZipUnarchiver().extract(archive, to: out, options: ExtractOptions(concurrency: workers))
            try Trees.expectEqual(out, source)
        }
    }
}
