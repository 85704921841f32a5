import Foundation
import HotCore

/// The conformance suite of `Unarchiver`: the whole safety contract, checked through the
/// public API with archives the suite builds itself (``RawZipArchive``).
///
/// The checks, each a ``ConformanceCheck``:
/// - valid archives extract byte-identical (stored and deflated entries, directories, an
///   empty file, a UTF-8 name), into a missing or an existing empty destination, and the
///   archive file is left untouched;
/// - the listing matches what extraction writes; `ExtractOptions.fileHasher` digests every
///   file; limits exactly reached are admitted;
/// - hostile archives (zip-slip with `../` in any position, backslashes and absolute paths,
///   symbolic links refused by default or escaping under
///   `ExtractOptions.SymlinkPolicy.allowWithinDestination`, writes through a link, duplicate names, device
///   and FIFO entries, empty and NUL names, CRC and size lies, inflation past the declared
///   size, compression bombs, too many entries, long names, truncated files and files that
///   are no archive) are refused with the documented `HotUpdateError` code, and leave
///   nothing behind: neither in the destination (which stays missing, or empty), nor beside
///   it (no staging directory), nor at the place an entry aimed for;
/// - WinZip AES (an AES-256 entry 7-Zip wrote): it extracts with its password; a wrong password,
///   an altered password verifier, a tampered authentication code, a flipped byte of ciphertext,
///   an entry too short for its salt, and an AES extra field that lies (unknown strength or
///   vendor version, a vendor other than "AE", an unsupported method inside, a strength other
///   than the data's, no field at all) are each refused with their own code, leaving nothing
///   behind;
/// - listing refuses unsafe names, non-archives and too many entries the same way.
///
/// Each check makes a fresh unarchiver from the factory. The suite reads ZIP only: an
/// unarchiver of another format has to pass the same contract with its own fixtures.
///
/// ```swift
/// let suite = UnarchiverConformance { MyUnarchiver() }
///
/// @Test(arguments: suite.checks)
/// func conforms(_ check: ConformanceCheck) async throws { try await check.run() }
/// ```
public struct UnarchiverConformance: Sendable {
    /// Makes the unarchiver under test.
    public let makeUnarchiver: @Sendable () -> any Unarchiver
    /// Whether the unarchiver reads WinZip AES entries: then a valid one must extract and each
    /// hostile one be refused with its own code; else refusing them all with
    /// `HotUpdateError.Code.unsupportedEncryption` is conforming too.
    public let readsWinZipAES: Bool

    /// Creates the suite.
    ///
    /// - Parameters:
    ///   - readsWinZipAES: Whether the unarchiver reads WinZip AES entries (see ``readsWinZipAES``).
    ///   - makeUnarchiver: Makes the unarchiver under test; called once per check.
    public init(readsWinZipAES: Bool = true, makeUnarchiver: @escaping @Sendable () -> any Unarchiver) {
        self.readsWinZipAES = readsWinZipAES
        self.makeUnarchiver = makeUnarchiver
    }

    /// Every check of the suite.
    public var checks: [ConformanceCheck] {
        validChecks + (readsWinZipAES ? [winZipAESCheck] : [])
            + (Self.hostileCases + Self.winZipAESCases(readsWinZipAES: readsWinZipAES)).map(hostileCheck)
            + listingChecks
    }

    static let suite = "Unarchiver"

    private func check(
        _ name: String,
        _ contract: String,
        _ body: @escaping @Sendable (any Unarchiver, URL) async throws -> Void
    ) -> ConformanceCheck {
        let make = makeUnarchiver
        return ConformanceCheck(suite: Self.suite, name: name, contract: contract) {
            try await Conformance.withScratch(Self.suite) { scratch in try await body(make(), scratch) }
        }
    }
}

// MARK: - Valid archives

extension UnarchiverConformance {
    /// The valid archive's content: path to bytes; directories end with `/`.
    static let validContent: [(String, [UInt8])] = [
        ("readme.txt", Array("Hello from a conformance archive.\n".utf8)),
        ("dir/", []),
        ("dir/nested/data.bin", Conformance.bytes(4096, seed: 11)),
        ("empty.txt", []),
        ("unicode/caf\u{e9} \u{65e5}\u{672c}.txt", Array("UTF-8 name".utf8)),
    ]
    static let deflatedName = "dir/zeros.bin"
    static let deflatedCount = 300_000

    static var validArchive: RawZipArchive {
        var entries: [RawZipArchive.Entry] = validContent.map { path, bytes in
            path.hasSuffix("/") ? .directory(path) : .file(path, bytes)
        }
        entries.append(.deflatedRun(deflatedName, byte: 0, count: deflatedCount))
        return RawZipArchive(entries)
    }

    /// The files the valid archive holds, path to content.
    static var validFiles: [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for (path, bytes) in validContent where !path.hasSuffix("/") { files[path] = bytes }
        files[deflatedName] = [UInt8](repeating: 0, count: deflatedCount)
        return files
    }

    /// Checks that `destination` holds exactly the valid archive's tree.
    static func requireValidTree(at destination: URL, report: ExtractionReport) throws {
        let tree = Conformance.tree(destination)
        var expected: [String: String] = [:]
        for (path, bytes) in validFiles {
            expected[path] = "file \(bytes.count) \(FNV1a.hash(bytes))"
            var parent = (path as NSString).deletingLastPathComponent
            while !parent.isEmpty {
                expected[parent] = "dir"
                parent = (parent as NSString).deletingLastPathComponent
            }
        }
        try Conformance.require(
            tree == expected,
            "the extracted tree differs from the archive: \(Conformance.difference(expected, tree))"
        )
        let reported = Dictionary(report.files.map { ($0.path, $0.size) }, uniquingKeysWith: { first, _ in first })
        try Conformance.require(
            reported == validFiles.mapValues { Int64($0.count) },
            "the report lists files \(reported.sorted { $0.key < $1.key }), expected \(validFiles.mapValues(\.count).sorted { $0.key < $1.key })"
        )
        let total = validFiles.values.reduce(Int64(0)) { $0 + Int64($1.count) }
        try Conformance.require(
            report.totalBytes == total,
            "the report says \(report.totalBytes) bytes were written, not \(total)"
        )
        for directory in report.directories {
            try Conformance.require(
                tree[directory] == "dir",
                "the report names directory '\(directory)' but the destination has none"
            )
        }
    }

    var validChecks: [ConformanceCheck] {
        [
            check(
                "valid archive extracts byte-identical",
                "a valid archive is extracted into a missing destination exactly: every file byte-identical, no other file, the archive untouched"
            ) { unarchiver, scratch in
                let archive = scratch.appendingPathComponent("valid.zip")
                try Self.validArchive.write(to: archive)
                let destination = scratch.appendingPathComponent("sandbox/out")
                try FileManager.default.createDirectory(
                    at: destination.deletingLastPathComponent(),
                    withIntermediateDirectories: true
                )
                let report = try await unarchiver.extract(archive, to: destination, options: ExtractOptions())
                try Self.requireValidTree(at: destination, report: report)
                let siblings = try FileManager.default.contentsOfDirectory(
                    atPath: destination.deletingLastPathComponent().path
                )
                try Conformance.require(siblings == ["out"], "extraction left \(siblings) beside the destination")
                try Conformance.require(
                    Array(try Data(contentsOf: archive)) == Self.validArchive.bytes,
                    "the archive file was modified"
                )
            },
            check(
                "extracts into an existing empty destination",
                "a destination that exists and is empty is accepted and filled"
            ) { unarchiver, scratch in
                let archive = scratch.appendingPathComponent("valid.zip")
                try Self.validArchive.write(to: archive)
                let destination = scratch.appendingPathComponent("out")
                try FileManager.default.createDirectory(at: destination, withIntermediateDirectories: false)
                let report = try await unarchiver.extract(archive, to: destination, options: ExtractOptions())
                try Self.requireValidTree(at: destination, report: report)
            },
            check(
                "listing matches extraction",
                "entries(of:) lists every entry with its kind and declared size, and lists what extraction writes"
            ) { unarchiver, scratch in
                let archive = scratch.appendingPathComponent("valid.zip")
                try Self.validArchive.write(to: archive)
                let entries = try await unarchiver.entries(of: archive, options: ExtractOptions())
                let files = Dictionary(
                    entries.filter { $0.kind == .file }.map { ($0.path, $0) },
                    uniquingKeysWith: { first, _ in first }
                )
                try Conformance.require(
                    Set(files.keys) == Set(Self.validFiles.keys),
                    "the listing's files are \(files.keys.sorted()), expected \(Self.validFiles.keys.sorted())"
                )
                for (path, content) in Self.validFiles {
                    guard let entry = files[path] else { continue }
                    try Conformance.require(
                        entry.uncompressedSize == Int64(content.count),
                        "'\(path)' is listed with \(entry.uncompressedSize) bytes, not \(content.count)"
                    )
                    if let crc = entry.crc32 {
                        try Conformance.require(
                            crc == RawZipArchive.crc32(content),
                            "'\(path)' is listed with a CRC-32 that is not its own"
                        )
                    }
                }
                let directories = entries.filter { $0.kind == .directory }.map {
                    $0.path.hasSuffix("/") ? String($0.path.dropLast()) : $0.path
                }
                try Conformance.require(
                    directories == ["dir"],
                    "the listing's directories are \(directories), expected [\"dir\"]"
                )
                let report = try await unarchiver.extract(
                    archive,
                    to: scratch.appendingPathComponent("out"),
                    options: ExtractOptions()
                )
                try Conformance.require(
                    Set(report.files.map(\.path)) == Set(files.keys),
                    "extraction wrote \(report.files.map(\.path).sorted()), the listing says \(files.keys.sorted())"
                )
            },
            check(
                "file hasher digests every file",
                "with ExtractOptions.fileHasher set, every extracted file reports the digest of its content"
            ) { unarchiver, scratch in
                let archive = scratch.appendingPathComponent("valid.zip")
                try Self.validArchive.write(to: archive)
                let options = ExtractOptions(fileHasher: { FNVHasher() })
                let report = try await unarchiver.extract(
                    archive,
                    to: scratch.appendingPathComponent("out"),
                    options: options
                )
                for file in report.files {
                    let expected = try Digest(
                        algorithm: FNVHasher.algorithm,
                        bytes: FNVHasher.digestBytes(Self.validFiles[file.path] ?? [])
                    )
                    try Conformance.require(
                        file.digest == expected,
                        "'\(file.path)' reports digest \(file.digest.map(\.description) ?? "nil"), expected \(expected)"
                    )
                }
            },
            check(
                "limits exactly reached are admitted",
                "an archive with exactly maxEntries entries, maxTotalBytes bytes and a name of maxNameLength bytes extracts"
            ) { unarchiver, scratch in
                let archive = scratch.appendingPathComponent("edge.zip")
                let name = "d/" + String(repeating: "n", count: 30)
                try RawZipArchive([
                    .file("a.bin", [UInt8](repeating: 1, count: 600)), .file(name, [UInt8](repeating: 2, count: 400)),
                ]).write(to: archive)
                let options = ExtractOptions(maxTotalBytes: 1000, maxEntries: 2, maxNameLength: name.utf8.count)
                let listed = try await unarchiver.entries(of: archive, options: options)
                try Conformance.require(listed.count == 2, "the listing holds \(listed.count) entries, not 2")
                let report = try await unarchiver.extract(
                    archive,
                    to: scratch.appendingPathComponent("out"),
                    options: options
                )
                try Conformance.require(
                    report.totalBytes == 1000,
                    "the report says \(report.totalBytes) bytes, not 1000"
                )
            },
        ]
    }
}

// MARK: - Hostile archives

/// A hostile archive and the codes it may be refused with.
struct HostileArchive: Sendable {
    var name: String
    var contract: String
    var codes: Set<HotUpdateError.Code>
    var options: ExtractOptions = ExtractOptions()
    /// Builds the archive's bytes; the argument is a directory outside the destination that
    /// an escaping entry aims at.
    var build: @Sendable (_ outside: URL) -> [UInt8]

    static func zip(_ entries: [RawZipArchive.Entry]) -> @Sendable (URL) -> [UInt8] {
        { _ in RawZipArchive(entries).bytes }
    }
}

extension UnarchiverConformance {
    private static let x: [UInt8] = Array("x".utf8)
    private static let unsafe: Set<HotUpdateError.Code> = [.unsafeEntry]
    private static let corrupt: Set<HotUpdateError.Code> = [.corruptArchive]
    private static let limit: Set<HotUpdateError.Code> = [.limitExceeded]
    private static let allowLinks = ExtractOptions(symlinks: .allowWithinDestination)

    /// A valid five-file archive, for truncations.
    private static var fiveFiles: [UInt8] {
        RawZipArchive((0..<5).map { .file("a\($0).txt", Conformance.bytes(10_000, seed: UInt64($0 + 1))) }).bytes
    }

    /// Sixty good files, then a deflated entry whose CRC is wrong.
    private static var manyGoodThenBad: [RawZipArchive.Entry] {
        var entries: [RawZipArchive.Entry] = []
        for index in 0..<60 {
            let content = Conformance.bytes(2000 + index * 97, seed: UInt64(index + 5))
            entries.append(.file("dir\(index % 7)/file\(index).bin", content))
        }
        entries.append(RawZipArchive.Entry.deflatedRun("zzz/bad.bin", count: 200_000).declaring(crc32: 1))
        return entries
    }

    static let hostileCases: [HostileArchive] = [
        HostileArchive(
            name: "zip-slip ../",
            contract: "an entry named ../evil.txt is refused (unsafeEntry)",
            codes: unsafe,
            build: HostileArchive.zip([.file("ok.txt", x), .file("../evil.txt", x)])
        ),
        HostileArchive(
            name: "zip-slip many levels up",
            contract: "an entry climbing many levels up is refused (unsafeEntry)",
            codes: unsafe,
            build: HostileArchive.zip([.file(String(repeating: "../", count: 40) + "tmp/evil.txt", x)])
        ),
        HostileArchive(
            name: "zip-slip in the middle",
            contract: "a/b/../../../evil.txt is refused (unsafeEntry)",
            codes: unsafe,
            build: HostileArchive.zip([.file("a/b/../../../evil.txt", x)])
        ),
        HostileArchive(
            name: "zip-slip with backslashes",
            contract: "..\\evil.txt is refused (unsafeEntry)",
            codes: unsafe,
            build: HostileArchive.zip([.file("..\\evil.txt", x)])
        ),
        HostileArchive(
            name: "absolute path",
            contract: "an entry with an absolute path is refused (unsafeEntry)",
            codes: unsafe,
            build: { outside in RawZipArchive([.file(outside.appendingPathComponent("abs.txt").path, x)]).bytes }
        ),
        HostileArchive(
            name: "symlink refused by default",
            contract: "with the default ExtractOptions.SymlinkPolicy.refuse any symlink entry is refused (unsafeEntry)",
            codes: unsafe,
            build: HostileArchive.zip([.file("t.txt", x), .symlink("link", to: "t.txt")])
        ),
        HostileArchive(
            name: "symlink escaping the destination",
            contract: "under allowWithinDestination a link to ../.. is refused (unsafeEntry)",
            codes: unsafe,
            options: allowLinks,
            build: HostileArchive.zip([.symlink("link", to: "../../outside"), .file("link/evil.txt", x)])
        ),
        HostileArchive(
            name: "symlink with an absolute target",
            contract: "under allowWithinDestination a link to an absolute path is refused (unsafeEntry)",
            codes: unsafe,
            options: allowLinks,
            build: { outside in
                RawZipArchive([.symlink("link", to: outside.path), .file("link/evil.txt", x)]).bytes
            }
        ),
        HostileArchive(
            name: "entry written through a symlink",
            contract: "under allowWithinDestination no entry is written through a link (unsafeEntry)",
            codes: unsafe,
            options: allowLinks,
            build: HostileArchive.zip([.directory("sub"), .symlink("link", to: "sub"), .file("link/x.txt", x)])
        ),
        HostileArchive(
            name: "symlink chain climbing out",
            contract: "under allowWithinDestination a link through another link that leaves is refused (unsafeEntry)",
            codes: unsafe,
            options: allowLinks,
            build: HostileArchive.zip([.symlink("up", to: "."), .symlink("esc", to: "up/../x")])
        ),
        HostileArchive(
            name: "duplicate names",
            contract: "two entries with one name are refused (unsafeEntry)",
            codes: unsafe,
            build: HostileArchive.zip([.file("a.txt", Array("one".utf8)), .file("a.txt", Array("two".utf8))])
        ),
        HostileArchive(
            name: "duplicate after normalisation",
            contract: "d/a.txt and ./d//a.txt are the same file and are refused (unsafeEntry)",
            codes: unsafe,
            build: HostileArchive.zip([.file("d/a.txt", Array("one".utf8)), .file("./d//a.txt", Array("two".utf8))])
        ),
        HostileArchive(
            name: "file then directory of one name",
            contract: "a file 'a' and an entry 'a/b.txt' are refused (unsafeEntry)",
            codes: unsafe,
            build: HostileArchive.zip([.file("a", x), .file("a/b.txt", x)])
        ),
        HostileArchive(
            name: "character device",
            contract: "a device entry is never created (unsafeEntry)",
            codes: unsafe,
            build: HostileArchive.zip([.file("dev", [], mode: 0o020644)])
        ),
        HostileArchive(
            name: "FIFO",
            contract: "a FIFO entry is never created (unsafeEntry)",
            codes: unsafe,
            build: HostileArchive.zip([.file("fifo", [], mode: 0o010644)])
        ),
        HostileArchive(
            name: "NUL in a name",
            contract: "a name holding a NUL byte is refused (unsafeEntry)",
            codes: unsafe,
            build: HostileArchive.zip([
                RawZipArchive.Entry(
                    name: Array("a\u{0}b.txt".utf8),
                    payload: x,
                    crc32: RawZipArchive.crc32(x),
                    uncompressedSize: 1
                )
            ])
        ),
        HostileArchive(
            name: "empty name",
            contract: "an entry with an empty name is refused (unsafeEntry)",
            codes: unsafe,
            build: HostileArchive.zip([
                RawZipArchive.Entry(name: [], payload: x, crc32: RawZipArchive.crc32(x), uncompressedSize: 1)
            ])
        ),
        HostileArchive(
            name: "CRC mismatch",
            contract: "a stored entry whose data does not match its CRC-32 is refused (checksumMismatch)",
            codes: [.checksumMismatch],
            build: HostileArchive.zip([
                .file("ok.txt", x), .file("bad.bin", [UInt8](repeating: 66, count: 3000)).declaring(crc32: 0x1234_5678),
            ])
        ),
        HostileArchive(
            name: "late failure removes earlier files",
            contract: "a failure after many good entries leaves none of them (all or nothing)",
            codes: [.checksumMismatch],
            options: ExtractOptions(concurrency: 4),
            build: HostileArchive.zip(manyGoodThenBad)
        ),
        HostileArchive(
            name: "stored sizes disagree",
            contract: "a stored entry declaring 2000 bytes over 1000 stored is refused (corruptArchive)",
            codes: corrupt,
            build: HostileArchive.zip([
                .file("s.txt", [UInt8](repeating: 65, count: 1000)).declaring(uncompressedSize: 2000)
            ])
        ),
        HostileArchive(
            name: "inflates past the declared size",
            contract: "an entry inflating past its declared size is refused (corruptArchive), not trusted",
            codes: corrupt,
            build: HostileArchive.zip([.deflatedRun("lie.bin", count: 100_000).declaring(uncompressedSize: 1000)])
        ),
        HostileArchive(
            name: "inflates short of the declared size",
            contract: "an entry inflating to fewer bytes than declared is refused (corruptArchive)",
            codes: corrupt,
            build: HostileArchive.zip([.deflatedRun("lie.bin", count: 1000).declaring(uncompressedSize: 200_000)])
        ),
        HostileArchive(
            name: "size lie past the byte limit",
            contract:
                "maxTotalBytes is enforced while inflating: entries declaring 1000 bytes that inflate to 1 MiB are refused",
            codes: [.limitExceeded, .corruptArchive],
            options: ExtractOptions(maxTotalBytes: 64 << 10),
            build: HostileArchive.zip(
                (0..<3).map { .deflatedRun("bomb\($0).bin", count: 1 << 20).declaring(uncompressedSize: 1000) }
            )
        ),
        HostileArchive(
            name: "local and central names disagree",
            contract: "a local header naming another file than the central directory is refused (corruptArchive)",
            codes: corrupt,
            build: HostileArchive.zip([
                RawZipArchive.Entry(
                    name: Array("evil.txt".utf8),
                    payload: x,
                    crc32: RawZipArchive.crc32(x),
                    uncompressedSize: 1,
                    localName: Array("good.txt".utf8)
                )
            ])
        ),
        HostileArchive(
            name: "compression ratio bomb",
            contract: "an entry over maxCompressionRatio is refused (limitExceeded)",
            codes: limit,
            options: ExtractOptions(maxCompressionRatio: 100, compressionRatioFloor: 1 << 20),
            build: HostileArchive.zip([.deflatedRun("zeros.bin", count: 4 << 20)])
        ),
        HostileArchive(
            name: "total over the byte limit",
            contract: "entries over maxTotalBytes together are refused (limitExceeded)",
            codes: limit,
            options: ExtractOptions(maxTotalBytes: 1000),
            build: HostileArchive.zip([
                .file("a.bin", [UInt8](repeating: 97, count: 800)), .file("b.bin", [UInt8](repeating: 98, count: 800)),
            ])
        ),
        HostileArchive(
            name: "too many entries",
            contract: "more entries than maxEntries are refused (limitExceeded)",
            codes: limit,
            options: ExtractOptions(maxEntries: 5),
            build: HostileArchive.zip((0..<10).map { .file("f\($0).txt", x) })
        ),
        HostileArchive(
            name: "name over the length limit",
            contract: "a name longer than maxNameLength is refused (limitExceeded)",
            codes: limit,
            options: ExtractOptions(maxNameLength: 32),
            build: HostileArchive.zip([.file("d/" + String(repeating: "n", count: 40), x)])
        ),
        HostileArchive(
            name: "truncated archive",
            contract: "an archive cut in half is refused (corruptArchive or notAnArchive)",
            codes: [.corruptArchive, .notAnArchive],
            build: { _ in Array(fiveFiles.prefix(fiveFiles.count / 2)) }
        ),
        HostileArchive(
            name: "end record cut off",
            contract: "an archive missing its last bytes is refused (corruptArchive or notAnArchive)",
            codes: [.corruptArchive, .notAnArchive],
            build: { _ in Array(fiveFiles.dropLast(10)) }
        ),
        HostileArchive(
            name: "empty file",
            contract: "an empty file is not an archive (notAnArchive)",
            codes: [.notAnArchive],
            build: { _ in [] }
        ),
        HostileArchive(
            name: "random bytes",
            contract: "random bytes are not an archive (notAnArchive)",
            codes: [.notAnArchive],
            build: { _ in Conformance.bytes(5000, seed: 7) }
        ),
        HostileArchive(
            name: "a text file",
            contract: "a text file is not an archive (notAnArchive)",
            codes: [.notAnArchive],
            build: { _ in Array(String(repeating: "hello, this is not a zip\n", count: 10).utf8) }
        ),
    ]

    /// The WinZip AES entry's password.
    static let aesPassword = "conformance"
    /// The WinZip AES entry's plain bytes.
    static let aesContent = Array("HotUpdate conformance: a WinZip AES entry.\n".utf8)
    /// The data of the entry `7z a -tzip -mem=AES256 -mx=0 -pconformance` (7-Zip 26.02) wrote for
    /// ``aesContent``: AE-2, stored, a 16-byte salt, the 2-byte password verifier, 43 encrypted
    /// bytes and the 10-byte authentication code.
    static let aesPayload: [UInt8] = [
        0xf4, 0x11, 0xcd, 0x22, 0x9f, 0xad, 0x02, 0x89, 0x0d, 0x0a, 0xdd, 0xfe, 0x41, 0x40, 0x54, 0xa1,
        0x17, 0x63,
        0x27, 0xc0, 0x6e, 0x58, 0xad, 0xd9, 0x60, 0x7d, 0x4e, 0xfb, 0x29, 0xae, 0x6a, 0xa4, 0x01, 0xea,
        0x82, 0xce, 0x99, 0x66, 0x1f, 0xdf, 0xcf, 0xff, 0x4f, 0xde, 0x91, 0xfa, 0xc2, 0x2c, 0x5b, 0xb2,
        0x8d, 0x51, 0x71, 0x4b, 0xcc, 0x5b, 0x0f, 0x63, 0x6b, 0x9f, 0x62,
        0xd2, 0x89, 0x56, 0xa3, 0xba, 0x08, 0xc1, 0xe9, 0x80, 0xc2,
    ]

    /// The WinZip AES entry, its data or its AES field changed.
    static func aesEntry(
        payload: [UInt8] = aesPayload,
        vendorVersion: UInt16? = 2,
        vendorID: UInt16 = 0x4541,
        strength: UInt8 = 3,
        method: UInt16 = 0
    ) -> RawZipArchive.Entry {
        .winZipAES(
            "secret.txt",
            payload: payload,
            uncompressedSize: UInt32(aesContent.count),
            vendorVersion: vendorVersion,
            vendorID: vendorID,
            strength: strength,
            method: method
        )
    }

    /// `payload` with the byte at `index` flipped.
    private static func flipping(_ index: Int, of payload: [UInt8] = aesPayload) -> [UInt8] {
        var copy = payload
        copy[index] ^= 0x20
        return copy
    }

    var winZipAESCheck: ConformanceCheck {
        check(
            "WinZip AES entry extracts",
            "an AES-256 entry 7-Zip wrote extracts byte-identical with its password"
        ) { unarchiver, scratch in
            let archive = scratch.appendingPathComponent("aes.zip")
            try RawZipArchive([.file("plain.txt", Self.x), Self.aesEntry()]).write(to: archive)
            let destination = scratch.appendingPathComponent("out")
            _ = try await unarchiver.extract(
                archive,
                to: destination,
                options: ExtractOptions(password: Self.aesPassword)
            )
            let tree = Conformance.tree(destination)
            let expected = [
                "plain.txt": "file 1 \(FNV1a.hash(Self.x))",
                "secret.txt": "file \(Self.aesContent.count) \(FNV1a.hash(Self.aesContent))",
            ]
            try Conformance.require(
                tree == expected,
                "the extracted tree differs from the archive: \(Conformance.difference(expected, tree))"
            )
        }
    }

    /// The hostile WinZip AES archives: each behind a good file, so that refusing it has
    /// something to leave behind. An unarchiver that does not read WinZip AES may refuse each
    /// with `unsupportedEncryption`.
    static func winZipAESCases(readsWinZipAES: Bool) -> [HostileArchive] {
        let password = ExtractOptions(password: aesPassword)
        let salt = 16
        func codes(_ code: HotUpdateError.Code...) -> Set<HotUpdateError.Code> {
            Set(code).union(readsWinZipAES ? [] : [.unsupportedEncryption])
        }
        func archive(_ entry: RawZipArchive.Entry) -> @Sendable (URL) -> [UInt8] {
            HostileArchive.zip([.file("ok.txt", x), entry])
        }
        return [
            HostileArchive(
                name: "WinZip AES wrong password",
                contract: "an AES entry given another password is refused (wrongPassword)",
                codes: codes(.wrongPassword),
                options: ExtractOptions(password: "not the password"),
                build: archive(aesEntry())
            ),
            HostileArchive(
                name: "WinZip AES altered password verifier",
                contract: "an AES entry whose password verifier does not match is refused (wrongPassword)",
                codes: codes(.wrongPassword),
                options: password,
                build: archive(aesEntry(payload: flipping(salt)))
            ),
            HostileArchive(
                name: "WinZip AES tampered authentication code",
                contract: "an AES entry whose authentication code was changed is refused (authenticationFailed)",
                codes: codes(.authenticationFailed),
                options: password,
                build: archive(aesEntry(payload: flipping(aesPayload.count - 1)))
            ),
            HostileArchive(
                name: "WinZip AES flipped ciphertext byte",
                contract: "an AES entry with one byte of its ciphertext changed is refused (authenticationFailed)",
                codes: codes(.authenticationFailed),
                options: password,
                build: archive(aesEntry(payload: flipping(salt + 2 + 20)))
            ),
            HostileArchive(
                name: "WinZip AES entry shorter than its salt",
                contract:
                    "an AES-256 entry of 20 bytes cannot hold its 16-byte salt, verifier and code (corruptArchive)",
                codes: codes(.corruptArchive),
                options: password,
                build: archive(aesEntry(payload: Array(aesPayload.prefix(20))))
            ),
            HostileArchive(
                name: "WinZip AES unknown strength",
                contract: "an AES field of strength 4 is refused (unsupportedEncryption)",
                codes: [.unsupportedEncryption],
                options: password,
                build: archive(aesEntry(strength: 4))
            ),
            HostileArchive(
                name: "WinZip AES strength other than the data's",
                contract:
                    "an AES field saying AES-128 over AES-256 data is refused (wrongPassword: the salt is misread)",
                codes: codes(.wrongPassword, .authenticationFailed),
                options: password,
                build: archive(aesEntry(strength: 1))
            ),
            HostileArchive(
                name: "WinZip AES vendor other than AE",
                contract: "an AES field whose vendor is not \"AE\" is refused (corruptArchive)",
                codes: codes(.corruptArchive),
                options: password,
                build: archive(aesEntry(vendorID: 0x4242))
            ),
            HostileArchive(
                name: "WinZip AES vendor version 3",
                contract: "an AES field of vendor version 3 (neither AE-1 nor AE-2) is refused (unsupportedEncryption)",
                codes: [.unsupportedEncryption],
                options: password,
                build: archive(aesEntry(vendorVersion: 3))
            ),
            HostileArchive(
                name: "WinZip AES over an unsupported method",
                contract: "an AES field saying the data is LZMA is refused (unsupportedMethod)",
                codes: codes(.unsupportedMethod),
                options: password,
                build: archive(aesEntry(method: 14))
            ),
            HostileArchive(
                name: "WinZip AES without its extra field",
                contract: "method 99 without an AES extra field is refused (corruptArchive)",
                codes: codes(.corruptArchive),
                options: password,
                build: archive(aesEntry(vendorVersion: nil))
            ),
        ]
    }

    /// Extracts `hostile` into a missing destination and requires a refusal that leaves the
    /// scratch tree, the aimed-at outside directory included, exactly as it was.
    private func hostileCheck(_ hostile: HostileArchive) -> ConformanceCheck {
        check(
            "hostile: \(hostile.name)",
            "\(hostile.contract), leaving nothing in the destination or outside it"
        ) { unarchiver, scratch in
            let outside = scratch.appendingPathComponent("outside", isDirectory: true)
            let sandbox = scratch.appendingPathComponent("sandbox", isDirectory: true)
            try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: sandbox, withIntermediateDirectories: true)
            try Conformance.write(Array("marker".utf8), "marker.txt", under: sandbox)
            let archive = scratch.appendingPathComponent("hostile.zip")
            try Data(hostile.build(outside)).write(to: archive)
            let destination = sandbox.appendingPathComponent("out", isDirectory: true)

            let before = Conformance.tree(scratch)
            let error = try await Conformance.expectError(hostile.codes, "extract") {
                try await unarchiver.extract(archive, to: destination, options: hostile.options)
            }
            try Conformance.require(!error.message.isEmpty, "the error has no message")
            let after = Conformance.tree(scratch)
            try Conformance.require(
                before == after,
                "the refused extraction left the file system changed: \(Conformance.difference(before, after))"
            )

            // An existing empty destination stays in place, empty.
            try FileManager.default.createDirectory(at: destination, withIntermediateDirectories: false)
            let withDestination = Conformance.tree(scratch)
            try await Conformance.expectError(hostile.codes, "extract into an existing empty destination") {
                try await unarchiver.extract(archive, to: destination, options: hostile.options)
            }
            let afterSecond = Conformance.tree(scratch)
            try Conformance.require(
                withDestination == afterSecond,
                "the refused extraction into an existing empty destination left the file system changed: "
                    + Conformance.difference(withDestination, afterSecond)
            )
        }
    }
}

// MARK: - Listing

extension UnarchiverConformance {
    private struct ListingCase {
        var name: String
        var contract: String
        var codes: Set<HotUpdateError.Code>
        var options: ExtractOptions
        var bytes: [UInt8]
    }

    var listingChecks: [ConformanceCheck] {
        let slip: [RawZipArchive.Entry] = [.file("ok.txt", Self.x), .file("../evil", Self.x)]
        let many: [RawZipArchive.Entry] = (0..<10).map { .file("f\($0).txt", Self.x) }
        let text: [UInt8] = Array("hello, this is not a zip\n".utf8)
        let cases: [ListingCase] = [
            ListingCase(
                name: "listing refuses unsafe names",
                contract: "entries(of:) refuses an entry named ../evil (unsafeEntry)",
                codes: Self.unsafe,
                options: ExtractOptions(),
                bytes: RawZipArchive(slip).bytes
            ),
            ListingCase(
                name: "listing refuses too many entries",
                contract: "entries(of:) enforces maxEntries (limitExceeded)",
                codes: Self.limit,
                options: ExtractOptions(maxEntries: 5),
                bytes: RawZipArchive(many).bytes
            ),
            ListingCase(
                name: "listing refuses a non-archive",
                contract: "entries(of:) of a text file throws notAnArchive",
                codes: [.notAnArchive],
                options: ExtractOptions(),
                bytes: text
            ),
            ListingCase(
                name: "listing refuses an empty file",
                contract: "entries(of:) of an empty file throws notAnArchive",
                codes: [.notAnArchive],
                options: ExtractOptions(),
                bytes: []
            ),
        ]
        return cases.map { listing in
            check(listing.name, listing.contract) { unarchiver, scratch in
                let archive = scratch.appendingPathComponent("a.zip")
                try Data(listing.bytes).write(to: archive)
                let before = Conformance.tree(scratch)
                try await Conformance.expectError(listing.codes, "entries(of:)") {
                    try await unarchiver.entries(of: archive, options: listing.options)
                }
                let after = Conformance.tree(scratch)
                try Conformance.require(
                    before == after,
                    "listing changed the file system: \(Conformance.difference(before, after))"
                )
            }
        }
    }
}

/// A digest no implementation knows (64-bit FNV-1a), so a file hasher's results come from the suite.
final class FNVHasher: DigestHasher {
    static let algorithm = Digest.Algorithm(name: "conformance-fnv1a64", byteCount: 8)
    private var hash: UInt64 = 0xcbf2_9ce4_8422_2325

    var algorithm: Digest.Algorithm { Self.algorithm }

    func update(_ bytes: UnsafeRawBufferPointer) {
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
    }

    func finalize() -> Digest {
        guard let digest = try? Digest(algorithm: Self.algorithm, bytes: Self.bytes(of: hash)) else {
            preconditionFailure("an eight-byte digest of an eight-byte algorithm")
        }
        return digest
    }

    static func digestBytes(_ content: [UInt8]) -> [UInt8] { bytes(of: FNV1a.hash(content)) }

    private static func bytes(of value: UInt64) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }
}
