import Foundation
import HotArchive
import HotCore
import HotTestServers
import HotTesting
import Testing

/// Archives made by real tools at test time, extracted by both unarchivers and
/// compared byte for byte with the tree they were made from.
@Suite struct RealToolArchiveTests {
    /// Makes the mixed tree in `scratch/src`, runs `make` to archive it as `scratch/a.zip`,
    /// extracts with `backend` and compares.
    private func roundTrip(
        _ backend: Backend,
        options: ExtractOptions = ExtractOptions(),
        make: (Scratch, URL) async throws -> Void
    ) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = scratch.path("src")
        try Trees.makeMixed(at: source)
        try await make(scratch, source)
        let report = try await backend.unarchiver.extract(
            scratch.path("a.zip"),
            to: scratch.path("out"),
            options: options
        )
        try Trees.expectEqual(scratch.path("out"), source)
        #expect(report.files.count == 8)
        #expect(report.totalBytes == report.files.reduce(0) { $0 + $1.size })
        #expect(Set(report.directories).isSuperset(of: ["img", "img/icons", "web", "web/js", "empty-dir"]))
    }

    @Test(arguments: Backend.allCases)
    func infoZipRecursive(_ backend: Backend) async throws {
        try await roundTrip(backend) { _, source in
            try await Subprocess.check("zip", ["-qr", "../a.zip", "."], in: source)
        }
    }

    @Test(arguments: Backend.allCases)
    func infoZipStoredOnly(_ backend: Backend) async throws {
        try await roundTrip(backend) { _, source in
            try await Subprocess.check("zip", ["-qr0", "../a.zip", "."], in: source)
        }
    }

    @Test(arguments: Backend.allCases)
    func bsdtarZip(_ backend: Backend) async throws {
        try await roundTrip(backend) { _, source in
            try await Subprocess.check("bsdtar", ["-a", "-cf", "../a.zip", "."], in: source)
        }
    }

    @Test(arguments: Backend.allCases)
    func pythonZipfileMixedMethods(_ backend: Backend) async throws {
        try await roundTrip(backend) { scratch, _ in
            try await Python.run(
                """
                import os, zipfile
                with zipfile.ZipFile('a.zip', 'w') as z:
                    for root, dirs, files in os.walk('src'):
                        for d in dirs:
                            z.write(os.path.join(root, d), os.path.relpath(os.path.join(root, d), 'src'))
                        for i, f in enumerate(sorted(files)):
                            path = os.path.join(root, f)
                            method = zipfile.ZIP_STORED if i % 2 else zipfile.ZIP_DEFLATED
                            z.write(path, os.path.relpath(path, 'src'), compress_type=method)
                """,
                in: scratch.url
            )
        }
    }

    @Test(arguments: Backend.allCases)
    func pythonForcedZip64(_ backend: Backend) async throws {
        try await roundTrip(backend) { scratch, _ in
            try await Python.run(
                """
                import os, zipfile
                with zipfile.ZipFile('a.zip', 'w', zipfile.ZIP_DEFLATED) as z:
                    for root, dirs, files in os.walk('src'):
                        for d in dirs:
                            z.mkdir(os.path.relpath(os.path.join(root, d), 'src'))
                        for f in files:
                            path = os.path.join(root, f)
                            with open(path, 'rb') as src, z.open(os.path.relpath(path, 'src'), 'w', force_zip64=True) as dst:
                                dst.write(src.read())
                import struct
                info = zipfile.ZipFile('a.zip').infolist()
                raw = open('a.zip', 'rb').read()
                assert raw.count(b'PK\\x03\\x04') == len(info)
                files = [i for i in info if not i.is_dir()]
                assert files
                for i in files:
                    # Each file's local header carries the zip64 extra field (id 0x0001).
                    h = raw[i.header_offset:i.header_offset + 30]
                    assert h[:4] == b'PK\\x03\\x04'
                    n, m = struct.unpack('<HH', h[26:30])
                    extra = raw[i.header_offset + 30 + n:i.header_offset + 30 + n + m]
                    assert extra[:2] == b'\\x01\\x00', (i.filename, extra)
                """,
                in: scratch.url
            )
            // The local headers must carry zip64 extra fields with saturated sizes.
            let data = try Data(contentsOf: scratch.path("a.zip"))
            #expect(data.range(of: Data([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])) != nil)
        }
    }

    /// python's zipfile writes data descriptors (with signature) when the output cannot seek.
    @Test(arguments: Backend.allCases)
    func pythonUnseekableStreamDataDescriptors(_ backend: Backend) async throws {
        try await roundTrip(backend) { scratch, _ in
            try await Python.run(
                """
                import os, zipfile
                class Unseekable:
                    def __init__(self, f): self.f = f
                    def write(self, b): return self.f.write(b)
                    def flush(self): self.f.flush()
                with open('a.zip', 'wb') as raw:
                    with zipfile.ZipFile(Unseekable(raw), 'w', zipfile.ZIP_DEFLATED) as z:
                        for root, dirs, files in os.walk('src'):
                            for d in dirs:
                                z.write(os.path.join(root, d), os.path.relpath(os.path.join(root, d), 'src'))
                            for f in files:
                                path = os.path.join(root, f)
                                z.write(path, os.path.relpath(path, 'src'))
                flags = [i.flag_bits for i in zipfile.ZipFile('a.zip').infolist() if not i.is_dir()]
                assert all(f & 0x08 for f in flags), flags
                """,
                in: scratch.url
            )
        }
    }

    /// Data descriptors without their optional signature, stored and deflated.
    @Test(arguments: Backend.allCases)
    func descriptorsWithoutSignature(_ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await Python.run(
            """
            from zipcraft import *
            build('a.zip', [Entry('d/deflated.txt', b'hello ' * 5000, descriptor='nosig'),
                            Entry('d/stored.bin', bytes(range(256)) * 10, method=0, descriptor='nosig'),
                            Entry('d/sig.txt', b'with signature', descriptor='sig'),
                            Entry('d/empty.txt', b'', descriptor='nosig')])
            """,
            in: scratch.url
        )
        _ = try await backend.unarchiver.extract(scratch.path("a.zip"), to: scratch.path("out"))
        let tree = try Trees.snapshot(scratch.path("out"))
        #expect(tree["d/deflated.txt"] == .file(Data(String(repeating: "hello ", count: 5000).utf8)))
        #expect(tree["d/stored.bin"] == .file(Data((0..<2560).map { UInt8($0 % 256) })))
        #expect(tree["d/sig.txt"] == .file(Data("with signature".utf8)))
        #expect(tree["d/empty.txt"] == .file(Data()))
    }

    /// Names not flagged UTF-8 from a DOS host are code page 437; checked against python's codec.
    @Test(arguments: Backend.allCases)
    func codePage437Names(_ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await Python.run(
            """
            from zipcraft import *
            high = bytes(range(0x80, 0x100))
            names = [b'caf\\x82.txt'] + [b'cp437-' + high[i:i + 32] for i in range(0, 128, 32)]
            build('a.zip', [Entry(n, n, host=0) for n in names])
            with open('expected.txt', 'w', encoding='utf-8') as f:
                for n in names:
                    f.write(n.decode('cp437') + '\\n')
            """,
            in: scratch.url
        )
        let expected = try String(contentsOf: scratch.path("expected.txt"), encoding: .utf8)
            .split(separator: "\n").map(String.init)
        #expect(expected.first == "café.txt")
        let listed = try await backend.unarchiver.entries(of: scratch.path("a.zip"), options: ExtractOptions())
        #expect(listed.map(\.path) == expected)
        _ = try await backend.unarchiver.extract(scratch.path("a.zip"), to: scratch.path("out"))
        let names = try FileManager.default.contentsOfDirectory(atPath: scratch.path("out").path)
        #expect(
            Set(names.map { $0.precomposedStringWithCanonicalMapping })
                == Set(expected.map { $0.precomposedStringWithCanonicalMapping })
        )
    }

    /// `zip -P`: traditional PKWARE encryption, read with the password, refused without or with a wrong one.
    @Test(arguments: Backend.allCases)
    func traditionalEncryption(_ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = scratch.path("src")
        try Trees.makeMixed(at: source, largeBytes: 2_000_000)
        try await Subprocess.check("zip", ["-qr", "-P", "s3cret pass", "../a.zip", "."], in: source)
        let archive = scratch.path("a.zip")
        let listed = try await backend.unarchiver.entries(of: archive, options: ExtractOptions())
        #expect(listed.contains { $0.isEncrypted && $0.path == "readme.txt" })
        await expectHotError(.passwordRequired) {
            try await backend.unarchiver.extract(archive, to: scratch.path("none"), options: ExtractOptions())
        }
        await expectHotError(.wrongPassword) {
            try await backend.unarchiver.extract(
                archive,
                to: scratch.path("wrong"),
                options: ExtractOptions(password: "not it")
            )
        }
        #expect(!FileManager.default.fileExists(atPath: scratch.path("none").path))
        #expect(!FileManager.default.fileExists(atPath: scratch.path("wrong").path))
        _ = try await backend.unarchiver.extract(
            archive,
            to: scratch.path("out"),
            options: ExtractOptions(password: "s3cret pass")
        )
        try Trees.expectEqual(scratch.path("out"), source)
    }

    /// `zip -y -P`: an encrypted symlink. Ours decrypts its target with the password;
    /// libarchive would hand back the encrypted bytes as the target, so its backend
    /// refuses the link, naming it, before anything is written.
    @Test func encryptedSymlink() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = scratch.path("src")
        try FileManager.default.createDirectory(at: source, withIntermediateDirectories: true)
        try Data("target".utf8).write(to: source.appendingPathComponent("t.txt"))
        try FileManager.default.createSymbolicLink(
            atPath: source.appendingPathComponent("link").path,
            withDestinationPath: "t.txt"
        )
        try await Subprocess.check("zip", ["-q", "-y", "-P", "pass", "../a.zip", "t.txt", "link"], in: source)
        let archive = scratch.path("a.zip")
        let options = ExtractOptions(password: "pass", symlinks: .allowWithinDestination)

        let report = try await ZipUnarchiver().extract(archive, to: scratch.path("zip"), options: options)
        #expect(report.symlinks == ["link"])
        try Trees.expectEqual(scratch.path("zip"), source)

        guard Backend.hasLibArchive else { return }
        let before = scratch.listing()
        let error = await expectHotError(.unsupportedEncryption) {
            try await Backend.libarchive.unarchiver.extract(archive, to: scratch.path("libarchive"), options: options)
        }
        #expect(error?.subject == "link")
        #expect(scratch.listing() == before)
    }

    /// bzip2 (python's ZIP_BZIP2): ours refuses it naming the entry and method; libarchive reads it.
    @Test(.enabled(if: Backend.hasLibArchive, "needs the LibArchive trait"))
    func bzip2EntryRefusedByZipReadByLibArchive() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await Python.run(
            """
            import zipfile
            with zipfile.ZipFile('a.zip', 'w') as z:
                z.writestr('plain.txt', 'plain')
                z.writestr('packed.txt', 'bzip2 ' * 1000, compress_type=zipfile.ZIP_BZIP2)
            """,
            in: scratch.url
        )
        let error = await expectHotError(.unsupportedMethod) {
            try await ZipUnarchiver().extract(scratch.path("a.zip"), to: scratch.path("zip"))
        }
        #expect(error?.message.contains("packed.txt") == true)
        #expect(error?.message.contains("bzip2") == true)
        _ = try await Backend.libarchive.unarchiver.extract(scratch.path("a.zip"), to: scratch.path("la"))
        let tree = try Trees.snapshot(scratch.path("la"))
        #expect(tree["packed.txt"] == .file(Data(String(repeating: "bzip2 ", count: 1000).utf8)))
    }

    /// A self-extractor-style prefix and trailing junk are accepted (Info-ZIP's offset adjustment).
    @Test(arguments: Backend.allCases)
    func prefixAndTrailingJunk(_ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await Python.run(
            """
            from zipcraft import *
            build('a.zip', [Entry('x/a.txt', b'A' * 3000), Entry('x/b.bin', bytes(range(256)), method=0)],
                  prefix=b'#!/bin/sh\\necho self-extractor stub\\nexit 0\\n' + bytes(4000), trailing=b'junk after the end')
            """,
            in: scratch.url
        )
        _ = try await backend.unarchiver.extract(scratch.path("a.zip"), to: scratch.path("out"))
        let tree = try Trees.snapshot(scratch.path("out"))
        #expect(tree["x/a.txt"] == .file(Data(repeating: UInt8(ascii: "A"), count: 3000)))
        #expect(tree["x/b.bin"] == .file(Data((0..<256).map { UInt8($0) })))
    }
}
