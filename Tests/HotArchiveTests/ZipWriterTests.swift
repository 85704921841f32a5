import Foundation
import HotArchive
import HotCore
import HotTestServers
import HotTesting
import Testing

/// ZipWriter's archives are read back by both our unarchivers, by `unzip -t` and by
/// python's zipfile, and are the same bytes every time for the same tree.
@Suite struct ZipWriterTests {
    @Test func roundTripThroughEveryReader() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = scratch.path("src")
        try Trees.makeMixed(at: source, largeBytes: 3_000_000)
        let archive = scratch.path("pkg.zip")
        let summary = try ZipWriter.write(directory: source, to: archive)
        #expect(summary.fileCount == 8)
        #expect(summary.directoryCount == 5)
        #expect(summary.symlinkCount == 0)
        #expect(!summary.usesZip64)
        let size = try FileManager.default.attributesOfItem(atPath: archive.path)[.size] as? Int
        #expect(Int64(size ?? -1) == summary.archiveBytes)

        for backend in Backend.allCases {
            let out = scratch.path("out-\(backend.rawValue)")
            _ = try await backend.unarchiver.extract(archive, to: out)
            try Trees.expectEqual(out, source)
        }
        let test = try await Subprocess.run("unzip", ["-t", archive.path])
        #expect(test.status == 0, "\(test.stdout)\(test.stderr)")
        #expect(test.stdout.contains("No errors detected"))
        try await Python.run(
            """
            import zipfile, os
            z = zipfile.ZipFile('pkg.zip')
            assert z.testzip() is None
            names = [i.filename for i in z.infolist()]
            assert names == sorted(names, key=lambda n: n.encode('utf-8')), names
            for i in z.infolist():
                assert i.flag_bits & 0x800, i.filename
                assert i.create_system == 3, i.filename
                assert i.date_time == (1980, 1, 1, 0, 0, 0), i.date_time
                if i.is_dir():
                    continue
                with open(os.path.join('src', i.filename), 'rb') as f:
                    assert z.read(i) == f.read(), i.filename
            methods = {i.filename: i.compress_type for i in z.infolist()}
            assert methods['img/photo.jpg'] == zipfile.ZIP_STORED, methods
            assert methods['web/js/app.js'] == zipfile.ZIP_DEFLATED, methods
            assert methods['empty.txt'] == zipfile.ZIP_STORED, methods
            assert 'empty-dir/' in methods
            """,
            in: scratch.url
        )
    }

    @Test func outputIsDeterministic() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = scratch.path("src")
        try Trees.makeMixed(at: source)
        let first = scratch.path("one.zip")
        let second = scratch.path("two.zip")
        try ZipWriter.write(directory: source, to: first, options: .init(concurrency: 1))
        // Different modification times and a different worker count must not change a byte.
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSince1970: 1_700_000_000)],
            ofItemAtPath: source.appendingPathComponent("readme.txt").path
        )
        try ZipWriter.write(directory: source, to: second, options: .init(concurrency: 4))
        #expect(try Data(contentsOf: first) == Data(contentsOf: second))
    }

    @Test func permissionsAndTimestampAreRecorded() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = scratch.path("src")
        try FileManager.default.createDirectory(
            at: source.appendingPathComponent("bin"),
            withIntermediateDirectories: true
        )
        try Data("#!/bin/sh\necho hi\n".utf8).write(to: source.appendingPathComponent("bin/run.sh"))
        try FileManager.default.setAttributes(
            [.posixPermissions: 0o755],
            ofItemAtPath: source.appendingPathComponent("bin/run.sh").path
        )
        try Data("data".utf8).write(to: source.appendingPathComponent("bin/data.txt"))
        try FileManager.default.setAttributes(
            [.posixPermissions: 0o640],
            ofItemAtPath: source.appendingPathComponent("bin/data.txt").path
        )
        let date = Date(timeIntervalSince1970: 1_718_454_600)  // 2024-06-15 12:30:00 UTC
        try ZipWriter.write(directory: source, to: scratch.path("p.zip"), options: .init(modificationDate: date))
        try await Python.run(
            """
            import zipfile
            z = zipfile.ZipFile('p.zip')
            modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
            assert modes['bin/run.sh'] == 0o100755, oct(modes['bin/run.sh'])
            assert modes['bin/data.txt'] == 0o100640, oct(modes['bin/data.txt'])
            assert modes['bin/'] & 0o170000 == 0o040000, oct(modes['bin/'])
            assert all(i.date_time == (2024, 6, 15, 12, 30, 0) for i in z.infolist())
            """,
            in: scratch.url
        )
    }

    @Test func symlinksAreRefusedUnlessStored() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = scratch.path("src")
        try FileManager.default.createDirectory(at: source, withIntermediateDirectories: true)
        try Data("target".utf8).write(to: source.appendingPathComponent("target.txt"))
        try FileManager.default.createSymbolicLink(
            atPath: source.appendingPathComponent("link").path,
            withDestinationPath: "target.txt"
        )
        let archive = scratch.path("p.zip")
        let error = await expectHotError(.invalidArgument) { try ZipWriter.write(directory: source, to: archive) }
        #expect(error?.message.contains("link") == true)
        #expect(!FileManager.default.fileExists(atPath: archive.path))
        #expect(!scratch.listing().contains { $0.hasPrefix(".") })

        let summary = try ZipWriter.write(directory: source, to: archive, options: .init(symlinks: .store))
        #expect(summary.symlinkCount == 1)
        for backend in Backend.allCases {
            await expectHotError(.unsafeEntry) {
                try await backend.unarchiver.extract(archive, to: scratch.path("refused-\(backend.rawValue)"))
            }
            let out = scratch.path("out-\(backend.rawValue)")
            let report = try await backend.unarchiver.extract(
                archive,
                to: out,
                options: ExtractOptions(symlinks: .allowWithinDestination)
            )
            #expect(report.symlinks == ["link"])
            try Trees.expectEqual(out, source)
        }
    }

    @Test func archiveInsideTheSourceIsLeftOut() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try Data("x".utf8).write(to: scratch.path("a.txt"))
        try ZipWriter.write(directory: scratch.url, to: scratch.path("self.zip"))
        try ZipWriter.write(directory: scratch.url, to: scratch.path("self.zip"))  // replaces, still excluding itself
        let listing = try await Subprocess.check("unzip", ["-Z1", scratch.path("self.zip").path]).stdout
        #expect(listing.split(separator: "\n") == ["a.txt"])
    }

    @Test func emptyDirectoryGivesAnEmptyArchive() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = scratch.path("src")
        try FileManager.default.createDirectory(at: source, withIntermediateDirectories: true)
        let summary = try ZipWriter.write(directory: source, to: scratch.path("e.zip"))
        #expect(summary.fileCount == 0 && summary.directoryCount == 0)
        #expect(summary.archiveBytes == 22)
        for backend in Backend.allCases {
            let report = try await backend.unarchiver.extract(
                scratch.path("e.zip"),
                to: scratch.path("out-\(backend.rawValue)")
            )
            #expect(report.files.isEmpty)
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: scratch.path("out-\(backend.rawValue)").path)
                    .isEmpty
            )
        }
    }

    @Test func specialFilesAreRefused() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try await Python.run("import os\nos.makedirs('src')\nos.mkfifo('src/pipe')", in: scratch.url)
        let error = await expectHotError(.invalidArgument) {
            try ZipWriter.write(directory: scratch.path("src"), to: scratch.path("p.zip"))
        }
        #expect(error?.message.contains("pipe") == true)
        #expect(!FileManager.default.fileExists(atPath: scratch.path("p.zip").path))
    }

    @Test func compressionLevelOutOfRangeIsRefused() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        await expectHotError(.invalidArgument) {
            try ZipWriter.write(directory: scratch.url, to: scratch.path("x.zip"), options: .init(compressionLevel: 12))
        }
    }

    /// More than 65,535 entries need zip64 end records; Info-ZIP, python and our reader agree.
    @Test func manyEntriesUseZip64() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = scratch.path("src")
        try await Python.run(
            """
            import os
            # Hard links to a few empty files: 66,000 names without 66,000 inodes
            # (ext4 allows 65,000 links per inode).
            os.makedirs('src')
            for seed in range(4):
                open('seed%d' % seed, 'wb').close()
            for d in range(66):
                os.makedirs('src/d%02d' % d)
                for f in range(1000):
                    os.link('seed%d' % (d % 4), 'src/d%02d/f%04d' % (d, f))
            """,
            in: scratch.url
        )
        let archive = scratch.path("many.zip")
        let summary = try ZipWriter.write(directory: source, to: archive)
        #expect(summary.fileCount + summary.directoryCount == 66_066)
        #expect(summary.usesZip64)
        try await Python.run(
            "import zipfile\nassert len(zipfile.ZipFile('many.zip').infolist()) == 66066",
            in: scratch.url
        )
        let entries = try await ZipUnarchiver().entries(of: archive, options: ExtractOptions())
        #expect(entries.count == 66_066)
        #expect(entries.last?.path == "d65/f0999")
    }
}
