import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a settled store notices, with the real `hot`: a file edited in place at its own size
/// (the object too, since both are one inode), and a version directory replaced by a link.
@Suite("Edits in place and links on a settled store, with the real hot")
struct InPlaceEditTests {
    static func files() -> [String: Data] {
        var files: [String: Data] = [:]
        for index in 0..<12 {
            files["dir\(index % 3)/file\(index).bin"] = noise(400 + index * 13, seed: UInt64(index) * 7 + 3)
        }
        return files
    }

    /// The active tree of `pack`, from `hot status --json`.
    static func tree(_ rig: HealRig) async throws -> URL {
        let status = try await Subprocess.check(rig.hot, ["status", "--root", rig.root.path, "--json"])
        let document = try JSONSerialization.jsonObject(with: status.standardOutput) as? [String: Any]
        let package = try #require((document?["packages"] as? [[String: Any]])?.first)
        return URL(fileURLWithPath: try #require(package["path"] as? String), isDirectory: true)
    }

    /// Overwrites the start of `file` in place (no truncation, no rename), keeping its size, as
    /// an editor that writes into the file would.
    static func editInPlace(_ file: URL) throws {
        #expect(chmod(file.path, 0o644) == 0)
        let descriptor = open(file.path, O_WRONLY)
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        let bytes = [UInt8]("EDITED".utf8)
        #expect(write(descriptor, bytes, bytes.count) == bytes.count)
    }

    @Test(
        "a same-size edit in place: status --check names the file and exits 1; the next plain sync downloads the package again and resolve serves the original bytes"
    )
    func sameSizeEditHealed() async throws {
        let files = Self.files()
        let rig = try await HealRig("edit-in-place", files: files)
        defer { rig.stopNow() }
        let (hot, root, sync) = (rig.hot, rig.root, rig.sync)
        try await Subprocess.check(hot, sync)
        // Settled: the next sync reads nothing and finds nothing to do.
        #expect(try await Subprocess.check(hot, sync).stdout == "pack\tunchanged\tok\t1\n")

        let name = "dir1/file4.bin"
        let file = try await Self.tree(rig).appendingPathComponent(name)
        try Self.editInPlace(file)
        #expect(try Data(contentsOf: file).count == files[name]?.count)
        #expect(try Data(contentsOf: file) != files[name])

        let checked = try await Subprocess.run(hot, ["status", "--root", root.path, "--check"])
        #expect(checked.status == 1, "\(checked.stdout)\(checked.stderr)")
        #expect(checked.stderr.contains("hot: pack 1: damaged \(name)"), "\(checked.stderr)")
        #expect(checked.stdout.contains("pack\t1\tdigestMismatch"), "\(checked.stdout)")
        // Recorded: the package is marked for the next sync.
        #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent("losses/pack").path))

        // The object was the edited file itself: the sync downloads the package again.
        let healed = try await Subprocess.check(hot, sync)
        #expect(healed.stdout.contains("pack\theal\tok\t1"), "\(healed.stdout)")
        #expect(rig.nginx.requestCount(for: rig.archivePath) == 2)
        let resolved = try await Subprocess.check(hot, ["resolve", name, "--root", root.path])
        let served = URL(fileURLWithPath: resolved.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(try Data(contentsOf: served) == files[name])
        #expect(try readTree(try await Self.tree(rig)) == files)
        let clean = try await Subprocess.run(hot, ["status", "--root", root.path, "--check"])
        #expect(clean.status == 0, "\(clean.stderr)")
        #expect(clean.stdout.contains("pack\t1\tinstalled"), "\(clean.stdout)")

        // Touched, not changed: hashed once, found intact, and nothing is downloaded.
        let touched = try await Self.tree(rig).appendingPathComponent("dir0/file0.bin")
        try FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: touched.path)
        let touchedCheck = try await Subprocess.run(hot, ["status", "--root", root.path, "--check"])
        #expect(touchedCheck.status == 0, "\(touchedCheck.stderr)")

        // The same edit found by the quick check of a plain sync (due at every sync with
        // --check-interval 0), with no status --check before it.
        try Self.editInPlace(try await Self.tree(rig).appendingPathComponent(name))
        let quick = try await Subprocess.check(hot, sync + ["--check-interval", "0"])
        #expect(quick.stdout.contains("pack\theal\tok\t1"), "\(quick.stdout)")
        #expect(try readTree(try await Self.tree(rig)) == files)
        #expect(rig.nginx.requestCount(for: rig.archivePath) == 3)
    }

    @Test(
        "a version directory replaced by a link on a settled store: plain syncs leave it until a reader meets it or the quick check is due, which heal it"
    )
    func linkOnSettledStore() async throws {
        let files = Self.files()
        // A repository as `hot pack` and `hot sign` make it: its timestamp lets a sync find the
        // manifest unchanged, and the store settled, without reading the manifest.
        let work = try makeTemporaryDirectory("settled-link")
        defer { try? FileManager.default.removeItem(at: work) }
        let hot = try builtExecutable("hot").path
        let (repo, key, root) = (
            work.appendingPathComponent("repo"), work.appendingPathComponent("key"),
            work.appendingPathComponent("store")
        )
        try writeTree(files, under: work.appendingPathComponent("source"))
        try await Subprocess.check(hot, ["keygen", "--private", key.path + ".pem", "--public", key.path + ".pub"])
        try await Subprocess.check(
            hot,
            ["pack", work.appendingPathComponent("source").path, "--id", "pack", "--version", "1", "--repo", repo.path]
        )
        try await Subprocess.check(hot, ["sign", "--repo", repo.path, "--key", key.path + ".pem", "--expires", "1h"])
        let sync = [
            "sync", "--manifest", repo.appendingPathComponent("manifest.json").absoluteString, "--root", root.path,
            "--trust", key.path + ".pub",
        ]
        try await Subprocess.check(hot, sync)
        #expect(try await Subprocess.check(hot, sync).stdout == "pack\tunchanged\tok\t1\n")
        func activeTree() async throws -> URL {
            let status = try await Subprocess.check(hot, ["status", "--root", root.path, "--json"])
            let document = try JSONSerialization.jsonObject(with: status.standardOutput) as? [String: Any]
            let package = try #require((document?["packages"] as? [[String: Any]])?.first)
            return URL(fileURLWithPath: try #require(package["path"] as? String), isDirectory: true)
        }
        let outside = work.appendingPathComponent("outside")
        try writeTree(files.mapValues { Data(repeating: 0x41, count: $0.count) }, under: outside)
        let planted = try readTree(outside)
        func isLink(_ url: URL) -> Bool {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: url.path)) != nil
        }

        // 1. The quick check: the settled check looks at no package's directory (a fixed
        // number of stats whatever the number of packages), so a plain sync with no quick
        // check due leaves the link, as the threat table says; the sync whose quick check is
        // due removes it and puts the tree back from the objects.
        var tree = try await activeTree()
        try FileManager.default.removeItem(at: tree)
        try FileManager.default.createSymbolicLink(at: tree, withDestinationURL: outside)
        #expect(try await Subprocess.check(hot, sync).stdout == "pack\tunchanged\tok\t1\n")
        #expect(isLink(tree))
        let due = try await Subprocess.check(hot, sync + ["--check-interval", "0"])
        #expect(due.stdout.contains("pack\theal\tok\t1"), "\(due.stdout)")
        #expect(!isLink(tree))
        #expect(try readTree(tree) == files)

        // 2. A reader: the launch's list of served packages (here `hot resolve`) leaves the
        // package out and marks it, and the next plain sync heals it.
        tree = try await activeTree()
        try FileManager.default.removeItem(at: tree)
        try FileManager.default.createSymbolicLink(at: tree, withDestinationURL: outside)
        let resolved = try await Subprocess.run(hot, ["resolve", "dir0/file0.bin", "--root", root.path])
        #expect(resolved.status == 1, "served through the link: \(resolved.stdout)")
        let healed = try await Subprocess.check(hot, sync)
        #expect(healed.stdout.contains("pack\theal\tok\t1"), "\(healed.stdout)")
        #expect(!isLink(tree))
        #expect(try readTree(tree) == files)
        #expect(try readTree(outside) == planted, "a file outside the store changed")
    }
}
