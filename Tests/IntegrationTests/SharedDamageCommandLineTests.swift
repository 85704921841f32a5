import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import HotVerify
import Testing

/// A file two versions share (one object, hard-linked into both trees) damaged in place, then
/// `hot repair`, then the publisher rolling back: the real `hot` against a signed repository
/// on nginx.
@Suite("hot repair of shared files")
struct SharedDamageCommandLineTests {
    /// The inode of a file, to tell whether two names are one file.
    static func inode(_ url: URL) throws -> UInt64 {
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        return try #require((attributes[.systemFileNumber] as? NSNumber)?.uint64Value)
    }

    /// Flips bytes in the middle of the file at `url`, in place (same inode, same size).
    static func damageInPlace(_ url: URL) throws {
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: url.path)
        let handle = try FileHandle(forUpdating: url)
        defer { try? handle.close() }
        try handle.seek(toOffset: 1_000)
        try handle.write(contentsOf: Data(repeating: 0x5a, count: 64))
    }

    /// Each installed version of `id`: its directory name and its files.
    static func trees(of id: String, in root: URL) throws -> [String: [String: Data]] {
        let directory = root.appendingPathComponent("packages/\(id)")
        var trees: [String: [String: Data]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) where !name.hasPrefix(".") {
            trees[name] = try readTree(directory.appendingPathComponent(name))
        }
        return trees
    }

    @Test(
        "a shared file damaged in place in version 2, hot repair, then a rollback to version 1: every kept tree is byte-exact",
        arguments: [true, false]
    )
    func repairThenRollback(repairCanDownload: Bool) async throws {
        let key = try CryptoSigner.generate()
        let keys = try makeTemporaryDirectory("keys")
        let publicKey = keys.appendingPathComponent("server.pub")
        try key.publicKey.pem.write(to: publicKey, atomically: true, encoding: .utf8)
        let repository = try SignedRepository(keys: [key])
        let shared = noise(40_000, seed: 17)
        let v1Files = ["img/shared.bin": shared, "a.txt": Data("one".utf8)]
        let v2Files = ["img/shared.bin": shared, "a.txt": Data("two".utf8)]
        let v1 = try repository.pack(v1Files, id: "p", version: "1")
        try repository.sign(with: [key])
        let nginx = try await NginxServer.start(root: repository.directory)
        defer { nginx.stopNow() }
        let root = try makeTemporaryDirectory("store")
        let sync = [
            "sync", "--manifest", repository.url(on: nginx).absoluteString, "--root", root.path, "--trust",
            publicKey.path,
        ]
        var result = try await CommandLineTests.run(sync)
        #expect(result.status == 0, "\(result.stderr)")
        let v2 = try repository.pack(v2Files, id: "p", version: "2")
        try repository.sign(with: [key])
        result = try await CommandLineTests.run(sync)
        #expect(result.status == 0, "\(result.stderr)")

        // One object in both trees; damaged through version 2's tree, it is damaged in both.
        let keptFile = root.appendingPathComponent("packages/p/1/img/shared.bin")
        let activeFile = root.appendingPathComponent("packages/p/2/img/shared.bin")
        #expect(try Self.inode(keptFile) == Self.inode(activeFile))
        try Self.damageInPlace(activeFile)
        #expect(try Data(contentsOf: keptFile) != shared)

        let v2Archive = repository.archive(v2)
        let away = v2Archive.appendingPathExtension("away")
        if !repairCanDownload { try FileManager.default.moveItem(at: v2Archive, to: away) }
        let repaired = try await CommandLineTests.run(["repair", "--root", root.path])
        if repairCanDownload {
            #expect(repaired.status == 0, "\(repaired.stderr)")
            #expect(repaired.stdout.contains("p\t2\trepaired\tdownloaded again"), "\(repaired.stdout)")
            #expect(repaired.stdout.contains("relinked 1 file(s) of kept versions"), "\(repaired.stdout)")
            #expect(try Data(contentsOf: keptFile) == shared)
        } else {
            #expect(repaired.status == 1)
            #expect(repaired.stdout.contains("p\t2\tdamaged"), "\(repaired.stdout)")
            try FileManager.default.moveItem(at: away, to: v2Archive)
        }

        // The publisher rolls back: the manifest offers version 1 again, re-signed.
        repository.body.editPackage("p") { $0.releases.append("1") }
        try repository.sign(with: [key])
        result = try await CommandLineTests.run(sync)
        #expect(result.status == 0, "\(result.stderr)")
        let v1Path = "/packages/" + repository.archive(v1).lastPathComponent
        // Restored from its relinked kept tree with no download, or, when the repair could
        // not get a good object, refused by the restore's hash check and downloaded again.
        #expect(nginx.requestCount(for: v1Path) == (repairCanDownload ? 1 : 2))

        for arguments in [
            ["status", "--root", root.path, "--json"], ["status", "--root", root.path, "--check", "--json"],
        ] {
            let status = try await CommandLineTests.run(arguments)
            #expect(status.status == 0, "\(status.stderr)")
            let document = try JSONDecoder().decode(
                CommandLineTests.StatusDocument.self,
                from: Data(status.stdout.utf8)
            )
            let package = try #require(document.packages.first)
            #expect(package.version == "1")
            #expect(package.state == "installed", "\(arguments)")
            #expect(try readTree(URL(fileURLWithPath: try #require(package.path))) == v1Files)
        }
        // Every tree the store keeps, version 1 and the kept version 2, is byte-exact.
        let trees = try Self.trees(of: "p", in: root)
        #expect(trees.count == 2)
        #expect(trees.values.filter { $0 == v1Files }.count == 1)
        #expect(trees.values.filter { $0 == v2Files }.count == 1)
        let full = try await CommandLineTests.run(["repair", "--root", root.path])
        #expect(full.status == 0, "\(full.stderr)")
        #expect(full.stdout.contains("p\t1\tok"), "\(full.stdout)")
    }
}
