import Foundation
import HotCore
import HotTestServers
import HotTesting
import HotVerify
import Testing

/// A package of 60 files installed by the real `hot sync` from nginx, then its tree deleted
/// (alone, and with every object): `hot status` never calls it installed at a path that is
/// gone, and one plain `hot sync` (no repair) makes it whole again, byte-exact.
@Suite("Healing with the real hot")
struct SelfHealCommandLineTests {
    @Test("a deleted tree, and a deleted tree with its objects, are healed by one plain hot sync, byte-exact")
    func plainSyncHeals() async throws {
        let key = try CryptoSigner.generate()
        let work = try makeTemporaryDirectory("heal")
        defer { try? FileManager.default.removeItem(at: work) }
        let publicKey = work.appendingPathComponent("server.pub")
        try key.publicKey.pem.write(to: publicKey, atomically: true, encoding: .utf8)
        var files: [String: Data] = [:]
        for index in 0..<60 {
            files["dir\(index % 6)/file\(index).bin"] = noise(500 + index * 37, seed: UInt64(index) * 2 + 2)
        }
        let repository = try SignedRepository(keys: [key])
        let entry = try repository.pack(files, id: "pack", version: "1")
        try repository.sign(with: [key])
        let nginx = try await NginxServer.start(root: repository.directory)
        defer { Task { await nginx.stop() } }
        let archivePath = "/packages/" + repository.archive(entry).lastPathComponent
        let root = work.appendingPathComponent("store")
        let hot = try builtExecutable("hot").path
        let sync =
            ["sync", "--manifest", repository.url(on: nginx).absoluteString, "--root", root.path]
            + ["--trust", publicKey.path]
        try await Subprocess.check(hot, sync)
        /// The active tree, as `hot status --json` names it (a download puts a healed tree anew).
        func activeTree() async throws -> URL {
            let status = try await Subprocess.check(hot, ["status", "--root", root.path, "--json"])
            let document = try JSONSerialization.jsonObject(with: status.standardOutput) as? [String: Any]
            let package = try #require((document?["packages"] as? [[String: Any]])?.first)
            return URL(fileURLWithPath: try #require(package["path"] as? String), isDirectory: true)
        }
        #expect(try readTree(try await activeTree()) == files)

        // Two files deleted: no answer names them; the bundle's copy answers one, and the
        // other has none. The resolver marks the package, and one plain sync heals it.
        let bundle = work.appendingPathComponent("bundle")
        try writeTree(["dir0/file0.bin": Data("bundled".utf8)], under: bundle)
        let tree = try await activeTree()
        for path in ["dir0/file0.bin", "dir1/file1.bin"] {
            try FileManager.default.removeItem(at: tree.appendingPathComponent(path))
        }
        let fallback = try await Subprocess.check(
            hot,
            ["resolve", "dir0/file0.bin", "--root", root.path, "--bundle", bundle.path]
        )
        #expect(
            fallback.stdout.trimmingCharacters(in: .newlines) == bundle.appendingPathComponent("dir0/file0.bin").path
        )
        let none = try await Subprocess.run(hot, ["resolve", "dir1/file1.bin", "--root", root.path])
        #expect(none.status == 1, "\(none.stdout)")
        for index in 2..<60 {
            let name = "dir\(index % 6)/file\(index).bin"
            let answer = try await Subprocess.check(hot, ["resolve", name, "--root", root.path])
            let path = answer.stdout.trimmingCharacters(in: .newlines)
            #expect(FileManager.default.fileExists(atPath: path), "\(name)")
            if index > 10 { break }  // a sample: each run of hot opens the store anew
        }
        let healedFiles = try await Subprocess.check(hot, sync)
        #expect(healedFiles.stdout.contains("pack\theal\tok"), "\(healedFiles.stdout)")
        #expect(try readTree(try await activeTree()) == files)
        #expect(nginx.requestCount(for: archivePath) == 1)  // restored from the objects
        let back = try await Subprocess.check(hot, ["resolve", "dir0/file0.bin", "--root", root.path])
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: back.stdout.trimmingCharacters(in: .newlines)))
                == files["dir0/file0.bin"]
        )

        // Files deleted with no reader to notice: the quick check finds them, at most once
        // per interval (a day by default: the sync just after the last check does not look).
        try FileManager.default.removeItem(at: try await activeTree().appendingPathComponent("dir2/file2.bin"))
        let soon = try await Subprocess.check(hot, sync)
        #expect(soon.stdout.contains("pack\tunchanged\tok"), "\(soon.stdout)")
        let checked = try await Subprocess.check(hot, sync + ["--check-interval", "0"])
        #expect(checked.stdout.contains("pack\theal\tok"), "\(checked.stdout)")
        #expect(try readTree(try await activeTree()) == files)
        #expect(nginx.requestCount(for: archivePath) == 1)

        for (loss, downloads) in [("the tree", 0), ("the tree and every object", 1)] {
            try FileManager.default.removeItem(at: try await activeTree())
            if downloads == 1 { try FileManager.default.removeItem(at: root.appendingPathComponent("objects")) }
            let status = try await Subprocess.check(hot, ["status", "--root", root.path])
            #expect(!status.stdout.contains("installed"), "\(loss): \(status.stdout)")
            #expect(status.stdout.contains("fileMissing"), "\(loss): \(status.stdout)")

            let healed = try await Subprocess.check(hot, sync)
            #expect(healed.stdout.contains("pack\theal\tok"), "\(loss): \(healed.stdout)")
            #expect(try readTree(try await activeTree()) == files, "\(loss)")
            #expect(nginx.requestCount(for: archivePath) == downloads + 1, "\(loss)")
            let after = try await Subprocess.check(hot, ["status", "--root", root.path, "--check"])
            #expect(after.stdout.contains("\tinstalled\t"), "\(loss): \(after.stdout)")
            let resolved = try await Subprocess.check(hot, ["resolve", "dir0/file0.bin", "--root", root.path])
            let path = resolved.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == files["dir0/file0.bin"], "\(loss)")
        }
    }
}
