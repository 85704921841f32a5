import Foundation
import HotArchive
import HotCore
import HotTestServers
import HotTesting
import Testing

/// The peer corpora: archives Go, rc-zip, libarchive and Snyk test their ZIP readers
/// with, kept in `shared/corpora/peer-zip` beside the repository (its README says where
/// each comes from).
enum PeerCorpus {
    /// Where it is, whether it is there, and what a test says without it.
    static let corpus = SharedCorpus(
        title: "the peer ZIP corpus",
        folder: "peer-zip",
        environmentVariable: "HOT_PEER_CORPUS"
    )

    /// The folders of the corpus, each holding archives (and content references) of one peer.
    static let folders = ["go-derived-via-rc-zip", "rc-zip", "snyk-zip-slip", "libarchive"]
}

/// One corpus file, the peer's assertion, and the outcome each backend must give.
struct PeerCase: Sendable, CustomTestStringConvertible {
    /// The file, relative to the corpus root.
    var file: String
    /// What distinguishes this case from others on the same file (options).
    var variant: String?
    /// What the peer's own test asserts, in a few words.
    var peer: String
    var zip: Outcome
    var libarchive: Outcome
    var options = ExtractOptions()
    /// Paths, relative to the destination, that a hostile entry aims at: they must not appear.
    var escapes: [String] = []

    var testDescription: String { variant.map { "\(file) (\($0))" } ?? file }

    func outcome(for backend: Backend) -> Outcome {
        switch backend {
        case .zip: return zip
        case .libarchive: return libarchive
        }
    }

    /// A case both backends agree on.
    static func same(
        _ file: String,
        _ variant: String? = nil,
        peer: String,
        _ outcome: Outcome,
        options: ExtractOptions = ExtractOptions(),
        escapes: [String] = []
    ) -> PeerCase {
        PeerCase(
            file: file,
            variant: variant,
            peer: peer,
            zip: outcome,
            libarchive: outcome,
            options: options,
            escapes: escapes
        )
    }
}

// MARK: - Expectations

extension PeerCase {
    static let go = "go-derived-via-rc-zip/"
    static let rc = "rc-zip/"
    static let snyk = "snyk-zip-slip/"
    static let la = "libarchive/"

    /// Go's `crossPlatform` files (unix.zip by Info-ZIP 3.0, winxp.zip by the Windows XP shell).
    static let crossPlatform: [String: ExpectedNode] = [
        "hello": .text("world \r\n"), "dir/bar": .text("foo \r\n"), "dir/empty": .directory,
        "readonly": .text("important \r\n"),
    ]
    /// Go's test.zip files: test.txt and the gopher PNG kept beside it.
    static let goTest: [String: ExpectedNode] = [
        "test.txt": .text("This is a test text file.\n"),
        "gophercolor16x16.png": .sameAs(corpusFile: go + "gophercolor16x16.png"),
    ]
    static let fooBar: [String: ExpectedNode] = ["foo.txt": .text("foo\n"), "bar.txt": .text("bar\n")]
    static let zip64Readme: [String: ExpectedNode] = ["README": .text("This small file is in ZIP64 format.\n")]
    static let readme: ExpectedNode = .checksum(size: 1096, crc32: 0x8208_0AE0)
    static let foundMe: [String: ExpectedNode] = ["found-me.txt": .sameAs(corpusFile: rc + "found-me.txt")]
    /// libarchive's vimrc/smartd.conf/ts.conf trio, with the CRC-32 its `extract_one` asserts.
    static let vimrc: ExpectedNode = .checksum(size: 912, crc32: 0xBA8E_3BAA)
    static let trio: [String: ExpectedNode] = [
        "smartd.conf": .checksum(size: 6699, crc32: 0x8DD7_379E), "ts.conf": .checksum(size: 852, crc32: 0x7AE5_9B31),
        "vimrc": vimrc,
    ]
    /// The four files of libarchive's winzip_aes256_large*.zip (it asserts names and sizes).
    static let aesLarge: [String: ExpectedNode] = [
        "Makefile": .size(1_456_747), "NEWS": .size(29357), "README": .size(6818), "config.h": .size(32667),
    ]
    static let xps5: [String: ExpectedNode] = [
        "Metadata/Job_PT.xml": .checksum(size: 3559, crc32: 0x325F_A832),
        "Metadata/MXDC_Empty_PT.xml": .checksum(size: 456, crc32: 0x3DF1_5AB6),
        "Documents/1/Metadata/Page1_Thumbnail.JPG": .checksum(size: 1495, crc32: 0xDEED_9ADF),
        "Documents/1/Pages/_rels/1.fpage.rels": .checksum(size: 319, crc32: 0x064F_5550),
        "Documents/1/Pages/1.fpage": .checksum(size: 902, crc32: 0x5737_5F57),
        "Documents/1/Resources/Fonts/3DFDBC8B-4514-41F1-A808-DEA1C79BAC2B.odttf":
            .checksum(size: 219_156, crc32: 0xCF6C_84E2),
        "Documents/1/_rels/FixedDocument.fdoc.rels": .checksum(size: 269, crc32: 0x0F45_1004),
        "Documents/1/FixedDocument.fdoc": .checksum(size: 179, crc32: 0x3D2A_860C),
        "_rels/FixedDocumentSequence.fdseq.rels": .checksum(size: 262, crc32: 0xCA0C_B912),
        "FixedDocumentSequence.fdseq": .checksum(size: 206, crc32: 0xC627_2200),
        "_rels/.rels": .checksum(size: 441, crc32: 0xFFF2_20B7),
        "[Content_Types].xml": .checksum(size: 743, crc32: 0x5165_355F),
    ]
    static let xps7: [String: ExpectedNode] = [
        "Metadata/Job_PT.xml": .checksum(size: 3559, crc32: 0xD689_C670),
        "Metadata/MXDC_Empty_PT.xml": .checksum(size: 456, crc32: 0x3DF1_5AB6),
        "Documents/1/Metadata/Page1_Thumbnail.JPG": .checksum(size: 1834, crc32: 0x9B3B_ED15),
        "Documents/1/Pages/_rels/1.fpage.rels": .checksum(size: 319, crc32: 0xC19F_36E1),
        "Documents/1/Pages/1.fpage": .checksum(size: 1024, crc32: 0xAB02_C61E),
        "Documents/1/Resources/Fonts/B5AE1A61-D830-441F-9D07-954F3B1B3B58.odttf":
            .checksum(size: 17716, crc32: 0x508B_CE86),
        "Documents/1/_rels/FixedDocument.fdoc.rels": .checksum(size: 269, crc32: 0x0F45_1004),
        "Documents/1/FixedDocument.fdoc": .checksum(size: 179, crc32: 0x3D2A_860C),
        "_rels/FixedDocumentSequence.fdseq.rels": .checksum(size: 262, crc32: 0xCA0C_B912),
        "FixedDocumentSequence.fdseq": .checksum(size: 206, crc32: 0xC627_2200),
        "_rels/.rels": .checksum(size: 441, crc32: 0xFFF2_20B7),
        "[Content_Types].xml": .checksum(size: 743, crc32: 0x5165_355F),
    ]
    static let buildSh: ExpectedNode = .text("#!/bin/sh\necho \"test.\"\n")
    static let links = ExtractOptions(symlinks: .allowWithinDestination)
    /// What our reader says of every compression method it does not implement.
    static func unsupported(_ entry: String, _ method: String) -> Outcome {
        .refuses(.unsupportedMethod, mentioning: [entry, method])
    }

    static let all: [PeerCase] = goCases + rcZipCases + snykCases + libarchiveCases

    // Go: golang/go src/archive/zip/reader_test.go (`tests`, TestReader/readTestFile).
    static let goCases: [PeerCase] = [
        // Go: on disk the file is valid; TestReader reads foo.txt "foo\n" and bar.txt "bar\n" (mode 0644).
        // Go's returnCorruptNotStreamedZip corrupts it in memory: GoReaderCaseTests checks that copy.
        .same(go + "crc32-not-streamed.zip", peer: "foo.txt = \"foo\\n\", bar.txt = \"bar\\n\"", .reads(fooBar)),
        // Go: filename = "This is a test textfile.\n" (deflated, data descriptor).
        .same(
            go + "dd.zip",
            peer: "filename = \"This is a test textfile.\\n\"",
            .reads(["filename": .text("This is a test textfile.\n")])
        ),
        // Go: foo.txt and bar.txt, data descriptors without signature.
        .same(go + "go-no-datadesc-sig.zip", peer: "foo.txt, bar.txt", .reads(fooBar)),
        // Go: valid on disk, read as foo.txt/bar.txt; Bad-CRC32-in-data-descriptor corrupts it in memory
        // (checked in GoReaderCaseTests).
        .same(go + "go-with-datadesc-sig.zip", peer: "foo.txt, bar.txt", .reads(fooBar)),
        // Go: the PNG is test.zip's content reference, not an archive.
        .same(go + "gophercolor16x16.png", peer: "content reference for test.zip", .refuses(.notAnArchive)),
        // Go: OpenReader returns ErrFormat.
        .same(go + "readme.notzip", peer: "ErrFormat", .refuses(.notAnArchive)),
        // Go: opens without error (no file list asserted); TestUnderSize reads README from it.
        .same(go + "readme.zip", peer: "opens; README readable", .reads(["README": readme])),
        // Go: junk after the end record is accepted; same files as test.zip.
        .same(go + "test-trailing-junk.zip", peer: "test.txt, gophercolor16x16.png", .reads(goTest)),
        // Go: test.txt = "This is a test text file.\n", gophercolor16x16.png = testdata file.
        .same(go + "test.zip", peer: "test.txt, gophercolor16x16.png", .reads(goTest)),
        // Go: time-*.zip each hold an empty test.txt (time-22738.zip an empty "file"); Go checks times.
        .same(go + "time-22738.zip", peer: "file, empty", .reads(["file": .bytes([])])),
        .same(go + "time-7zip.zip", peer: "test.txt, empty", .reads(["test.txt": .bytes([])])),
        .same(go + "time-go.zip", peer: "test.txt, empty", .reads(["test.txt": .bytes([])])),
        .same(go + "time-infozip.zip", peer: "test.txt, empty", .reads(["test.txt": .bytes([])])),
        .same(go + "time-osx.zip", peer: "test.txt, empty", .reads(["test.txt": .bytes([])])),
        .same(go + "time-win7.zip", peer: "test.txt, empty", .reads(["test.txt": .bytes([])])),
        .same(go + "time-winrar.zip", peer: "test.txt, empty", .reads(["test.txt": .bytes([])])),
        .same(go + "time-winzip.zip", peer: "test.txt, empty", .reads(["test.txt": .bytes([])])),
        // Go: crossPlatform: hello, dir/bar, dir/empty/ (a directory), readonly (mode 0444; we write 0600,
        // see PeerCorpusTests.listedModes).
        .same(go + "unix.zip", peer: "hello, dir/bar, dir/empty/, readonly", .reads(crossPlatform)),
        // Go: each holds an empty 世界 (utf8-infozip and utf8-osx without the UTF-8 flag: we decode
        // Unix-made names as UTF-8, Go keeps the raw bytes, which are the same string).
        .same(go + "utf8-7zip.zip", peer: "世界, empty", .reads(["世界": .bytes([])])),
        .same(go + "utf8-infozip.zip", peer: "世界, empty", .reads(["世界": .bytes([])])),
        .same(go + "utf8-osx.zip", peer: "世界, empty (NonUTF8)", .reads(["世界": .bytes([])])),
        .same(go + "utf8-winrar.zip", peer: "世界, empty", .reads(["世界": .bytes([])])),
        .same(go + "utf8-winzip.zip", peer: "世界, empty", .reads(["世界": .bytes([])])),
        // Go: crossPlatform, MS-DOS attributes (the directory attribute makes dir/empty/ a directory).
        .same(go + "winxp.zip", peer: "hello, dir/bar, dir/empty/, readonly", .reads(crossPlatform)),
        // Go: README = "This small file is in ZIP64 format.\n" (zip64-2.zip: other extra fields, issue 7069).
        .same(go + "zip64-2.zip", peer: "README", .reads(zip64Readme)),
        .same(go + "zip64.zip", peer: "README", .reads(zip64Readme)),
    ]

    // rc-zip: bearcove/rc-zip rc-zip-corpus/src/lib.rs (`test_cases`).
    static let rcZipCases: [PeerCase] = [
        // rc-zip: error "archive tried reading beyond zip archive end. 65536 goes beyond 42".
        .same(rc + "archive-oob.zip", peer: "error: reads beyond the end", .refuses(.corruptArchive)),
        // rc-zip: encoding Cp437, one entry "français".
        .same(rc + "cp-437.zip", peer: "français (Cp437)", .reads(["français": .bytes([])])),
        // rc-zip (feature bzip2): found-me.txt = "Oh no, you found me\n" x 5000.
        PeerCase(
            file: rc + "found-me-bzip2.zip",
            peer: "found-me.txt (bzip2)",
            zip: unsupported("found-me.txt", "bzip2"),
            libarchive: .reads(foundMe)
        ),
        // rc-zip (feature deflate64): same content; libarchive 3.6.2 has no Deflate64 either.
        .same(rc + "found-me-deflate64.zip", peer: "found-me.txt (deflate64)", unsupported("found-me.txt", "9")),
        // rc-zip (feature lzma): same content.
        PeerCase(
            file: rc + "found-me-lzma.zip",
            peer: "found-me.txt (lzma)",
            zip: unsupported("found-me.txt", "LZMA"),
            libarchive: .reads(foundMe)
        ),
        // rc-zip (feature zstd): same content.
        PeerCase(
            file: rc + "found-me-zstd.zip",
            peer: "found-me.txt (zstd)",
            zip: unsupported("found-me.txt", "zstd"),
            libarchive: .reads(foundMe)
        ),
        // rc-zip: the found-me-*.zip content reference, not an archive.
        .same(rc + "found-me.txt", peer: "content reference", .refuses(.notAnArchive)),
        // rc-zip: one entry, the directory bun-darwin-x64/.
        .same(rc + "info-zip-unix-extra.zip", peer: "bun-darwin-x64/", .reads(["bun-darwin-x64": .directory])),
        // rc-zip: 33 entries.
        .same(rc + "meta.zip", peer: "33 entries", .readsCount(entries: 33, nodes: 33, files: 26)),
        // rc-zip: one entry README (a zip appended to text: the prefix adjustment).
        .same(rc + "readme.trailingzip", peer: "README", .reads(["README": readme])),
        // rc-zip guesses Shift-JIS ("should-be-jis/ot_運命のワルツ…"); the names carry no UTF-8 flag, so we
        // follow the APPNOTE (code page 437), as python's zipfile does: same two entries, other characters.
        .same(
            rc + "shift-jis.zip",
            peer: "should-be-jis/ and one file (ShiftJis)",
            .reads([
                "should-be-jis": .directory,
                "should-be-jis/ot_ë^û╜é╠âÅâïâc╚é╝é╚é╝Å¼é│é╚èyé╡é▌ùVé╤é▄.longboi": .bytes([]),
            ])
        ),
        // rc-zip: "empty" = "" and "symlink" (both regular files in this archive).
        .same(rc + "symlink.zip", peer: "empty = \"\", symlink", .reads(["empty": .bytes([]), "symlink": .bytes([])])),
        // rc-zip: 11,372 entries (decompressed from .bz2 at test time).
        .same(
            rc + "wine-zeroed.zip.bz2",
            peer: "11372 entries",
            .readsCount(entries: 11372, nodes: 11372, files: 10162)
        ),
        // README: a symlink entry pointing at ../target. Refused by default (links are refused)...
        .same(
            rc + "zipslip.zip",
            "links refused",
            peer: "symlink -> ../target",
            .refuses(.unsafeEntry, mentioning: ["symlink"]),
            escapes: ["../target"]
        ),
        // ...and refused with links allowed, because the target leaves the destination.
        .same(
            rc + "zipslip.zip",
            "links allowed",
            peer: "symlink -> ../target",
            .refuses(.unsafeEntry, mentioning: ["../target"]),
            options: links,
            escapes: ["../target"]
        ),
    ]

    // Snyk: snyk/zip-slip-vulnerability archives/: nothing may land outside the destination.
    static let snykCases: [PeerCase] = [
        .same(snyk + "zip-slip.tar", peer: "tar: not ours to read", .refuses(.notAnArchive)),
        .same(snyk + "zip-slip-win.tar", peer: "tar: not ours to read", .refuses(.notAnArchive)),
        .same(
            snyk + "zip-slip.zip",
            peer: "good.txt and ../ x40 tmp/evil.txt: evil.txt must not escape",
            .refuses(.unsafeEntry, mentioning: ["evil.txt", "'..'"]),
            escapes: [String(repeating: "../", count: 40) + "tmp/evil.txt"]
        ),
        .same(
            snyk + "zip-slip-win.zip",
            peer: "good.txt and ..\\ x40 Temp\\evil.txt",
            .refuses(.unsafeEntry, mentioning: ["evil.txt", "'..'"]),
            escapes: [String(repeating: "../", count: 40) + "Temp/evil.txt"]
        ),
    ]

    // libarchive: libarchive/libarchive libarchive/test/test_read_format_zip*.c and test_compat_zip.c.
    static let libarchiveCases: [PeerCase] = [
        // test_compat_zip_1: META-INF/MANIFEST.MF then tmp.class (a JAR).
        .same(
            la + "test_compat_zip_1.zip",
            peer: "META-INF/MANIFEST.MF, tmp.class",
            .reads([
                "META-INF/MANIFEST.MF": .checksum(size: 113, crc32: 0x149F_D368),
                "tmp.class": .checksum(size: 118, crc32: 0x36A6_200B),
            ])
        ),
        // test_compat_zip_2: junk between file1 and file2 is skipped.
        .same(
            la + "test_compat_zip_2.zip",
            peer: "file1, file2 despite junk between them",
            .reads(["file1": .bytes([]), "file2": .text("file2\n")])
        ),
        // test_compat_zip_3 (issue 185): soapui-4.0.0/ and a 1030-byte length-at-end file starting "<?xml versio".
        .same(
            la + "test_compat_zip_3.zip",
            peer: "soapui-4.0.0/soapui-settings.xml, 1030 bytes",
            .reads([
                "soapui-4.0.0/soapui-settings.xml": .checksum(size: 1030, crc32: 0x3DAA_EB8C)
            ])
        ),
        // test_compat_zip_4: leading garbage (SFX-like); foo 0412, bar 0567, baz 0644, 4 bytes each.
        .same(
            la + "test_compat_zip_4.zip",
            peer: "foo, bar, baz after a prefix",
            .reads([
                "foo": .checksum(size: 4, crc32: 0x7E32_65A8), "bar": .checksum(size: 4, crc32: 0x04A2_B3E9),
                "baz": .checksum(size: 4, crc32: 0xCC7B_39E1),
            ])
        ),
        // test_compat_zip_5 (issue 152): local headers left unfilled; 12 entries read with seeking.
        .same(la + "test_compat_zip_5.zip", peer: "12 XPS entries with empty local headers", .reads(xps5)),
        // test_compat_zip_6 (issue 225): MS-DOS directories New Folder/New Folder/ and an 11-byte file.
        .same(
            la + "test_compat_zip_6.zip",
            peer: "New Folder/New Folder/, New Text Document.txt (11)",
            .reads([
                "New Folder/New Folder": .directory,
                "New Folder/New Folder/New Text Document.txt": .checksum(size: 11, crc32: 0xBF58_4315),
            ])
        ),
        // test_compat_zip_7 (issue 226): length-at-end markers ending on block boundaries; no hang.
        .same(la + "test_compat_zip_7.xps", peer: "entries read at every block size", .reads(xps7)),
        // test_compat_zip_8: PowerShell's arc\test is read as arc/test.
        .same(
            la + "test_compat_zip_8.zip",
            peer: "arc\\test read as arc/test",
            .reads(["arc/test": .checksum(size: 14, crc32: 0xA420_58F9)])
        ),
        // test_read_data_into_fd / size_exceeds_declared: "first" holds more data than it declares: an error.
        .same(
            la + "test_read_data_into_fd_size_exceeds_declared_deflate.zip",
            peer: "first: more data than declared",
            .refuses(.corruptArchive, mentioning: ["first"])
        ),
        .same(
            la + "test_read_data_into_fd_size_exceeds_declared_stored.zip",
            peer: "first: more data than declared",
            .refuses(.corruptArchive, mentioning: ["first"])
        ),
        // test_read_format_zip (test_basic): file2 has a bad CRC, so reading it fails (ARCHIVE_WARN).
        .same(
            la + "test_read_format_zip.zip",
            peer: "dir/, file1 = hello x3, file2: bad CRC",
            .refuses(.checksumMismatch, mentioning: ["file2"])
        ),
        // test_read_format_zip_7075_utf8_paths: names from Info-ZIP Unicode Path fields (ö, ä, å).
        .same(
            la + "test_read_format_zip_7075_utf8_paths.zip",
            peer: "File 1.txt … File 4 - å.txt",
            .reads([
                "File 1.txt": .checksum(size: 9, crc32: 0x7095_E962),
                "File 2 - ö.txt": .checksum(size: 9, crc32: 0x7095_E962),
                "File 3 - ä.txt": .checksum(size: 9, crc32: 0x7095_E962),
                "File 4 - å.txt": .checksum(size: 9, crc32: 0x7095_E962),
            ])
        ),
        // test_read_format_zip_7z_deflate (7-Zip, deflate): two symlinks and the library they point at
        // (targets as bsdtar 3.6.2 lists them).
        .same(
            la + "test_read_format_zip_7z_deflate.zip",
            "links refused",
            peer: "2 symlinks, 1 file",
            .refuses(.unsafeEntry, mentioning: ["libxkbcommon-x11.so"])
        ),
        .same(
            la + "test_read_format_zip_7z_deflate.zip",
            "links allowed",
            peer: "2 symlinks, 1 file",
            .reads([
                "libxkbcommon-x11.so": .symlink(to: "libxkbcommon-x11.so.0.0.0"),
                "libxkbcommon-x11.so.0": .symlink(to: "libxkbcommon-x11.so.0.0.0"),
                "libxkbcommon-x11.so.0.0.0": .checksum(size: 50280, crc32: 0xB033_EE81),
            ]),
            options: links
        ),
        // test_read_format_zip_7z_lzma: an LZMA-compressed symlink whose target libarchive asserts.
        .same(
            la + "test_read_format_zip_7z_lzma.zip",
            "links refused",
            peer: "LZMA symlink",
            .refuses(.unsafeEntry, mentioning: ["abc_measurement_analysis_sample"])
        ),
        // With links allowed, libarchive's backend reads the LZMA target through libarchive (as the peer
        // does); our reader decodes stored and deflate only and names the entry and the method.
        PeerCase(
            file: la + "test_read_format_zip_7z_lzma.zip",
            variant: "links allowed",
            peer: "LZMA symlink target",
            zip: unsupported("abc_measurement_analysis_sample", "LZMA"),
            libarchive: .reads([
                "_installdir/abc_tools/2000.9-beta11/bin/abc_measurement_analysis_sample": .symlink(
                    to: "../samples/abc_measurement_analysis_sample/src/abc_measurement_analysis_sample.py"
                ),
                "_installdir/abc_tools/2000.9-beta11/samples/abc_measurement_analysis_sample/src/abc_measurement_analysis_sample.py":
                    .size(250),
            ]),
            options: links
        ),
        // test_read_format_zip_bz2_hang_on_invalid: invalid bzip2 data must fail, not hang. It has no
        // central directory (a streaming sample): we refuse it before decoding anything.
        .same(la + "test_read_format_zip_bz2_hang.zip", peer: "ARCHIVE_FATAL, no hang", .refuses(.corruptArchive)),
        // test_read_format_zip_bzip2_one_file: vimrc, CRC-32 0xBA8E3BAA.
        PeerCase(
            file: la + "test_read_format_zip_bzip2.zipx",
            peer: "vimrc (bzip2)",
            zip: unsupported("vimrc", "bzip2"),
            libarchive: .reads(["vimrc": vimrc])
        ),
        // test_read_format_zip_bzip2_multi: smartd.conf, ts.conf, vimrc with their CRC-32s.
        PeerCase(
            file: la + "test_read_format_zip_bzip2_multi.zipx",
            peer: "3 files (bzip2)",
            zip: unsupported("smartd.conf", "bzip2"),
            libarchive: .reads(trio)
        ),
        // test_read_format_zip_comment_stored: an archive comment; file0 and build.sh.
        .same(
            la + "test_read_format_zip_comment_stored_1.zip",
            peer: "file0, build.sh",
            .reads(["file0": .bytes([]), "build.sh": buildSh])
        ),
        .same(
            la + "test_read_format_zip_comment_stored_2.zip",
            peer: "file0, build.sh",
            .reads(["file0": .checksum(size: 81514, crc32: 0x2B28_4D36), "build.sh": buildSh])
        ),
        // test_read_format_zip_encryption_data: PKWARE strong encryption; reading data fails.
        .same(
            la + "test_read_format_zip_encryption_data.zip",
            peer: "bar.txt, foo.txt encrypted; data fails",
            .refuses(.unsupportedEncryption, mentioning: ["bar.txt"]),
            options: ExtractOptions(password: "12345678")
        ),
        // test_read_format_zip_encryption_header: the central directory itself is encrypted.
        .same(
            la + "test_read_format_zip_encryption_header.zip",
            peer: "metadata encrypted",
            .refuses(.unsupportedEncryption),
            options: ExtractOptions(password: "12345678")
        ),
        // test_read_format_zip_encryption_partially: bar.txt plain, foo.txt strongly encrypted.
        .same(
            la + "test_read_format_zip_encryption_partially.zip",
            peer: "foo.txt encrypted",
            .refuses(.unsupportedEncryption, mentioning: ["foo.txt"]),
            options: ExtractOptions(password: "12345678")
        ),
        // test_read_format_zip_extra_padding: read by the streaming reader; its end record is damaged,
        // so there is no central directory for us (we do not stream).
        .same(la + "test_read_format_zip_extra_padding.zip", peer: "streamed: entry a", .refuses(.corruptArchive)),
        // test_read_format_zip_filename: names in CP866, KOI8-R and CP932 are converted with an explicit
        // hdrcharset option; without one (and without a UTF-8 flag) we read code page 437, as python does.
        .same(
            la + "test_read_format_zip_filename_cp866.zip",
            peer: "ПРИВЕТ, привет with hdrcharset=CP866",
            .reads([
                "ÅÉêéàÆ": .checksum(size: 6, crc32: 0x1481_E1CC), "»α¿óÑΓ": .checksum(size: 6, crc32: 0x1481_E1CC),
            ])
        ),
        // CP932 puts 0x5C (\) inside characters: read as CP437, those become separators (inside the destination).
        .same(
            la + "test_read_format_zip_filename_cp932.zip",
            peer: "表だよ/一覧表.txt, 表だよ/漢字.txt with hdrcharset=CP932",
            .reads([
                "ò/é╛éµ/êΩùùò/.txt": .checksum(size: 5, crc32: 0xF7D1_8982),
                "ò/é╛éµ/è┐ÄÜ.txt": .checksum(size: 5, crc32: 0x426F_9DDC),
            ])
        ),
        .same(
            la + "test_read_format_zip_filename_koi8r.zip",
            peer: "ПРИВЕТ, привет with hdrcharset=KOI8-R",
            .reads([
                "╨╥╔╫┼╘": .checksum(size: 6, crc32: 0x1481_E1CC), "≡≥Θ≈σ⌠": .checksum(size: 6, crc32: 0x1481_E1CC),
            ])
        ),
        // test_read_format_zip_filename_UTF8_UTF8: 表だよ/, 表だよ/一覧表.txt, 表だよ/漢字.txt (5 bytes each).
        .same(
            la + "test_read_format_zip_filename_utf8_jp.zip",
            peer: "表だよ/一覧表.txt, 表だよ/漢字.txt",
            .reads([
                "表だよ/一覧表.txt": .checksum(size: 5, crc32: 0xF7D1_8982),
                "表だよ/漢字.txt": .checksum(size: 5, crc32: 0x426F_9DDC),
            ])
        ),
        .same(
            la + "test_read_format_zip_filename_utf8_ru.zip",
            peer: "ПРИВЕТ, привет",
            .reads([
                "ПРИВЕТ": .checksum(size: 6, crc32: 0x1481_E1CC), "привет": .checksum(size: 6, crc32: 0x1481_E1CC),
            ])
        ),
        // utf8_ru2: one name flagged UTF-8, one KOI8-R without the flag (read as code page 437).
        .same(
            la + "test_read_format_zip_filename_utf8_ru2.zip",
            peer: "привет (UTF-8) and a KOI8-R name",
            .reads([
                "≡≥Θ≈σ⌠": .checksum(size: 6, crc32: 0x1481_E1CC), "привет": .checksum(size: 6, crc32: 0x1481_E1CC),
            ])
        ),
        // test_read_format_zip_high_compression: 262,304 bytes from 437 (a ratio under our default limit).
        .same(
            la + "test_read_format_zip_high_compression.zip",
            peer: "char.bin, 262304 bytes",
            .reads(["char.bin": .checksum(size: 262_304, crc32: 0x5F1C_1D17)])
        ),
        // test_read_format_zip_jar: somedir/ is a directory (AE_IFDIR | 0775).
        .same(la + "test_read_format_zip_jar.jar", peer: "somedir/ directory", .reads(["somedir": .directory])),
        // test_read_format_zip (test_extract_length_at_end): hello.txt = "hello\n".
        .same(
            la + "test_read_format_zip_length_at_end.zip",
            peer: "hello.txt = hello\\n",
            .reads(["hello.txt": .text("hello\n")])
        ),
        // test_read_format_zip_lzma_one_file: vimrc.
        PeerCase(
            file: la + "test_read_format_zip_lzma.zipx",
            peer: "vimrc (lzma)",
            zip: unsupported("vimrc", "LZMA"),
            libarchive: .reads(["vimrc": vimrc])
        ),
        // test_read_format_zip_lzma_alone_leak (OSSFuzz 14470): reading fails, no leak, no crash.
        // A streaming sample without central directory.
        .same(
            la + "test_read_format_zip_lzma_alone_leak.zipx",
            peer: "ARCHIVE_FAILED then ARCHIVE_FATAL",
            .refuses(.corruptArchive)
        ),
        // test_read_format_zip_lzma_multi: the trio.
        PeerCase(
            file: la + "test_read_format_zip_lzma_multi.zipx",
            peer: "3 files (lzma)",
            zip: unsupported("smartd.conf", "LZMA"),
            libarchive: .reads(trio)
        ),
        // test_read_format_zip_lzma_stream_end: vimrc, LZMA with an end-of-stream marker.
        PeerCase(
            file: la + "test_read_format_zip_lzma_stream_end.zipx",
            peer: "vimrc (lzma, EOS marker)",
            zip: unsupported("vimrc", "LZMA"),
            libarchive: .reads(["vimrc": vimrc])
        ),
        // test_read_format_zip_mac_metadata: with mac-ext libarchive folds __MACOSX/._file3 into file3's
        // metadata; we keep AppleDouble files as the plain entries the archive lists.
        .same(
            la + "test_read_format_zip_mac_metadata.zip",
            peer: "file3 (+ AppleDouble metadata)",
            .reads([
                "file3": .checksum(size: 8, crc32: 0x0D53_2A24), "__MACOSX": .directory,
                "__MACOSX/._file3": .checksum(size: 287, crc32: 0xBE17_3CF8),
            ])
        ),
        // test_read_format_zip_malformed1: a fuzzed header must not crash. No central directory.
        .same(la + "test_read_format_zip_malformed1.zip", peer: "an error, no crash", .refuses(.corruptArchive)),
        // test_read_format_zip_msdos: the MS-DOS directory attribute makes a directory of a name without "/".
        .same(
            la + "test_read_format_zip_msdos.zip",
            peer: "MS-DOS directory attribute",
            .reads([
                "abc": .bytes([]), "def": .directory, "def/foo": .bytes([]), "ghi": .directory, "jkl": .directory,
                "mno": .directory,
            ])
        ),
        // test_read_format_zip_nested: small.zip (211 bytes, itself a zip) and file.txt (53 bytes); not recursed.
        .same(
            la + "test_read_format_zip_nested.zip",
            peer: "small.zip (211), file.txt (53)",
            .reads([
                "small.zip": .checksum(size: 211, crc32: 0x6975_F4BD),
                "file.txt": .text("The zip archive metadata is not displayed correctly.\n"),
            ])
        ),
        // test_read_format_zip_nofiletype: modes without file-type bits: file1 is a file, dir2/ a directory.
        .same(
            la + "test_read_format_zip_nofiletype.zip",
            peer: "file1 (regular), dir2/ (directory)",
            .reads(["file1": .text("file1\n"), "dir2": .directory])
        ),
        // test_read_format_zip_padded: three archives with padding around the entries; file0 and file1.
        .same(
            la + "test_read_format_zip_padded1.zip",
            peer: "file0, file1",
            .reads(["file0": .text("file0\n"), "file1": .text("file1\n")])
        ),
        .same(
            la + "test_read_format_zip_padded2.zip",
            peer: "file0, file1",
            .reads(["file0": .text("file0\n"), "file1": .text("file1\n")])
        ),
        .same(
            la + "test_read_format_zip_padded3.zip",
            peer: "file0, file1",
            .reads(["file0": .text("file0\n"), "file1": .text("file1\n")])
        ),
        // test_read_format_zip_pkware_unix: PKWARE Unix extra field; file1 = "hello\n".
        .same(la + "test_read_format_zip_pkware_unix.zip", peer: "file1", .reads(["file1": .text("hello\n")])),
        // test_read_format_zip_ppmd_one_file: vimrc.
        PeerCase(
            file: la + "test_read_format_zip_ppmd8.zipx",
            peer: "vimrc (ppmd)",
            zip: unsupported("vimrc", "PPMd"),
            libarchive: .reads(["vimrc": vimrc])
        ),
        // PPMd inside WinZip AES, streamed; the corpus does not give its password: we check the refusals.
        // Ours refuses the method inside before asking for a password.
        PeerCase(
            file: la + "test_read_format_zip_ppmd8_aes256_streaming.zipx",
            variant: "no password",
            peer: "encrypted_file.txt (AES-256 over PPMd)",
            zip: .refuses(.unsupportedMethod, mentioning: ["encrypted_file.txt", "AES", "PPMd"]),
            libarchive: .refuses(.passwordRequired, mentioning: ["encrypted_file.txt"])
        ),
        PeerCase(
            file: la + "test_read_format_zip_ppmd8_aes256_streaming.zipx",
            variant: "wrong password",
            peer: "encrypted_file.txt (AES-256 over PPMd)",
            zip: .refuses(.unsupportedMethod, mentioning: ["encrypted_file.txt", "PPMd"]),
            libarchive: .refuses(.wrongPassword, mentioning: ["encrypted_file.txt"]),
            options: ExtractOptions(password: "not the password")
        ),
        // test_read_format_zip_ppmd8_crash_1/2: invalid PPMd data must fail (ARCHIVE_FATAL), not loop.
        // Both start with a spanning marker and have no central directory.
        .same(
            la + "test_read_format_zip_ppmd8_crash_1.zipx",
            peer: "ARCHIVE_FATAL, no loop",
            .refuses(.corruptArchive)
        ),
        .same(
            la + "test_read_format_zip_ppmd8_crash_2.zipx",
            peer: "ARCHIVE_FATAL, no loop",
            .refuses(.corruptArchive)
        ),
        // test_read_format_zip_ppmd_multi: the trio.
        PeerCase(
            file: la + "test_read_format_zip_ppmd8_multi.zipx",
            peer: "3 files (ppmd)",
            zip: unsupported("smartd.conf", "PPMd"),
            libarchive: .reads(trio)
        ),
        // test_read_format_zip_sfx: a self-extractor stub in front; file0 and build.sh.
        .same(
            la + "test_read_format_zip_sfx",
            peer: "file0, build.sh after the stub",
            .reads(["file0": .bytes([]), "build.sh": buildSh])
        ),
        // test_read_format_zip_size_exceeds_declared: more data than declared is an error.
        .same(
            la + "test_read_format_zip_size_exceeds_declared_deflate.zip",
            peer: "first: more data than declared",
            .refuses(.corruptArchive, mentioning: ["first"])
        ),
        .same(
            la + "test_read_format_zip_size_exceeds_declared_stored.zip",
            peer: "first: more data than declared",
            .refuses(.corruptArchive, mentioning: ["first"])
        ),
        // test_read_format_zip (test_symlink): file, and symlink -> "file".
        .same(
            la + "test_read_format_zip_symlink.zip",
            "links refused",
            peer: "symlink -> file",
            .refuses(.unsafeEntry, mentioning: ["symlink"])
        ),
        .same(
            la + "test_read_format_zip_symlink.zip",
            "links allowed",
            peer: "symlink -> file",
            .reads(["file": .checksum(size: 5, crc32: 0x2FEC_89C1), "symlink": .symlink(to: "file")]),
            options: links
        ),
        // test_read_format_zip_symlink_unsupported_compression: the link's method (200) is unknown: an error.
        .same(
            la + "test_read_format_zip_symlink_unsupported_compression.zip",
            "links refused",
            peer: "bad_symlink: unsupported method",
            .refuses(.unsafeEntry, mentioning: ["bad_symlink"])
        ),
        .same(
            la + "test_read_format_zip_symlink_unsupported_compression.zip",
            "links allowed",
            peer: "bad_symlink: unsupported method",
            unsupported("bad_symlink", "200"),
            options: links
        ),
        // test_read_format_zip_traditional_encryption_data: without a password reading fails; with
        // "12345678" both 495-byte files read.
        .same(
            la + "test_read_format_zip_traditional_encryption_data.zip",
            "no password",
            peer: "bar.txt, foo.txt: data fails without password",
            .refuses(.passwordRequired, mentioning: ["password"])
        ),
        // (Our reader decrypts entries in parallel: either entry may be the one reported.)
        PeerCase(
            file: la + "test_read_format_zip_traditional_encryption_data.zip",
            variant: "wrong password",
            peer: "bar.txt, foo.txt",
            zip: .refuses(.wrongPassword, mentioning: ["password does not decrypt"]),
            libarchive: .refuses(.wrongPassword, mentioning: ["passphrase"]),
            options: ExtractOptions(password: "87654321")
        ),
        .same(
            la + "test_read_format_zip_traditional_encryption_data.zip",
            "password 12345678",
            peer: "bar.txt, foo.txt, 495 bytes each",
            .reads([
                "bar.txt": .checksum(size: 495, crc32: 0xA4D8_FD47),
                "foo.txt": .checksum(size: 495, crc32: 0xB493_C7EB),
            ]),
            options: ExtractOptions(password: "12345678")
        ),
        // test_read_format_zip_uncompressed_size_off_by_4gib: the declared size is 4 GiB too large: an error.
        .same(
            la + "test_read_format_zip_uncompressed_size_off_by_4gib.zip",
            "default limits",
            peer: "hello.txt: declared size off by 4 GiB",
            .refuses(.limitExceeded, mentioning: ["hello.txt"])
        ),
        .same(
            la + "test_read_format_zip_uncompressed_size_off_by_4gib.zip",
            "limits raised",
            peer: "hello.txt: declared size off by 4 GiB",
            .refuses(.corruptArchive, mentioning: ["hello.txt"]),
            options: ExtractOptions(maxTotalBytes: 8 << 30, maxCompressionRatio: .infinity)
        ),
        // test_read_format_zip (test_info_zip_ux): file1 = "hello\nhello\nhello\n".
        .same(
            la + "test_read_format_zip_ux.zip",
            peer: "file1 = hello x3",
            .reads(["file1": .text("hello\nhello\nhello\n")])
        ),
        // test_read_format_zip_winzip_aes128/256/256_stored: README (6818 bytes) with "password".
        PeerCase(
            file: la + "test_read_format_zip_winzip_aes128.zip",
            variant: "no password",
            peer: "README: data fails",
            zip: .refuses(.passwordRequired, mentioning: ["README"]),
            libarchive: .refuses(.passwordRequired, mentioning: ["README"])
        ),
        PeerCase(
            file: la + "test_read_format_zip_winzip_aes128.zip",
            variant: "password",
            peer: "README, 6818 bytes",
            zip: .reads(["README": .size(6818)]),
            libarchive: .reads(["README": .size(6818)]),
            options: ExtractOptions(password: "password")
        ),
        PeerCase(
            file: la + "test_read_format_zip_winzip_aes256.zip",
            variant: "password",
            peer: "README, 6818 bytes",
            zip: .reads(["README": .size(6818)]),
            libarchive: .reads(["README": .size(6818)]),
            options: ExtractOptions(password: "password")
        ),
        PeerCase(
            file: la + "test_read_format_zip_winzip_aes256.zip",
            variant: "wrong password",
            peer: "README",
            zip: .refuses(.wrongPassword, mentioning: ["README", "verifier"]),
            libarchive: .refuses(.wrongPassword, mentioning: ["README"]),
            options: ExtractOptions(password: "not the password")
        ),
        PeerCase(
            file: la + "test_read_format_zip_winzip_aes256_stored.zip",
            variant: "password",
            peer: "README, 6818 bytes",
            zip: .reads(["README": .size(6818)]),
            libarchive: .reads(["README": .size(6818)]),
            options: ExtractOptions(password: "password")
        ),
        // test_read_format_zip_winzip_aes256_large: four files with "password".
        PeerCase(
            file: la + "test_read_format_zip_winzip_aes256_large.zip",
            variant: "password",
            peer: "4 files",
            zip: .reads(aesLarge),
            libarchive: .reads(aesLarge),
            options: ExtractOptions(password: "password")
        ),
        // The same four files AES-encrypted over bzip2, LZMA, PPMd, xz and zstd. libarchive 3.6.2 cannot
        // decrypt and then decompress these methods (newer versions can): the libarchive backend says so
        // with .unsupportedMethod, naming the method (which entry fails first depends on which parallel
        // worker gets there first); ours refuses the method inside before reading anything.
        PeerCase(
            file: la + "test_read_format_zip_winzip_aes256_large_bzip2.zip",
            variant: "password",
            peer: "4 files",
            zip: .refuses(.unsupportedMethod, mentioning: ["Makefile", "AES", "bzip2"]),
            libarchive: .refuses(.unsupportedMethod, mentioning: ["bzip2", "AES"]),
            options: ExtractOptions(password: "password")
        ),
        PeerCase(
            file: la + "test_read_format_zip_winzip_aes256_large_lzma.zip",
            variant: "password",
            peer: "4 files",
            zip: .refuses(.unsupportedMethod, mentioning: ["Makefile", "AES", "LZMA"]),
            libarchive: .refuses(.unsupportedMethod, mentioning: ["LZMA", "AES"]),
            options: ExtractOptions(password: "password")
        ),
        PeerCase(
            file: la + "test_read_format_zip_winzip_aes256_large_ppmd.zip",
            variant: "password",
            peer: "4 files",
            zip: .refuses(.unsupportedMethod, mentioning: ["Makefile", "AES", "PPMd"]),
            libarchive: .refuses(.unsupportedMethod, mentioning: ["PPMd", "AES"]),
            options: ExtractOptions(password: "password")
        ),
        PeerCase(
            file: la + "test_read_format_zip_winzip_aes256_large_xz.zip",
            variant: "password",
            peer: "4 files",
            zip: .refuses(.unsupportedMethod, mentioning: ["Makefile", "AES", "xz"]),
            libarchive: .refuses(.unsupportedMethod, mentioning: ["xz", "AES"]),
            options: ExtractOptions(password: "password")
        ),
        PeerCase(
            file: la + "test_read_format_zip_winzip_aes256_large_zstd.zip",
            variant: "password",
            peer: "4 files",
            zip: .refuses(.unsupportedMethod, mentioning: ["config.h", "AES", "zstd"]),
            libarchive: .refuses(.unsupportedMethod, mentioning: ["zstd", "AES"]),
            options: ExtractOptions(password: "password")
        ),
        // test_read_format_zip_with_invalid_traditional_eocd: a zip64 archive whose plain end record is
        // all 0xFF: read through the zip64 records; test1.txt and test2.txt, empty.
        .same(
            la + "test_read_format_zip_with_invalid_traditional_eocd.zip",
            peer: "test1.txt, test2.txt",
            .reads(["test1.txt": .bytes([]), "test2.txt": .bytes([])])
        ),
        // test_read_format_zip_xz_multi: bash.bashrc, pacman.conf, profile with their CRC-32s.
        PeerCase(
            file: la + "test_read_format_zip_xz_multi.zipx",
            peer: "3 files (xz)",
            zip: unsupported("bash.bashrc", "xz"),
            libarchive: .reads([
                "bash.bashrc": .checksum(size: 2245, crc32: 0xF751_B8C9),
                "pacman.conf": .checksum(size: 2566, crc32: 0xB20B_7F88),
                "profile": .checksum(size: 6601, crc32: 0x2329_F054),
            ])
        ),
        // test_read_format_zip_zip64a/b: "echo file0 | zip": "-" = "file0\n" (mode 0660).
        .same(la + "test_read_format_zip_zip64a.zip", peer: "- = file0\\n", .reads(["-": .text("file0\n")])),
        .same(la + "test_read_format_zip_zip64b.zip", peer: "- = file0\\n", .reads(["-": .text("file0\n")])),
        // test_read_format_zip_zipx_lzma_oom: must fail without exhausting memory. No central directory.
        .same(la + "test_read_format_zip_zipx_lzma_oom.zipx", peer: "an error, no OOM", .refuses(.corruptArchive)),
        // test_read_format_zip_zstd_one_file: vimrc.
        PeerCase(
            file: la + "test_read_format_zip_zstd.zipx",
            peer: "vimrc (zstd)",
            zip: unsupported("vimrc", "zstd"),
            libarchive: .reads(["vimrc": vimrc])
        ),
        // test_read_format_zip_zstd_multi: the trio.
        PeerCase(
            file: la + "test_read_format_zip_zstd_multi.zipx",
            peer: "3 files (zstd)",
            zip: unsupported("smartd.conf", "zstd"),
            libarchive: .reads(trio)
        ),
    ]
}

// MARK: - Tests

/// Every file of the peer corpora, read by both unarchivers with the outcome the peer expects.
@Suite(.enabled(if: PeerCorpus.corpus.suitesRun, PeerCorpus.corpus.skipReason))
struct PeerCorpusTests {
    @Test(arguments: PeerCase.all, Backend.allCases)
    func peerArchive(_ testCase: PeerCase, _ backend: Backend) async throws {
        let corpus = try PeerCorpus.corpus.root()
        let scratch = try Scratch()
        defer { scratch.remove() }
        var archive = corpus.appendingPathComponent(testCase.file)
        try #require(FileManager.default.fileExists(atPath: archive.path), "\(testCase.file) is not in the corpus")
        if archive.pathExtension == "bz2" {
            // rc-zip keeps its largest sample bzip2-compressed; decompress it into this test's directory.
            let plain = scratch.path(archive.deletingPathExtension().lastPathComponent)
            try await Subprocess.check(
                "python3",
                [
                    "-c", "import bz2, shutil, sys; shutil.copyfileobj(bz2.open(sys.argv[1]), open(sys.argv[2], 'wb'))",
                    archive.path, plain.path,
                ]
            )
            archive = plain
        }
        try await Verify.extraction(
            archive,
            with: backend,
            options: testCase.options,
            in: scratch,
            expecting: testCase.outcome(for: backend),
            escapes: testCase.escapes,
            corpus: corpus
        )
    }

    /// Every file in the corpus has a case, and every case names a file that is there: a file
    /// added to the corpus without an expectation fails here.
    @Test func everyCorpusFileHasACase() throws {
        let corpus = try PeerCorpus.corpus.root()
        var files: Set<String> = []
        for folder in PeerCorpus.folders {
            for name in try FileManager.default.contentsOfDirectory(atPath: corpus.appendingPathComponent(folder).path)
            {
                files.insert(folder + "/" + name)
            }
        }
        let covered = Set(PeerCase.all.map(\.file))
        #expect(files.subtracting(covered).sorted() == [], "corpus files without a case")
        #expect(covered.subtracting(files).sorted() == [], "cases naming files that are not in the corpus")
        let top = try FileManager.default.contentsOfDirectory(atPath: corpus.path).filter { $0 != "README.md" }
        #expect(Set(top) == Set(PeerCorpus.folders), "corpus folders")
    }

    /// The modes the peers assert, as our listing reports them (extraction keeps owner bits only).
    @Test(arguments: Backend.allCases)
    func listedModes(_ backend: Backend) async throws {
        let corpus = try PeerCorpus.corpus.root()
        func modes(_ file: String) async throws -> [String: UInt16?] {
            let entries = try await backend.unarchiver.entries(
                of: corpus.appendingPathComponent(file),
                options: ExtractOptions()
            )
            return Dictionary(uniqueKeysWithValues: entries.map { ($0.path, $0.permissions) })
        }
        // Go: unix.zip's readonly is 0444, hello and dir/bar 0666, dir/empty 0777.
        #expect(
            try await modes(PeerCase.go + "unix.zip") == [
                "hello": 0o666, "dir/bar": 0o666, "dir/empty": 0o777, "readonly": 0o444,
            ]
        )
        // libarchive test_compat_zip_4: foo 0412, bar 0567, baz 0644.
        #expect(try await modes(PeerCase.la + "test_compat_zip_4.zip") == ["foo": 0o412, "bar": 0o567, "baz": 0o644])
        // libarchive test_read_format_zip_zip64a: 0660.
        #expect(try await modes(PeerCase.la + "test_read_format_zip_zip64a.zip") == ["-": 0o660])
        // Go's winxp.zip records MS-DOS attributes only: no Unix mode to report.
        #expect(try await modes(PeerCase.go + "winxp.zip").values.allSatisfy { $0 == nil })
    }
}
