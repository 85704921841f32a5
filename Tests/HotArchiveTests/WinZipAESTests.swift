import Foundation
import HotArchive
import HotCore
import HotTestServers
import HotTesting
import Testing

/// WinZip AES: archives 7-Zip and pyzipper made, read byte for byte; archives ZipWriter made,
/// read back by us and by pyzipper; and damaged or lying ones refused with their own codes,
/// leaving nothing behind. Only where the build reads AES (a crypto library is linked).
@Suite(.enabled(if: ZipUnarchiver.readsWinZipAES, "skipped: this build links no crypto library for WinZip AES"))
struct WinZipAESTests {
    /// ASCII: 7-Zip refuses other passwords for ZIP files (E_INVALIDARG).
    static let password = "s3cret password"

    /// Makes the mixed tree in `scratch/src`, archives it with `make` as `scratch/a.zip`, and
    /// extracts it with ZipUnarchiver and the password: the tree must come out byte for byte.
    private func roundTrip(_ make: (Scratch, URL) async throws -> Void) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = scratch.path("src")
        try Trees.makeMixed(at: source)
        try await make(scratch, source)
        let report = try await ZipUnarchiver().extract(
            scratch.path("a.zip"),
            to: scratch.path("out"),
            options: ExtractOptions(password: Self.password)
        )
        try Trees.expectEqual(scratch.path("out"), source)
        #expect(report.files.count == 8)
        let listed = try await ZipUnarchiver().entries(of: scratch.path("a.zip"), options: ExtractOptions())
        let files = listed.filter { $0.kind == .file }
        let encrypted = files.filter(\.isEncrypted)
        #expect(files.count == 8 && encrypted.count == 8)
    }

    // MARK: - Archives real tools made

    @Test(
        "7-Zip's AES archives read byte for byte",
        .enabled(if: ArchiveTools.sevenZipRuns, ArchiveTools.sevenZipSkip),
        arguments: [
            ["-mem=AES256"], ["-mem=AES256", "-mx=0"], ["-mem=AES128"], ["-mem=AES192", "-mx=9"],
        ]
    )
    func sevenZip(_ options: [String]) async throws {
        let sevenZip = try ArchiveTools.requireSevenZip()
        try await roundTrip { _, source in
            try await Subprocess.check(
                sevenZip,
                ["a", "-tzip", "-p\(Self.password)", "../a.zip", "."] + options,
                in: source
            )
        }
    }

    /// pyzipper's methods, AE versions and strengths.
    struct PyzipperCase: Sendable, CustomTestStringConvertible {
        var compression: String
        var version: Int
        var bits: Int
        var testDescription: String { "\(compression), AE-\(version), AES-\(bits)" }
    }

    @Test(
        "pyzipper's AES archives read byte for byte",
        .enabled(if: ArchiveTools.pyzipperRuns, ArchiveTools.pyzipperSkip),
        arguments: [
            PyzipperCase(compression: "ZIP_STORED", version: 1, bits: 256),
            PyzipperCase(compression: "ZIP_STORED", version: 2, bits: 256),
            PyzipperCase(compression: "ZIP_DEFLATED", version: 1, bits: 256),
            PyzipperCase(compression: "ZIP_DEFLATED", version: 2, bits: 128),
            PyzipperCase(compression: "ZIP_DEFLATED", version: 1, bits: 192),
        ]
    )
    func pyzipper(_ format: PyzipperCase) async throws {
        try ArchiveTools.requirePyzipper()
        try await roundTrip { scratch, _ in
            try await Python.run(
                """
                import os, pyzipper
                kwargs = {'nbits': \(format.bits), 'force_wz_aes_version': \(format.version)}
                with pyzipper.AESZipFile('a.zip', 'w', compression=pyzipper.\(format.compression),
                                         encryption=pyzipper.WZ_AES, encryption_kwargs=kwargs) as z:
                    z.setpassword('\(Self.password)'.encode())
                    for root, dirs, files in os.walk('src'):
                        for d in dirs:
                            z.write(os.path.join(root, d), os.path.relpath(os.path.join(root, d), 'src'))
                        for f in files:
                            path = os.path.join(root, f)
                            z.write(path, os.path.relpath(path, 'src'))
                """,
                in: scratch.url
            )
        }
    }

    // MARK: - Archives ZipWriter made

    @Test("ZipWriter's encrypted archives read back byte for byte", arguments: ZipWriter.Encryption.Method.all)
    func writerRoundTrip(_ method: ZipWriter.Encryption.Method) async throws {
        try await roundTrip { scratch, source in
            try ZipWriter.write(
                directory: source,
                to: scratch.path("a.zip"),
                options: ZipWriter.Options(encryption: .init(method, password: Self.password))
            )
        }
    }

    @Test(
        "pyzipper reads ZipWriter's AES archives",
        .enabled(if: ArchiveTools.pyzipperRuns, ArchiveTools.pyzipperSkip),
        arguments: [ZipWriter.Encryption.Method.aes256, .aes128]
    )
    func pyzipperReadsOurs(_ method: ZipWriter.Encryption.Method) async throws {
        try ArchiveTools.requirePyzipper()
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = scratch.path("src")
        try Trees.makeMixed(at: source)
        try ZipWriter.write(
            directory: source,
            to: scratch.path("a.zip"),
            options: ZipWriter.Options(encryption: .init(method, password: Self.password))
        )
        try await Python.run(
            """
            import os, pyzipper
            with pyzipper.AESZipFile('a.zip') as z:
                z.setpassword('\(Self.password)'.encode())
                z.extractall('py')
            """,
            in: scratch.url
        )
        try Trees.expectEqual(scratch.path("py"), source)
    }

    @Test("each AES entry gets its own salt: equal files encrypt differently, and so do two packings")
    func saltsDiffer() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let content = Data(repeating: 7, count: 10_000)
        try FileManager.default.createDirectory(at: scratch.path("src"), withIntermediateDirectories: true)
        try content.write(to: scratch.path("src/a.bin"))
        try content.write(to: scratch.path("src/b.bin"))
        let options = ZipWriter.Options(compressionLevel: 0, encryption: .init(password: Self.password))
        try ZipWriter.write(directory: scratch.path("src"), to: scratch.path("one.zip"), options: options)
        try ZipWriter.write(directory: scratch.path("src"), to: scratch.path("two.zip"), options: options)
        let one = try LocalEntry.all(in: Data(contentsOf: scratch.path("one.zip")))
        let two = try LocalEntry.all(in: Data(contentsOf: scratch.path("two.zip")))
        #expect(one.count == 2 && two.count == 2)
        // Method 99, AE-2 (CRC 0), "AE", AES-256, stored inside; salt, verifier, data, code.
        for entry in one + two {
            #expect(entry.method == 99 && entry.flags & 1 == 1 && entry.crc32 == 0)
            #expect(entry.extra == [0x01, 0x99, 0x07, 0x00, 0x02, 0x00, 0x41, 0x45, 0x03, 0x00, 0x00])
            #expect(entry.data.count == 16 + 2 + content.count + 10)
        }
        #expect(one[0].data.prefix(16) != one[1].data.prefix(16))
        #expect(one[0].data.dropFirst(18).prefix(64) != one[1].data.dropFirst(18).prefix(64))
        #expect(one[0].data != two[0].data)
    }

    // MARK: - Refusals

    /// `content` as `a.bin` (and a plain-text neighbour), encrypted by ZipWriter, then `damage`d.
    private func refusal(
        _ code: HotUpdateError.Code,
        content: Data = Data(String(repeating: "compressible resource text\n", count: 4000).utf8),
        method: ZipWriter.Encryption.Method = .aes256,
        password: String? = WinZipAESTests.password,
        mentioning: [String] = ["a.bin"],
        damage: (inout Data, LocalEntry) -> Void = { _, _ in }
    ) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try FileManager.default.createDirectory(at: scratch.path("src"), withIntermediateDirectories: true)
        try content.write(to: scratch.path("src/a.bin"))
        try Data("neighbour".utf8).write(to: scratch.path("src/b.txt"))
        let archive = scratch.path("a.zip")
        try ZipWriter.write(
            directory: scratch.path("src"),
            to: archive,
            options: ZipWriter.Options(encryption: .init(method, password: Self.password))
        )
        var bytes = try Data(contentsOf: archive)
        let entry = try #require(try LocalEntry.all(in: bytes).first { $0.name == "a.bin" })
        damage(&bytes, entry)
        try bytes.write(to: archive)
        try await Verify.extraction(
            archive,
            with: .zip,
            options: ExtractOptions(password: password),
            in: scratch,
            expecting: .refuses(code, mentioning: mentioning)
        )
    }

    @Test("a wrong password is refused by the verifier, before anything is decrypted")
    func wrongPassword() async throws {
        // Either file may be the first a worker finds wrong.
        try await refusal(.wrongPassword, password: "not it", mentioning: ["verifier"])
    }

    @Test("no password is passwordRequired")
    func noPassword() async throws {
        try await refusal(.passwordRequired, password: nil)
    }

    @Test("an altered password verifier is refused as a wrong password")
    func alteredVerifier() async throws {
        try await refusal(.wrongPassword) { bytes, entry in bytes[entry.dataOffset + 16] ^= 1 }
    }

    @Test("a tampered authentication code is refused", arguments: [0, 9])
    func tamperedCode(_ index: Int) async throws {
        try await refusal(.authenticationFailed, mentioning: ["a.bin", "authentication code"]) { bytes, entry in
            bytes[entry.dataOffset + entry.data.count - 10 + index] ^= 0x80
        }
    }

    @Test(
        "one flipped byte of ciphertext is refused as tampering, stored or deflated, first or last",
        arguments: [(false, 0), (false, -1), (true, 0), (true, 100), (true, -1)]
    )
    func flippedCiphertext(_ deflated: Bool, _ position: Int) async throws {
        let content =
            deflated
            ? Data(String(repeating: "compressible resource text\n", count: 4000).utf8)
            : Data((0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) })
        try await refusal(.authenticationFailed, content: content) { bytes, entry in
            let ciphertext = entry.data.count - 18 - 10
            let index = position >= 0 ? position : ciphertext + position
            bytes[entry.dataOffset + 18 + index] ^= 0x04
        }
    }

    @Test("an entry too short for its salt, verifier and code is corrupt")
    func tooShort() async throws {
        // Declares 20 bytes of data: fewer than AES-256's 28 of salt, verifier and code.
        try await refusal(.corruptArchive, mentioning: ["a.bin", "too few"]) { bytes, entry in
            entry.setCompressedSize(20, in: &bytes)
        }
    }

    @Test("an AES field that lies is refused with the code its lie deserves", arguments: AESFieldLie.allCases)
    func lyingField(_ lie: AESFieldLie) async throws {
        try await refusal(lie.code, mentioning: ["a.bin"] + lie.mentions) { bytes, entry in
            entry.editAESField(in: &bytes, lie.apply)
        }
    }

    /// AE-1 records the CRC-32 and it is checked; AE-2 records 0 and it is not.
    @Test(
        "the CRC-32 is checked for AE-1, not for AE-2",
        .enabled(if: ArchiveTools.pyzipperRuns, ArchiveTools.pyzipperSkip),
        arguments: [1, 2]
    )
    func crcByVersion(_ version: Int) async throws {
        try ArchiveTools.requirePyzipper()
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await Python.run(
            """
            import pyzipper
            kwargs = {'nbits': 256, 'force_wz_aes_version': \(version)}
            with pyzipper.AESZipFile('a.zip', 'w', compression=pyzipper.ZIP_DEFLATED,
                                     encryption=pyzipper.WZ_AES, encryption_kwargs=kwargs) as z:
                z.setpassword(b'pw')
                z.writestr('a.txt', 'authentic, but its CRC-32 will be wrong ' * 100)
            """,
            in: scratch.url
        )
        var bytes = try Data(contentsOf: scratch.path("a.zip"))
        let entry = try #require(try LocalEntry.all(in: bytes).first)
        entry.setCRC32(0x1234_5678, in: &bytes)
        try bytes.write(to: scratch.path("a.zip"))
        let outcome: Outcome =
            version == 1
            ? .refuses(.checksumMismatch, mentioning: ["a.txt", "CRC-32"])
            : .reads(["a.txt": .text(String(repeating: "authentic, but its CRC-32 will be wrong ", count: 100))])
        try await Verify.extraction(
            scratch.path("a.zip"),
            with: .zip,
            options: ExtractOptions(password: "pw"),
            in: scratch,
            expecting: outcome
        )
    }

    @Test("ZipCrypto written by ZipWriter is refused with a wrong password")
    func zipCryptoWrongPassword() async throws {
        try await refusal(.wrongPassword, method: .zipCrypto, password: "not it", mentioning: ["password"])
    }

    @Test("ZipWriter refuses an empty password")
    func emptyPassword() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try FileManager.default.createDirectory(at: scratch.path("src"), withIntermediateDirectories: true)
        await expectHotError(.invalidArgument) {
            try ZipWriter.write(
                directory: scratch.path("src"),
                to: scratch.path("a.zip"),
                options: ZipWriter.Options(encryption: .init(password: ""))
            )
        }
    }
}

/// A lie an AES extra field can tell, and the code it must be refused with.
enum AESFieldLie: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case unknownStrength, vendorNotAE, vendorVersion3, unsupportedMethod, weakerStrength, missingField

    var testDescription: String { rawValue }

    var code: HotUpdateError.Code {
        switch self {
        case .unknownStrength, .vendorVersion3: .unsupportedEncryption
        case .vendorNotAE, .missingField: .corruptArchive
        case .unsupportedMethod: .unsupportedMethod
        case .weakerStrength: .wrongPassword
        }
    }

    var mentions: [String] {
        switch self {
        case .unknownStrength: ["strength 9"]
        case .vendorNotAE: ["vendor"]
        case .vendorVersion3: ["vendor version 3"]
        case .unsupportedMethod: ["LZMA"]
        case .weakerStrength: ["verifier"]
        case .missingField: ["no AES extra field"]
        }
    }

    /// Rewrites the field's 11 bytes (id, length, data).
    func apply(_ field: inout [UInt8]) {
        switch self {
        case .unknownStrength: field[8] = 9
        case .vendorNotAE: field[6] = 0x42
        case .vendorVersion3: field[4] = 3
        case .unsupportedMethod: field[9] = 14
        case .weakerStrength: field[8] = 1
        case .missingField: field[0] = 0x55  // another id: the entry has no AES field left
        }
    }
}

/// One entry as its local header and the central directory describe it, with the positions
/// the refusal tests damage.
struct LocalEntry {
    var name: String
    var flags: UInt16
    var method: UInt16
    var crc32: UInt32
    var extra: [UInt8]
    var data: Data
    /// Offsets in the file.
    var localOffset: Int
    var dataOffset: Int
    var centralOffset: Int

    /// Every entry of `bytes`, in central directory order (no zip64, no prefix).
    static func all(in bytes: Data) throws -> [LocalEntry] {
        let data = [UInt8](bytes)
        func u16(_ at: Int) -> Int { Int(data[at]) | Int(data[at + 1]) << 8 }
        func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
        var end = data.count - 22
        while end >= 0, u32(end) != 0x0605_4b50 { end -= 1 }
        try #require(end >= 0, "no end record")
        var position = u32(end + 16)
        var entries: [LocalEntry] = []
        for _ in 0..<u16(end + 10) {
            try #require(u32(position) == 0x0201_4b50, "no central header at \(position)")
            let nameLength = u16(position + 28)
            let extraLength = u16(position + 30)
            let local = u32(position + 42)
            let localNameLength = u16(local + 26)
            let localExtraLength = u16(local + 28)
            let dataOffset = local + 30 + localNameLength + localExtraLength
            let size = u32(position + 20)
            entries.append(
                LocalEntry(
                    name: String(decoding: data[(position + 46)..<(position + 46 + nameLength)], as: UTF8.self),
                    flags: UInt16(u16(position + 8)),
                    method: UInt16(u16(position + 10)),
                    crc32: UInt32(u32(position + 16)),
                    extra: Array(data[(local + 30 + localNameLength)..<dataOffset]),
                    data: Data(data[dataOffset..<(dataOffset + size)]),
                    localOffset: local,
                    dataOffset: dataOffset,
                    centralOffset: position
                )
            )
            position += 46 + nameLength + extraLength + u16(position + 32)
        }
        return entries
    }

    private static func put32(_ value: UInt32, at offset: Int, in bytes: inout Data) {
        for index in 0..<4 { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * index)) }
    }

    /// Declares another compressed size in both headers.
    func setCompressedSize(_ size: UInt32, in bytes: inout Data) {
        Self.put32(size, at: localOffset + 18, in: &bytes)
        Self.put32(size, at: centralOffset + 20, in: &bytes)
    }

    /// Declares another CRC-32 in both headers.
    func setCRC32(_ crc: UInt32, in bytes: inout Data) {
        Self.put32(crc, at: localOffset + 14, in: &bytes)
        Self.put32(crc, at: centralOffset + 16, in: &bytes)
    }

    /// Rewrites the AES extra field (0x9901, 11 bytes) in both headers.
    func editAESField(in bytes: inout Data, _ edit: (inout [UInt8]) -> Void) {
        let signature: [UInt8] = [0x01, 0x99, 0x07, 0x00]
        for header in [localOffset, centralOffset] {
            guard let range = bytes[header...].firstRange(of: Data(signature)) else { continue }
            var field = [UInt8](bytes[range.lowerBound..<(range.lowerBound + 11)])
            edit(&field)
            bytes.replaceSubrange(range.lowerBound..<(range.lowerBound + 11), with: field)
        }
    }
}
