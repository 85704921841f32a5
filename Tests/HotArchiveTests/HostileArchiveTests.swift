import Foundation
import HotArchive
import HotCore
import HotTesting
import Testing

/// A hostile archive crafted with python3 at test time, and the error it must raise.
struct HostileCase: Sendable, CustomTestStringConvertible {
    var name: String
    /// Python that writes `a.zip` in the current directory; `SCRATCH` is replaced by the test directory.
    var script: String
    var code: HotUpdateError.Code
    var options: ExtractOptions = ExtractOptions()

    var testDescription: String { name }

    static let all: [HostileCase] = [
        HostileCase(
            name: "zip-slip ../evil",
            script: "build('a.zip', [Entry('ok.txt', b'fine'), Entry('../evil.txt', b'x')])",
            code: .unsafeEntry
        ),
        HostileCase(
            name: "zip-slip forty levels up",
            script: "build('a.zip', [Entry('../' * 40 + 'tmp/evil.txt', b'x')])",
            code: .unsafeEntry
        ),
        HostileCase(
            name: "zip-slip hidden in the middle",
            script: "build('a.zip', [Entry('a/b/../../../evil.txt', b'x')])",
            code: .unsafeEntry
        ),
        HostileCase(
            name: "absolute path",
            script: "build('a.zip', [Entry('SCRATCH/abs-evil.txt', b'x')])",
            code: .unsafeEntry
        ),
        HostileCase(
            name: "backslash zip-slip",
            script: #"build('a.zip', [Entry('..\\evil.txt', b'x')])"#,
            code: .unsafeEntry
        ),
        HostileCase(
            name: "drive letter",
            script: #"build('a.zip', [Entry('C:\\evil.txt', b'x')])"#,
            code: .unsafeEntry
        ),
        HostileCase(
            name: "drive-relative",
            script: "build('a.zip', [Entry('C:evil.txt', b'x')])",
            code: .unsafeEntry
        ),
        HostileCase(
            name: "UNC path",
            script: #"build('a.zip', [Entry('\\\\server\\share\\evil.txt', b'x')])"#,
            code: .unsafeEntry
        ),
        HostileCase(
            name: "NUL in name",
            script: #"build('a.zip', [Entry(b'a\x00b.txt', b'x')])"#,
            code: .unsafeEntry
        ),
        HostileCase(
            name: "empty name",
            script: "build('a.zip', [Entry(b'', b'x')])",
            code: .unsafeEntry
        ),
        HostileCase(
            name: "duplicate names",
            script: "build('a.zip', [Entry('a.txt', b'one'), Entry('a.txt', b'two')])",
            code: .unsafeEntry
        ),
        HostileCase(
            name: "duplicate after normalisation",
            script: "build('a.zip', [Entry('d/a.txt', b'one'), Entry('./d//a.txt', b'two')])",
            code: .unsafeEntry
        ),
        HostileCase(
            name: "file then directory of the same name",
            script: "build('a.zip', [Entry('a', b'file'), Entry('a/b.txt', b'x')])",
            code: .unsafeEntry
        ),
        HostileCase(
            name: "directory then file of the same name",
            script: "build('a.zip', [Entry('a/b.txt', b'x'), Entry('a', b'file')])",
            code: .unsafeEntry
        ),
        HostileCase(
            name: "symlink refused by default",
            script: "build('a.zip', [Entry('t.txt', b'x'), Entry('link', b't.txt', method=0, mode=0o120777)])",
            code: .unsafeEntry
        ),
        HostileCase(
            name: "symlink escaping the destination",
            script: "build('a.zip', [Entry('link', b'../../etc', method=0, mode=0o120777)])",
            code: .unsafeEntry,
            options: ExtractOptions(symlinks: .allowWithinDestination)
        ),
        HostileCase(
            name: "symlink with an absolute target",
            script: "build('a.zip', [Entry('link', b'/etc/passwd', method=0, mode=0o120777)])",
            code: .unsafeEntry,
            options: ExtractOptions(symlinks: .allowWithinDestination)
        ),
        HostileCase(
            name: "entry written through a symlink",
            script:
                "build('a.zip', [Entry('sub/', mode=0o40755, method=0), Entry('link', b'sub', method=0, mode=0o120777), Entry('link/x.txt', b'x')])",
            code: .unsafeEntry,
            options: ExtractOptions(symlinks: .allowWithinDestination)
        ),
        HostileCase(
            name: "symlink target CRC disagrees",
            script: "build('a.zip', [Entry('t.txt', b'x'), Entry('link', b't.txt', method=0, mode=0o120777, crc=1)])",
            code: .checksumMismatch,
            options: ExtractOptions(symlinks: .allowWithinDestination)
        ),
        HostileCase(
            name: "symlink chain climbing out",
            script:
                "build('a.zip', [Entry('up', b'.', method=0, mode=0o120777), Entry('esc', b'up/../x', method=0, mode=0o120777)])",
            code: .unsafeEntry,
            options: ExtractOptions(symlinks: .allowWithinDestination)
        ),
        HostileCase(
            name: "character device",
            script: "build('a.zip', [Entry('dev', b'', method=0, mode=0o020644)])",
            code: .unsafeEntry
        ),
        HostileCase(
            name: "FIFO",
            script: "build('a.zip', [Entry('fifo', b'', method=0, mode=0o010644)])",
            code: .unsafeEntry
        ),
        HostileCase(
            name: "overlapping entries share one local header",
            script:
                "build('a.zip', [Entry('a.txt', b'A' * 5000)] + [Entry('a.txt', b'A' * 5000, share_offset_with=0) for _ in range(3)])",
            code: .corruptArchive
        ),
        HostileCase(
            name: "entry nested inside another's data",
            script: """
                import struct, zlib
                inner = struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0, 0, 0, 0x21, zlib.crc32(b'hello'), 5, 5, 5, 0) + b'b.txt' + b'hello'
                with open('a.zip', 'wb') as f:
                    pass
                outer = Entry('a.txt', inner, method=0)
                build('tmp.zip', [outer])
                data = open('tmp.zip', 'rb').read()
                cd_at = data.index(b'PK\\x01\\x02')
                body = data[:cd_at]
                central = data[cd_at:data.index(b'PK\\x05\\x06')]
                extra = struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 0x0314, 20, 0, 0, 0, 0x21, zlib.crc32(b'hello'), 5, 5, 5, 0, 0, 0, 0, 0o100644 << 16, 35) + b'b.txt'
                central += extra
                end = struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, 2, 2, len(central), len(body), 0)
                open('a.zip', 'wb').write(body + central + end)
                """,
            code: .corruptArchive
        ),
        HostileCase(
            name: "inflates to more than declared",
            script: "build('a.zip', [Entry('lie.txt', b'A' * 100000, usize=1000)])",
            code: .corruptArchive
        ),
        HostileCase(
            name: "inflates to fewer than declared",
            script: "build('a.zip', [Entry('lie.txt', b'A' * 1000, usize=200000)])",
            code: .corruptArchive
        ),
        HostileCase(
            name: "stored entry with sizes that disagree",
            script: "build('a.zip', [Entry('s.txt', b'A' * 1000, method=0, usize=2000)])",
            code: .corruptArchive
        ),
        HostileCase(
            name: "CRC mismatch",
            script: "build('a.zip', [Entry('ok.txt', b'fine'), Entry('bad.txt', b'B' * 3000, crc=0xdeadbeef)])",
            code: .checksumMismatch
        ),
        HostileCase(
            name: "stored CRC mismatch",
            script: "build('a.zip', [Entry('bad.bin', b'B' * 3000, method=0, crc=0x12345678)])",
            code: .checksumMismatch
        ),
        HostileCase(
            name: "local and central names disagree",
            script: "build('a.zip', [Entry('evil.txt', b'x', local_name=b'good.txt')])",
            code: .corruptArchive
        ),
        HostileCase(
            name: "local and central sizes disagree",
            script: "build('a.zip', [Entry('a.txt', b'x' * 100, local_usize=99)])",
            code: .corruptArchive
        ),
        HostileCase(
            name: "local and central methods disagree",
            script: "build('a.zip', [Entry('a.txt', b'x' * 100, local_method=0)])",
            code: .corruptArchive
        ),
        HostileCase(
            name: "central directory points past the end",
            script: """
                import struct
                build('tmp.zip', [Entry('a.txt', b'x' * 100)])
                data = bytearray(open('tmp.zip', 'rb').read())
                end = data.rindex(b'PK\\x05\\x06')
                struct.pack_into('<I', data, end + 16, 10_000_000)
                open('a.zip', 'wb').write(data)
                """,
            code: .corruptArchive
        ),
        HostileCase(
            name: "truncated archive",
            script: """
                build('tmp.zip', [Entry('a%d.txt' % i, bytes(range(256)) * 40) for i in range(5)])
                data = open('tmp.zip', 'rb').read()
                open('a.zip', 'wb').write(data[:len(data) // 2])
                """,
            code: .corruptArchive
        ),
        HostileCase(
            name: "end record cut off",
            script: """
                build('tmp.zip', [Entry('a.txt', b'x' * 100)])
                data = open('tmp.zip', 'rb').read()
                open('a.zip', 'wb').write(data[:-10])
                """,
            code: .corruptArchive
        ),
        HostileCase(name: "empty file", script: "open('a.zip', 'wb').close()", code: .notAnArchive),
        HostileCase(
            name: "random bytes",
            script:
                "import random\nrandom.seed(7)\nopen('a.zip', 'wb').write(bytes(random.randrange(256) for _ in range(5000)))",
            code: .notAnArchive
        ),
        HostileCase(
            name: "a text file",
            script: "open('a.zip', 'w').write('hello, this is not a zip\\n' * 10)",
            code: .notAnArchive
        ),
        HostileCase(
            name: "too many entries",
            script: "build('a.zip', [Entry('f%d.txt' % i, b'x') for i in range(10)])",
            code: .limitExceeded,
            options: ExtractOptions(maxEntries: 5)
        ),
        HostileCase(
            name: "compression ratio bomb",
            script: "build('a.zip', [Entry('zeros.bin', bytes(8 << 20))])",
            code: .limitExceeded,
            options: ExtractOptions(maxCompressionRatio: 100, compressionRatioFloor: 1 << 20)
        ),
        HostileCase(
            name: "declared total over the limit",
            script: "build('a.zip', [Entry('a.bin', b'a' * 800), Entry('b.bin', b'b' * 800)])",
            code: .limitExceeded,
            options: ExtractOptions(maxTotalBytes: 1000)
        ),
        HostileCase(
            name: "name longer than the limit",
            script: "build('a.zip', [Entry('d/' + 'n' * 40, b'x')])",
            code: .limitExceeded,
            options: ExtractOptions(maxNameLength: 32)
        ),
        HostileCase(
            name: "name component of 1,000 bytes",
            script: "build('a.zip', [Entry('ok.txt', b'fine'), Entry('d/' + 'n' * 1000 + '/x.txt', b'x')])",
            code: .limitExceeded
        ),
        HostileCase(
            name: "data descriptor CRC disagrees",
            script: "build('a.zip', [Entry('dd.txt', b'D' * 4000, descriptor='sig', descriptor_crc=0x0badf00d)])",
            code: .checksumMismatch
        ),
    ]
}

/// Hostile archives: every one is refused with the right code by both
/// unarchivers, the destination is never created, and nothing appears beside it
/// (no escaped file, no staging directory left behind).
@Suite struct HostileArchiveTests {
    @Test(arguments: HostileCase.all, Backend.allCases)
    func refused(_ hostile: HostileCase, _ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let script =
            "from zipcraft import *\n" + hostile.script.replacingOccurrences(of: "SCRATCH", with: scratch.url.path)
        try await Python.run(script, in: scratch.url)
        try? FileManager.default.removeItem(at: scratch.path("tmp.zip"))
        let before = scratch.listing()
        let destination = scratch.path("out")
        let error = await expectHotError(hostile.code) {
            try await backend.unarchiver.extract(scratch.path("a.zip"), to: destination, options: hostile.options)
        }
        #expect(error?.message.isEmpty == false)
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        #expect(scratch.listing() == before)
    }

    /// Listing applies the same checks as extracting, except data checks it never makes.
    @Test(arguments: Backend.allCases)
    func listingRefusesUnsafeNames(_ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await Python.run(
            "from zipcraft import *\nbuild('a.zip', [Entry('ok.txt', b'x'), Entry('../evil', b'x')])",
            in: scratch.url
        )
        await expectHotError(.unsafeEntry) {
            try await backend.unarchiver.entries(of: scratch.path("a.zip"), options: ExtractOptions())
        }
    }

    /// A name component over 255 bytes (counted in bytes, not characters) is refused while
    /// the archive is checked, naming the entry, before the file system would refuse it;
    /// 255 bytes are admitted and written.
    @Test(arguments: Backend.allCases)
    func nameComponentOver255BytesIsRefusedUpFront(_ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await Python.run(
            """
            from zipcraft import *
            build('long.zip', [Entry('ok.txt', b'fine'), Entry('d/' + '\\u00e9' * 128 + '.png', b'x')])
            build('edge.zip', [Entry('d/' + '\\u00e9' * 127 + 'n', b'edge')])
            """,
            in: scratch.url
        )
        let before = scratch.listing()
        let destination = scratch.path("out")
        let long = "d/" + String(repeating: "é", count: 128) + ".png"
        let listing = await expectHotError(.limitExceeded) {
            try await backend.unarchiver.entries(of: scratch.path("long.zip"), options: ExtractOptions())
        }
        let extraction = await expectHotError(.limitExceeded) {
            try await backend.unarchiver.extract(scratch.path("long.zip"), to: destination, options: ExtractOptions())
        }
        for error in [listing, extraction] {
            #expect(error?.subject == long)
            #expect(error?.message.contains("260 bytes") == true)
            #expect(error?.message.contains("255") == true)
        }
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        #expect(scratch.listing() == before)

        let edge = "d/" + String(repeating: "é", count: 127) + "n"
        let report = try await backend.unarchiver.extract(
            scratch.path("edge.zip"),
            to: destination,
            options: ExtractOptions()
        )
        #expect(report.files.map(\.path) == [edge])
        #expect(try Data(contentsOf: destination.appendingPathComponent(edge)) == Data("edge".utf8))
    }

    /// A failure late in a parallel extraction removes everything written so far.
    @Test(arguments: Backend.allCases)
    func failureMidExtractionLeavesNothing(_ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await Python.run(
            """
            from zipcraft import *
            entries = [Entry('dir%d/file%d.txt' % (i % 7, i), bytes([i % 256]) * (1000 + i * 300)) for i in range(120)]
            entries.append(Entry('zzz/bad.bin', b'Z' * 700000, crc=1))
            build('a.zip', entries)
            """,
            in: scratch.url
        )
        let destination = scratch.path("out")
        let before = scratch.listing()
        await expectHotError(.checksumMismatch) {
            try await backend.unarchiver.extract(
                scratch.path("a.zip"),
                to: destination,
                options: ExtractOptions(concurrency: 4)
            )
        }
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        #expect(scratch.listing() == before)
        #expect(!scratch.listing().contains { $0.contains(".partial-") })
    }

    /// A failure leaves an existing empty destination exactly as it was.
    @Test(arguments: Backend.allCases)
    func failureLeavesEmptyDestinationInPlace(_ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await Python.run(
            "from zipcraft import *\nbuild('a.zip', [Entry('x.txt', b'x' * 10, crc=7)])",
            in: scratch.url
        )
        let destination = scratch.path("out")
        try FileManager.default.createDirectory(at: destination, withIntermediateDirectories: false)
        await expectHotError(.checksumMismatch) {
            try await backend.unarchiver.extract(scratch.path("a.zip"), to: destination)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: destination.path).isEmpty)
        #expect(scratch.listing() == ["a.zip", "out", "zipcraft.py"])
    }
}
