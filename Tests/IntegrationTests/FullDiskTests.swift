import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real full disk: a small tmpfs mounted by the test holds the store, and a filler file
/// leaves just too little room for the download, the unpacking, or the commit of an update.
/// Each must fail with a clear "disk full" naming the file, leave the previous version
/// active and whole, and leave nothing behind once the next sync (with room again) is done.
///
/// Mounting needs root. Where the mount is refused the test says why and does nothing,
/// except under `CI=true`, where a refused mount fails it.
@Suite("a full disk", .serialized)
struct FullDiskTests {
    /// Where the disk runs full.
    enum Stage: String, Sendable, CaseIterable, CustomTestStringConvertible {
        case download, unpackZip, unpackLibarchive, commit
        var testDescription: String { rawValue }

        /// The stages this build can reach: libarchive's only with the `LibArchive` trait.
        static var allCases: [Stage] {
            UnarchiverKind.allCases.map(\.rawValue).contains("libarchive")
                ? [.download, .unpackZip, .unpackLibarchive, .commit] : [.download, .unpackZip, .commit]
        }
    }

    @Test(
        "a full disk during download, unpack or commit gives diskFull and keeps the previous version",
        arguments: Stage.allCases
    )
    func fullDisk(_ stage: Stage) async throws {
        let work = try makeTemporaryDirectory("full-disk")
        defer { try? FileManager.default.removeItem(at: work) }
        let mountPoint = work.appendingPathComponent("disk")
        try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
        guard try await TemporaryFileSystem.mount(at: mountPoint, megabytes: 16) else { return }
        defer { TemporaryFileSystem.unmount(mountPoint) }

        // Version 1 is small. Version 2 is one file that does not compress: large for the
        // download and the unpacking, small for the commit, where the store file is the
        // large write (many small packages make it so).
        let repository = try Repository()
        let sources = work.appendingPathComponent("sources")
        let oldFiles = ["v.txt": Data("one".utf8)]
        let newFiles = ["big.bin": noise(stage == .commit ? 6_000 : 1_500_000, seed: 9), "v.txt": Data("two".utf8)]
        try writeTree(oldFiles, under: sources.appendingPathComponent("p1"))
        try writeTree(newFiles, under: sources.appendingPathComponent("p2"))
        if stage == .commit {
            for index in 0..<150 {
                let source = sources.appendingPathComponent("f\(index)")
                try writeTree(["f.txt": Data("\(index)".utf8)], under: source)
                try repository.publish(source, id: "filler-package-\(index)", version: "1")
            }
        }
        try repository.publish(sources.appendingPathComponent("p1"), id: "p", version: "1")
        try FileManager.default.copyItem(
            at: repository.manifestFile,
            to: repository.directory.appendingPathComponent("m1.json")
        )
        let entry = try repository.publish(sources.appendingPathComponent("p2"), id: "p", version: "2")
        try FileManager.default.copyItem(
            at: repository.manifestFile,
            to: repository.directory.appendingPathComponent("m2.json")
        )
        let server = try await NginxServer.start(root: repository.directory)
        defer { try? FileManager.default.removeItem(at: repository.directory) }

        let root = mountPoint.appendingPathComponent("store")
        let unarchiver = stage == .unpackLibarchive ? "libarchive" : "zip"
        func sync(_ manifest: String, _ log: String) async throws -> (HotRun.Ending, String) {
            try await HotRun.run(
                [
                    "sync", "--manifest", server.baseURL.appendingPathComponent(manifest).absoluteString, "--root",
                    root.path, "--allow-unsigned", "--quiet", "--unarchiver", unarchiver,
                ],
                log: work.appendingPathComponent(log)
            )
        }
        let (installed, installOutput) = try await sync("m1.json", "install.log")
        try #require(installed == .exited(0), "\(installOutput)")

        // Leave room for exactly what the stage before the failing one needs.
        let page: Int64 = 4096
        let pages = { (bytes: Int64) in (bytes + page - 1) / page * page }
        let archive = pages(entry.size)
        let tree = newFiles.values.reduce(Int64(0)) { $0 + pages(Int64($1.count)) }
        let room: Int64 =
            switch stage {
            case .download: archive / 2
            case .unpackZip, .unpackLibarchive: archive + tree / 2
            // The archive, the tree, and a few pages for the small files a sync writes before
            // its commit (the staging owner's lock, the partial download's sidecar).
            case .commit: archive + tree + 6 * page
            }
        if stage == .commit {
            let storeFile = try FileManager.default.attributesOfItem(
                atPath: root.appendingPathComponent("store.json").path
            )
            let size = try #require(storeFile[.size] as? Int)
            try #require(Int64(size) > room + 2 * page, "the store file (\(size) bytes) must outgrow the room left")
        }
        let filler = mountPoint.appendingPathComponent("filler")
        try TemporaryFileSystem.fill(filler, leaving: room, on: mountPoint)

        let update = try HotRun(
            [
                "sync", "--manifest", server.baseURL.appendingPathComponent("m2.json").absoluteString, "--root",
                root.path, "--allow-unsigned", "--quiet", "--unarchiver", unarchiver,
            ],
            log: work.appendingPathComponent("update.log")
        )
        let ending = await update.wait()
        let output = update.output
        #expect(ending == .exited(1), "\(output)")
        let errors = update.standardError.split(separator: "\n").filter { $0.hasPrefix("hot: error: ") }
        // The file the disk ran full on: the archive (under partial/ when the manifest gives
        // its SHA-256, as here), a file of the tree being unpacked (which one depends on the
        // unarchiver's order), or, at the commit, the new version's file list or the store file
        // (each commit before it also wrote a name index of its own).
        let expectedFiles: [String] =
            switch stage {
            case .download: ["package.archive", "/partial/"]
            case .unpackZip, .unpackLibarchive: newFiles.keys.map { "/\($0)" }
            case .commit: ["store.json", "/filelists/p/2.files"]
            }
        #expect(
            errors.contains { line in line.contains("disk full") && expectedFiles.contains { line.contains($0) } },
            "expected a disk-full error naming one of \(expectedFiles): \(output)"
        )

        // The previous version stays active and whole.
        let during = try await StoreInspection.status(
            root: root,
            check: true,
            log: work.appendingPathComponent("check.log")
        )
        let package = try #require(during["p"])
        #expect(package.version == "1")
        #expect(try StoreInspection.tree(URL(fileURLWithPath: try #require(package.path))) == oldFiles)

        // With room again, the next sync installs version 2 and nothing is left behind.
        try FileManager.default.removeItem(at: filler)
        let (retried, retryOutput) = try await sync("m2.json", "retry.log")
        #expect(retried == .exited(0), "\(retryOutput)")
        let after = try await StoreInspection.status(
            root: root,
            check: true,
            log: work.appendingPathComponent("after.log")
        )
        #expect(after["p"]?.version == "2" && after["p"]?.state == "installed")
        #expect(try after["p"]?.path.flatMap { try StoreInspection.tree(URL(fileURLWithPath: $0)) } == newFiles)
        let left = try StoreInspection.leftovers(root: root)
        #expect(left.isEmpty, "\(left)")
        await server.stop()
    }
}

/// A tmpfs mounted for one test.
enum TemporaryFileSystem {
    /// Mounts a tmpfs of `megabytes` at `directory`. Returns false, having said why, when the
    /// system refuses (not root, no mount permission in a container), unless `CI` is `true`:
    /// then the refusal is a failure.
    ///
    /// It does not cancel the test as ``mountRamfs(at:)`` does: its test is parameterized,
    /// and Swift Testing reports a cancelled test case as passed, without the reason.
    static func mount(at directory: URL, megabytes: Int) async throws -> Bool {
        let arguments = ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", directory.path]
        guard let refusal = try await refusal(mounting: arguments, what: "a tmpfs") else { return true }
        if isCI {
            Issue.record(Comment(rawValue: refusal))
        } else {
            print("test skipped: \(refusal)")
        }
        return false
    }

    /// Mounts a ramfs at `directory`: hard links, and no extended attributes of the `user`
    /// namespace. When the system refuses, the test is cancelled with the reason (the run
    /// reports it cancelled, not passed), or fails under `CI=true`.
    static func mountRamfs(at directory: URL) async throws {
        let arguments = ["-t", "ramfs", "ramfs", directory.path]
        guard let refusal = try await refusal(mounting: arguments, what: "a ramfs") else { return }
        if isCI { throw MountRefused(description: refusal) }
        try Test.cancel(Comment(rawValue: refusal))
    }

    /// A mount the system refused, under `CI=true`.
    struct MountRefused: Error, CustomStringConvertible {
        var description: String
    }

    private static var isCI: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }

    /// Runs `mount` with `arguments`: nil when it mounted, else why not.
    private static func refusal(mounting arguments: [String], what: String) async throws -> String? {
        let output = try await Subprocess.run("mount", arguments)
        if output.status == 0 { return nil }
        return "mounting \(what) was refused (exit \(output.status)): \(output.stderr)"
    }

    /// Unmounts `directory` (lazily when it is busy), waiting for `umount` to finish.
    static func unmount(_ directory: URL) {
        for arguments in [[directory.path], ["-l", directory.path]] {
            guard let child = try? ChildProcess("/bin/umount", arguments) else { continue }
            if child.waitUntilExit() == .exited(0) { return }
        }
    }

    /// Writes `file` until only `room` bytes stay free on the file system of `directory`.
    static func fill(_ file: URL, leaving room: Int64, on directory: URL) throws {
        var info = statvfs()
        guard statvfs(directory.path, &info) == 0 else {
            throw HotUpdateError(.fileSystem, "cannot statvfs", subject: directory.path)
        }
        let free = Int64(info.f_bavail) * Int64(info.f_frsize)
        let size = free - room
        guard size > 0 else {
            throw HotUpdateError(.invalidArgument, "only \(free) bytes free, \(room) wanted", subject: directory.path)
        }
        guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
            throw HotUpdateError(.fileSystem, "cannot create the filler", subject: file.path)
        }
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        let chunk = Data(count: 1 << 20)
        var written: Int64 = 0
        while written < size {
            let count = Int(min(Int64(chunk.count), size - written))
            try handle.write(contentsOf: chunk.prefix(count))
            written += Int64(count)
        }
        try handle.synchronize()
    }
}
