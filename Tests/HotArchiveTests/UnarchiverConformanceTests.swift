import Foundation
import HotArchive
import HotCore
import HotTestServers
import HotTesting
import Testing

/// Both unarchivers pass the public Unarchiver conformance suite: every hostile archive it
/// builds is refused with the documented code and leaves nothing behind.
@Suite struct UnarchiverConformanceTests {
    static let zip = UnarchiverConformance(readsWinZipAES: ZipUnarchiver.readsWinZipAES) { ZipUnarchiver() }

    @Test(arguments: zip.checks)
    func zipUnarchiverConforms(_ check: ConformanceCheck) async throws {
        try await check.run()
    }

    #if LibArchive
    static let libArchive = UnarchiverConformance { LibArchiveUnarchiver() }

    @Test(arguments: libArchive.checks)
    func libArchiveUnarchiverConforms(_ check: ConformanceCheck) async throws {
        try await check.run()
    }
    #endif

    /// The suite's deflate writer makes streams a real inflater reads: python's zlib.
    @Test func rawZipDeflateRunsInflate() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("RawZip-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for (byte, count) in [(UInt8(0), 0), (0, 1), (7, 258), (200, 259), (0, 100_000)] {
            let stream = directory.appendingPathComponent("run-\(byte)-\(count).deflate")
            try Data(RawZipArchive.deflateRun(byte: byte, count: count)).write(to: stream)
            let output = try await Subprocess.check(
                "python3",
                [
                    "-c",
                    "import sys, zlib; d = zlib.decompress(open(sys.argv[1], 'rb').read(), -15); print(len(d), set(d))",
                    stream.path,
                ]
            )
            let expected = count == 0 ? "0 set()" : "\(count) {\(byte)}"
            #expect(output.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == expected)
        }
    }
}
