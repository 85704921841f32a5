import Foundation
import HotArchive
import HotCore
import HotTesting
import Testing

/// The hostile archives golang/go's `src/archive/zip/reader_test.go` builds inline, rebuilt
/// in python at test time from what each test describes (not copied from its hex), each
/// with what Go asserts and what both of our unarchivers must do.
struct GoReaderCase: Sendable, CustomTestStringConvertible {
    var name: String
    /// What Go's test asserts, in a few words.
    var go: String
    /// Python that writes `a.zip` in the current directory (with `zipcraft` imported);
    /// `CORPUS` is replaced by the peer corpus directory.
    var script: String
    /// The outcome for both backends, unless `libarchive` says otherwise.
    var outcome: Outcome
    /// The libarchive backend's outcome, where libarchive reads the archive differently.
    var libarchive: Outcome?
    var options = ExtractOptions()
    /// Paths, relative to the destination, that a hostile entry aims at.
    var escapes: [String] = []

    var testDescription: String { name }

    /// The zip64 end record, locator and saturated end record that follow a central directory.
    static let zip64Tail = """
        import struct
        def zip64_tail(body_length, count, cd_size, cd_offset, total_count=None):
            record = struct.pack('<IQHHIIQQQQ', 0x06064b50, 44, 45, 45, 0, 0,
                                 count if total_count is None else total_count, count, cd_size, cd_offset)
            locator = struct.pack('<IIQI', 0x07064b50, 0, body_length, 1)
            end = struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
            return record + locator + end
        def split_end(path):
            data = open(path, 'rb').read()
            end = data.rindex(b'PK\\x05\\x06')
            _, _, _, _, count, cd_size, cd_offset, _ = struct.unpack('<IHHHHIIH', data[end:end + 22])
            return data[:end], count, cd_size, cd_offset

        """

    static let all: [GoReaderCase] = [
        GoReaderCase(
            name: "CVE-2021-27919: ../test.txt behind a data descriptor",
            go: "TestCVE202127919: NewReader returns ErrInsecurePath, the entry is still listed as ../test.txt",
            script: "build('a.zip', [Entry('../test.txt', b'This is a test text file.\\n', descriptor='sig')])",
            outcome: .refuses(.unsafeEntry, mentioning: ["../test.txt"]),
            escapes: ["../test.txt"]
        ),
        GoReaderCase(
            name: "CVE-2021-33196: zip64 end record claims 2^64-1 entries",
            go: "TestCVE202133196: NewReader returns ErrFormat (no huge allocation)",
            script: zip64Tail + """
                build('tmp.zip', [Entry('a.txt', b'abc', descriptor='sig')])
                body, count, cd_size, cd_offset = split_end('tmp.zip')
                open('a.zip', 'wb').write(body + zip64_tail(len(body), 2**64 - 1, cd_size, cd_offset))
                """,
            outcome: .refuses(.corruptArchive, mentioning: ["18446744073709551615"])
        ),
        GoReaderCase(
            name: "CVE-2021-33196: zip64 end record claims more entries than its directory can hold, under the limit",
            go: "TestCVE202133196 (the same check, with a count an allocation would survive): ErrFormat",
            script: zip64Tail + """
                build('tmp.zip', [Entry('a.txt', b'abc')])
                body, count, cd_size, cd_offset = split_end('tmp.zip')
                open('a.zip', 'wb').write(body + zip64_tail(len(body), 150_000, cd_size, cd_offset))
                """,
            outcome: .refuses(.corruptArchive, mentioning: ["150000"])
        ),
        GoReaderCase(
            name: "CVE-2021-33196: five entries with empty names",
            go: "TestCVE202133196: Go reads the five empty-named entries; we refuse an empty name",
            script: "build('a.zip', [Entry('', b'') for _ in range(5)])",
            outcome: .refuses(.unsafeEntry, mentioning: ["empty"])
        ),
        GoReaderCase(
            name: "CVE-2021-39293: directory size overflows offset + size",
            go: "TestCVE202139293: NewReader returns ErrFormat",
            script: zip64Tail + """
                build('tmp.zip', [Entry('a.txt', b'abc')])
                body, count, cd_size, cd_offset = split_end('tmp.zip')
                open('a.zip', 'wb').write(body + zip64_tail(len(body), 1, 2**64 - 16, cd_offset))
                """,
            outcome: .refuses(.corruptArchive)
        ),
        GoReaderCase(
            name: "CVE-2021-41772: names /, //, \\ and /test.txt",
            go: "TestCVE202141772: ErrInsecurePath; the fs.FS view shows only test.txt",
            script: """
                build('a.zip', [Entry('/', method=0, mode=0o40755), Entry('//', method=0, host=0),
                                Entry('\\\\', method=0, host=0), Entry('/test.txt', b'hello world', method=0)])
                """,
            outcome: .refuses(.unsafeEntry)
        ),
        GoReaderCase(
            name: "CVE-2021-41772: a lone //",
            go: "TestCVE202141772: // is an insecure name",
            script: "build('a.zip', [Entry('//', b'', method=0, host=0)])",
            outcome: .refuses(.unsafeEntry)
        ),
        GoReaderCase(
            name: "CVE-2021-41772: a lone backslash",
            go: "TestCVE202141772: \\ is an insecure name",
            script: "build('a.zip', [Entry('\\\\', b'x', method=0, host=0)])",
            outcome: .refuses(.unsafeEntry)
        ),
        GoReaderCase(
            name: "insecure path ../foo",
            go: "TestInsecurePaths: ErrInsecurePath",
            script: "build('a.zip', [Entry('../foo', b'', descriptor='sig')])",
            outcome: .refuses(.unsafeEntry, mentioning: ["../foo"]),
            escapes: ["../foo"]
        ),
        GoReaderCase(
            name: "insecure path /foo",
            go: "TestInsecurePaths: ErrInsecurePath",
            script: "build('a.zip', [Entry('/foo', b'', descriptor='sig')])",
            outcome: .refuses(.unsafeEntry, mentioning: ["/foo"])
        ),
        GoReaderCase(
            name: "insecure path a/b/../../../c",
            go: "TestInsecurePaths: ErrInsecurePath",
            script: "build('a.zip', [Entry('a/b/../../../c', b'', descriptor='sig')])",
            outcome: .refuses(.unsafeEntry, mentioning: ["a/b/../../../c"]),
            escapes: ["a/b/../../../c"]
        ),
        GoReaderCase(
            name: "backslash name a\\b",
            go: "TestInsecurePaths: Go flags a\\b insecure; we read \\ as a separator, so it lands at a/b inside",
            script: "build('a.zip', [Entry('a\\\\b', b'', descriptor='sig')])",
            outcome: .reads(["a": .directory, "a/b": .bytes([])])
        ),
        GoReaderCase(
            name: "/foo with Go's insecure-path check disabled",
            go: "TestDisableInsecurePathCheck: with zipinsecurepath=1 Go reads /foo; we have no such switch",
            script: "build('a.zip', [Entry('/foo', b'', descriptor='sig')])",
            outcome: .refuses(.unsafeEntry)
        ),
        GoReaderCase(
            name: "zip64 directory offset beyond Int64.max",
            go: "TestBaseOffsetPlusOverflow: NewReader must not panic",
            script: zip64Tail + """
                body = b' ' * 40
                open('a.zip', 'wb').write(body + zip64_tail(len(body), 1, 0x20, 0x8000000000000020))
                """,
            outcome: .refuses(.corruptArchive)
        ),
        GoReaderCase(
            name: "declared size smaller than the data (readme.zip)",
            go: "TestUnderSize: reading readme.zip's entries with UncompressedSize64 = 1 gives ErrFormat",
            script: """
                import struct
                data = bytearray(open('CORPUS/go-derived-via-rc-zip/readme.zip', 'rb').read())
                struct.pack_into('<I', data, 22, 1)
                central = data.rindex(b'PK\\x01\\x02')
                struct.pack_into('<I', data, central + 24, 1)
                open('a.zip', 'wb').write(data)
                """,
            outcome: .refuses(.corruptArchive, mentioning: ["README"])
        ),
        GoReaderCase(
            name: "a directory entry with data",
            go:
                "TestIssue54801: opening a directory entry that has data gives ErrFormat; we create the directory and write none of its data",
            script: "build('a.zip', [Entry('dir/', b'directory with data ' * 20, mode=0o40755)])",
            outcome: .reads(["dir": .directory])
        ),
        GoReaderCase(
            name: "a deflated empty directory behind a data descriptor",
            go: "TestCompressedDirectory: an empty JAR's compressed META-INF/ reads without error",
            script: """
                build('a.zip', [Entry('META-INF/', b'', host=0, descriptor='sig'),
                                Entry('META-INF/MANIFEST.MF', b'Manifest-Version: 1.0\\r\\nCreated-By: test\\r\\n\\r\\n',
                                      host=0, descriptor='sig')])
                """,
            outcome: .reads([
                "META-INF": .directory,
                "META-INF/MANIFEST.MF": .text("Manifest-Version: 1.0\r\nCreated-By: test\r\n\r\n"),
            ])
        ),
        GoReaderCase(
            name: "a data descriptor cut off by the central directory",
            go: "TestIssue11146: reading the entry gives io.ErrUnexpectedEOF",
            script: "build('a.zip', [Entry('a.txt', b'data', method=0, flags=0x08)])",
            outcome: .refuses(.corruptArchive, mentioning: ["a.txt"])
        ),
        GoReaderCase(
            name: "zip64 locator look-alike before a plain end record",
            go:
                "TestIssue12449: a non-zip64 archive whose end record follows 20 bytes starting PK\\x06\\x07 reads fine",
            script: """
                import random
                random.seed(12449)
                build('tmp.zip', [Entry('a.txt', b'111222\\n', method=0, descriptor='sig')])
                data = open('tmp.zip', 'rb').read()
                end = data.rindex(b'PK\\x05\\x06')
                junk = bytes(random.randrange(256) for _ in range(12))
                fake_locator = b'PK\\x06\\x07' + bytes(random.randrange(256) for _ in range(16))
                open('a.zip', 'wb').write(data + junk + fake_locator + data[end:])
                """,
            // Readers disagree: Info-ZIP reads it (with a warning), python refuses it as spanned, and
            // libarchive 3.6.2 lists nothing; the libarchive backend notices the missing entry.
            outcome: .reads(["a.txt": .text("111222\n")]),
            libarchive: .refuses(.corruptArchive, mentioning: ["a.txt", "libarchive did not return"])
        ),
        GoReaderCase(
            name: "an end record with a truncated comment hides an earlier one",
            go: "issue 66869 (comment-truncated.zip): ErrFormat rather than reading the hidden archive",
            script: """
                import struct, zlib
                out = bytearray()
                def local(name, data):
                    offset = len(out)
                    out.extend(struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0, 0, 0, 0x21, zlib.crc32(data),
                                           len(data), len(data), len(name), 0) + name + data)
                    return offset
                def central(name, data, offset):
                    return struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 0x0314, 20, 0, 0, 0, 0x21, zlib.crc32(data),
                                       len(data), len(data), len(name), 0, 0, 0, 0, 0o100644 << 16, offset) + name
                lower = local(b'file', b'lower')
                upper = local(b'FILE', b'UPPER')
                for name, data, offset, comment in [(b'file', b'lower', lower, 0), (b'FILE', b'UPPER', upper, 100)]:
                    cd = central(name, data, offset)
                    at = len(out)
                    out.extend(cd)
                    out.extend(struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, 1, 1, len(cd), at, comment))
                open('a.zip', 'wb').write(out)
                """,
            outcome: .refuses(.corruptArchive, mentioning: ["comment"])
        ),
        GoReaderCase(
            name: "a bad CRC-32 in a data descriptor (go-with-datadesc-sig.zip)",
            go: "reader_test.go Bad-CRC32-in-data-descriptor: foo.txt gives ErrChecksum",
            script: """
                data = bytearray(open('CORPUS/go-derived-via-rc-zip/go-with-datadesc-sig.zip', 'rb').read())
                data[0x2d] = (data[0x2d] + 1) % 256
                open('a.zip', 'wb').write(data)
                """,
            outcome: .refuses(.checksumMismatch, mentioning: ["foo.txt"])
        ),
        GoReaderCase(
            name: "a bad CRC-32 in both headers (crc32-not-streamed.zip)",
            go: "reader_test.go crc32-not-streamed.zip via returnCorruptNotStreamedZip: foo.txt gives ErrChecksum",
            script: """
                data = bytearray(open('CORPUS/go-derived-via-rc-zip/crc32-not-streamed.zip', 'rb').read())
                data[0x11] = (data[0x11] + 1) % 256
                data[0x9d] = (data[0x9d] + 1) % 256
                open('a.zip', 'wb').write(data)
                """,
            outcome: .refuses(.checksumMismatch, mentioning: ["foo.txt"])
        ),
        GoReaderCase(
            name: "70 KiB of zeros",
            go: "TestInvalidFiles: ErrFormat",
            script: "open('a.zip', 'wb').write(bytes(70 * 1024))",
            outcome: .refuses(.notAnArchive)
        ),
        GoReaderCase(
            name: "70 KiB of end record signatures",
            go: "TestInvalidFiles: ErrFormat",
            script: "open('a.zip', 'wb').write(b'PK\\x05\\x06' * (70 * 256))",
            outcome: .refuses(.corruptArchive)
        ),
        GoReaderCase(
            name: "a file and a directory with the same name",
            go: "TestFSWalk dupdir.zip: a/, a/b, a/b/, a/b/c; walking gives an error",
            script: """
                build('a.zip', [Entry('a/', method=0, mode=0o40755), Entry('a/b', b''),
                                Entry('a/b/', method=0, mode=0o40755), Entry('a/b/c', b'')])
                """,
            outcome: .refuses(.unsafeEntry, mentioning: ["a/b"])
        ),
        GoReaderCase(
            name: "a directory named . that has data",
            go:
                "TestFSWalkBadFile: walking an archive whose only entry is . gives an error; . names the destination, we skip it",
            script: "build('a.zip', [Entry('.', b'some data', mode=0o40755)])",
            outcome: .reads([:])
        ),
    ]
}

@Suite(.enabled(if: PeerCorpus.corpus.suitesRun, PeerCorpus.corpus.skipReason))
struct GoReaderCaseTests {
    @Test(arguments: GoReaderCase.all, Backend.allCases)
    func goCase(_ testCase: GoReaderCase, _ backend: Backend) async throws {
        let corpus = try PeerCorpus.corpus.root()
        let scratch = try Scratch()
        defer { scratch.remove() }
        let script = "from zipcraft import *\n" + testCase.script.replacingOccurrences(of: "CORPUS", with: corpus.path)
        try await Python.run(script, in: scratch.url)
        try? FileManager.default.removeItem(at: scratch.path("tmp.zip"))
        try await Verify.extraction(
            scratch.path("a.zip"),
            with: backend,
            options: testCase.options,
            in: scratch,
            expecting: backend == .libarchive ? testCase.libarchive ?? testCase.outcome : testCase.outcome,
            escapes: testCase.escapes,
            corpus: corpus
        )
    }
}
