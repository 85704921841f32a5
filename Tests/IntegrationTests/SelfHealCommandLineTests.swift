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
        var files: [String: Data] = [:]
        for index in 0..<60 {
            files["dir\(index % 6)/file\(index).bin"] = noise(500 + index * 37, seed: UInt64(index) * 2 + 2)
        }
        let rig = try await HealRig("heal", files: files)
        defer { rig.stopNow() }
        let (work, nginx, archivePath, root, hot, sync) =
            (rig.work, rig.nginx, rig.archivePath, rig.root, rig.hot, rig.sync)
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

/// Every kind of loss from the issue's list, made with real deletions under a store the real
/// `hot sync` installed, once while no process runs and once while another process resolves
/// every name over and over: every answer names a file that exists and holds the package's
/// bytes or the bundle's, `hot status` never calls a package installed at a path that is
/// gone, and one plain `hot sync` puts the whole store back: the tree byte-exact, its file
/// list, its objects, the name index of the snapshot and the trust state.
@Suite("Every kind of loss, healed by one plain hot sync")
struct LossMatrixTests {
    enum Loss: String, CaseIterable, Sendable {
        case files = "two files of the tree"
        case tree = "the tree"
        case treeAndObjects = "the tree and every object"
        case objects = "the objects"
        case storeFile = "store.json"
        case nameIndex = "the name index"
        case fileLists = "the file lists"
        case nameIndexAndFileLists = "the name index and the file lists"
        case trust = "trust.json"
        case root = "the whole root"
    }

    /// What the resolving process saw: each round's answers, and whether the round began
    /// after the deletion was complete.
    final class Rounds: Sendable {
        struct Round: Sendable {
            var afterDeletion: Bool
            var output: Subprocess.Output
        }
        private let state = Locked((deleted: false, stop: false, rounds: [Round]()))
        var deleted: Bool {
            get { state.value.deleted }
            set { state.withLock { $0.deleted = newValue } }
        }
        var stopping: Bool { state.value.stop }
        func stop() { state.withLock { $0.stop = true } }
        func add(_ round: Round) { state.withLock { $0.rounds.append(round) } }
        var all: [Round] { state.value.rounds }
        var afterDeletion: Int { state.value.rounds.filter(\.afterDeletion).count }
    }

    @Test(
        "a version directory, or a folder in it, replaced by a link out of the store: never served, reported, healed by a plain sync, the outside untouched"
    )
    func linkedTreeIsHealed() async throws {
        var files: [String: Data] = [:]
        for index in 0..<12 {
            files["dir\(index % 3)/file\(index).bin"] = noise(300 + index * 11, seed: UInt64(index) * 3 + 1)
        }
        let rig = try await HealRig("linked-tree", files: files)
        defer { rig.stopNow() }
        let (work, nginx, archivePath, root, hot, sync) =
            (rig.work, rig.nginx, rig.archivePath, rig.root, rig.hot, rig.sync)
        try await Subprocess.check(hot, sync)
        func status(check: Bool) async throws -> (state: String, tree: URL) {
            // --check exits 1 when it finds damage.
            let status = try await Subprocess.run(
                hot,
                ["status", "--root", root.path, "--json"] + (check ? ["--check"] : [])
            )
            #expect(status.status == 0 || (check && status.status == 1), "\(status.stderr)")
            let document = try JSONSerialization.jsonObject(with: status.standardOutput) as? [String: Any]
            let package = try #require((document?["packages"] as? [[String: Any]])?.first)
            return (
                try #require(package["state"] as? String),
                URL(fileURLWithPath: try #require(package["path"] as? String), isDirectory: true)
            )
        }
        func isLink(_ url: URL) -> Bool {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: url.path)) != nil
        }

        // Outside the store: a tree of the attacker's files at the same paths, and one more.
        let outside = work.appendingPathComponent("outside")
        var planted: [String: Data] = ["extra.txt": Data("not the store's".utf8)]
        for (path, data) in files { planted[path] = Data(repeating: 0x41, count: data.count) }
        try writeTree(planted, under: outside)
        let bundle = work.appendingPathComponent("bundle")
        try writeTree(["dir0/file0.bin": Data("bundled".utf8)], under: bundle)

        // 1. The version directory becomes a link to it.
        let tree = try await status(check: false).tree
        try FileManager.default.removeItem(at: tree)
        try FileManager.default.createSymbolicLink(at: tree, withDestinationURL: outside)
        let resolved = try await Subprocess.check(
            hot,
            ["resolve", "dir0/file0.bin", "--root", root.path, "--bundle", bundle.path]
        )
        #expect(
            resolved.stdout.trimmingCharacters(in: .newlines) == bundle.appendingPathComponent("dir0/file0.bin").path,
            "served through the link: \(resolved.stdout)"
        )
        let unanswered = try await Subprocess.run(hot, ["resolve", "dir1/file1.bin", "--root", root.path])
        #expect(unanswered.status == 1, "served through the link: \(unanswered.stdout)")
        #expect(try await status(check: false).state == "treeOutsideStore")
        #expect(try await status(check: true).state == "treeOutsideStore")
        let healed = try await Subprocess.check(hot, sync)
        #expect(healed.stdout.contains("pack\theal\tok"), "\(healed.stdout)")
        #expect(!isLink(tree), "the link is still there")
        #expect(try readTree(try await status(check: false).tree) == files)
        #expect(try await status(check: true).state == "installed")
        #expect(nginx.requestCount(for: archivePath) == 1)  // put back from the objects
        #expect(try readTree(outside) == planted, "a file outside the store changed")
        let again = try await Subprocess.check(hot, sync)
        #expect(!again.stdout.contains("heal"), "\(again.stdout)")

        // 2. A folder inside the tree becomes a link: its files are not served, and a sync
        // heals them.
        let folder = try await status(check: false).tree.appendingPathComponent("dir1")
        try FileManager.default.removeItem(at: folder)
        try FileManager.default.createSymbolicLink(
            at: folder,
            withDestinationURL: outside.appendingPathComponent("dir1")
        )
        let inner = try await Subprocess.run(hot, ["resolve", "dir1/file1.bin", "--root", root.path])
        #expect(inner.status == 1, "served through the link: \(inner.stdout)")
        #expect(try await status(check: true).state == "fileMissing")
        let healedFolder = try await Subprocess.check(hot, sync)
        #expect(healedFolder.stdout.contains("pack\theal\tok"), "\(healedFolder.stdout)")
        #expect(!isLink(folder))
        #expect(try readTree(try await status(check: false).tree) == files)
        #expect(try readTree(outside) == planted, "a file outside the store changed")

        // 3. The version directory a link again, and the objects gone: downloaded again.
        let current = try await status(check: false).tree
        try FileManager.default.removeItem(at: current)
        try FileManager.default.createSymbolicLink(at: current, withDestinationURL: outside)
        try FileManager.default.removeItem(at: root.appendingPathComponent("objects"))
        let fetched = try await Subprocess.check(hot, sync)
        #expect(fetched.stdout.contains("pack\theal\tok"), "\(fetched.stdout)")
        #expect(nginx.requestCount(for: archivePath) == 2)
        #expect(!isLink(try await status(check: false).tree))
        #expect(try readTree(try await status(check: false).tree) == files)
        #expect(try await status(check: true).state == "installed")
        #expect(try readTree(outside) == planted, "a file outside the store changed")
    }

    @Test("each loss, with no other process and while another resolves", arguments: Loss.allCases)
    func healed(_ loss: Loss) async throws {
        let key = try CryptoSigner.generate()
        let work = try makeTemporaryDirectory("losses")
        defer { try? FileManager.default.removeItem(at: work) }
        let publicKey = work.appendingPathComponent("server.pub")
        try key.publicKey.pem.write(to: publicKey, atomically: true, encoding: .utf8)
        var files: [String: Data] = [:]
        var bundled: [String: Data] = [:]
        for index in 0..<60 {
            let name = "dir\(index % 6)/file\(index).bin"
            files[name] = noise(300 + index * 29, seed: UInt64(index) * 3 + 5)
            bundled[name] = Data("bundled \(name)".utf8)
        }
        let names = files.keys.sorted()
        let repository = try SignedRepository(keys: [key])
        _ = try repository.pack(files, id: "pack", version: "1")
        try repository.sign(with: [key])
        let nginx = try await NginxServer.start(root: repository.directory)
        defer { nginx.stopNow() }
        let bundle = work.appendingPathComponent("bundle")
        try writeTree(bundled, under: bundle)
        let hot = try builtExecutable("hot").path
        let resolve = ["resolve"] + names + ["--bundle", bundle.path]

        for concurrent in [false, true] {
            let label = "\(loss.rawValue), \(concurrent ? "while another process resolves" : "no other process")"
            let root = work.appendingPathComponent(concurrent ? "store-concurrent" : "store")
            let sync =
                ["sync", "--manifest", repository.url(on: nginx).absoluteString, "--root", root.path]
                + ["--trust", publicKey.path]
            try await Subprocess.check(hot, sync)
            let tree = try await activeTree(hot, root)
            #expect(try readTree(tree) == files, "\(label)")

            let rounds = Rounds()
            let reader: Task<Void, any Error>? =
                concurrent
                ? Task {
                    while !rounds.stopping {
                        let afterDeletion = rounds.deleted
                        let output = try await Subprocess.run(hot, resolve + ["--root", root.path])
                        rounds.add(.init(afterDeletion: afterDeletion, output: output))
                    }
                } : nil
            if concurrent {
                try await waitUntil("two resolve rounds before the deletion") { rounds.all.count >= 2 }
            }
            try delete(loss, root: root, tree: tree)
            rounds.deleted = true
            if concurrent {
                try await waitUntil("three resolve rounds after the deletion") { rounds.afterDeletion >= 3 }
                rounds.stop()
                try await reader?.value
                for round in rounds.all {
                    // Before the deletion ended, a round may have answered a file deleted after
                    // it answered; it never fails or crashes.
                    #expect(round.output.status == 0, "\(label): \(round.output.stderr)")
                    guard round.afterDeletion else { continue }
                    try expectServed(round.output.stdout, names: names, files: files, bundled: bundled, label)
                }
            }

            // A new process, as an app's next launch: every answer exists, and holds the
            // package's bytes or the bundle's.
            let answers = try await Subprocess.check(hot, resolve + ["--root", root.path])
            try expectServed(answers.stdout, names: names, files: files, bundled: bundled, label)
            try await expectStatusNamesNoMissingPath(hot, root, label)

            // One plain sync, with a reader resolving meanwhile in the concurrent case.
            let during = concurrent ? Task { try await Subprocess.run(hot, resolve + ["--root", root.path]) } : nil
            let healed = try await Subprocess.check(hot, sync)
            if let during {
                let output = try await during.value
                #expect(output.status == 0, "\(label), during the sync: \(output.stderr)")
            }
            #expect(!healed.stdout.contains("\tfailed"), "\(label): \(healed.stdout)")
            try await expectWhole(hot, root, files: files, label)
            let after = try await Subprocess.check(hot, resolve + ["--root", root.path])
            for line in after.stdout.split(separator: "\n") {
                let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
                #expect(fields.count == 2 && !fields[1].contains(bundle.path), "\(label): \(line)")
            }
        }
    }

    /// Deletes what `loss` names under `root`.
    private func delete(_ loss: Loss, root: URL, tree: URL) throws {
        let manager = FileManager.default
        func remove(_ path: String) throws { try manager.removeItem(at: root.appendingPathComponent(path)) }
        switch loss {
        case .files:
            try manager.removeItem(at: tree.appendingPathComponent("dir0/file0.bin"))
            try manager.removeItem(at: tree.appendingPathComponent("dir1/file1.bin"))
        case .tree: try manager.removeItem(at: tree)
        case .treeAndObjects:
            try manager.removeItem(at: tree)
            try remove("objects")
        case .objects: try remove("objects")
        case .storeFile: try remove("store.json")
        case .nameIndex: try remove("index")
        case .fileLists: try remove("filelists")
        case .nameIndexAndFileLists:
            try remove("index")
            try remove("filelists")
        case .trust: try remove("trust.json")
        case .root: try manager.removeItem(at: root)
        }
    }

    /// The active tree, as `hot status --json` names it.
    private func activeTree(_ hot: String, _ root: URL) async throws -> URL {
        let status = try await Subprocess.check(hot, ["status", "--root", root.path, "--json"])
        let document = try JSONSerialization.jsonObject(with: status.standardOutput) as? [String: Any]
        let package = try #require((document?["packages"] as? [[String: Any]])?.first)
        return URL(fileURLWithPath: try #require(package["path"] as? String), isDirectory: true)
    }

    /// Each line of a `hot resolve` of several names names a file that exists, holding the
    /// package's bytes or the bundle's for that name.
    private func expectServed(
        _ output: String,
        names: [String],
        files: [String: Data],
        bundled: [String: Data],
        _ label: String
    ) throws {
        let lines = output.split(separator: "\n")
        #expect(lines.count == names.count, "\(label): \(output)")
        for line in lines {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 2, let expected = files[fields[0]] else {
                Issue.record("\(label): an unexpected line \(line)")
                continue
            }
            let served = FileManager.default.contents(atPath: fields[1])
            #expect(served == expected || served == bundled[fields[0]], "\(label): \(fields[0]) -> \(fields[1])")
        }
    }

    /// `hot status` calls no package installed at a path that is gone (a root that is gone
    /// has no status to give).
    private func expectStatusNamesNoMissingPath(_ hot: String, _ root: URL, _ label: String) async throws {
        let status = try await Subprocess.run(hot, ["status", "--root", root.path, "--json"])
        guard status.status == 0 else {
            #expect(!FileManager.default.fileExists(atPath: root.path), "\(label): \(status.stderr)")
            return
        }
        let document = try JSONSerialization.jsonObject(with: status.standardOutput) as? [String: Any]
        for package in document?["packages"] as? [[String: Any]] ?? [] {
            guard package["state"] as? String == "installed", let path = package["path"] as? String else { continue }
            #expect(FileManager.default.fileExists(atPath: path), "\(label): installed at \(path), which is gone")
        }
    }

    /// The store is whole: the tree byte-exact, its file list, an object for every file, the
    /// name index of the generation committed now, and the trust state.
    private func expectWhole(_ hot: String, _ root: URL, files: [String: Data], _ label: String) async throws {
        let tree = try await activeTree(hot, root)
        #expect(try readTree(tree) == files, "\(label)")
        let status = try await Subprocess.check(hot, ["status", "--root", root.path, "--check"])
        #expect(status.stdout.contains("\tinstalled\t"), "\(label): \(status.stdout)")
        let manager = FileManager.default
        let lists = manager.enumerator(atPath: root.appendingPathComponent("filelists").path)?.allObjects ?? []
        #expect(!lists.isEmpty, "\(label): no file list")
        var objects = 0
        if let walk = manager.enumerator(
            at: root.appendingPathComponent("objects"),
            includingPropertiesForKeys: [.isRegularFileKey]
        ) {
            for case let url as URL in walk
            where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
                objects += 1
            }
        }
        #expect(objects == files.count, "\(label): \(objects) objects")
        let storeFile = try Data(contentsOf: root.appendingPathComponent("store.json"))
        let generation = try #require(
            (try JSONSerialization.jsonObject(with: storeFile) as? [String: Any])?["generation"] as? Int
        )
        #expect(
            manager.fileExists(atPath: root.appendingPathComponent("index/names-\(generation)").path),
            "\(label): no name index for generation \(generation)"
        )
        #expect(manager.fileExists(atPath: root.appendingPathComponent("trust.json").path), "\(label)")
    }
}

/// A package `pack` of `files`, signed with a fresh key and served by nginx, and the
/// `hot sync` of a store under a work directory that trusts that key.
struct HealRig {
    let work: URL
    let repository: SignedRepository
    let nginx: NginxServer
    /// The package's archive, as a path on the server.
    let archivePath: String
    let root: URL
    /// The `hot` executable.
    let hot: String
    /// `hot sync` of ``root`` from the repository.
    let sync: [String]

    init(_ label: String, files: [String: Data]) async throws {
        let key = try CryptoSigner.generate()
        work = try makeTemporaryDirectory(label)
        let publicKey = work.appendingPathComponent("server.pub")
        try key.publicKey.pem.write(to: publicKey, atomically: true, encoding: .utf8)
        repository = try SignedRepository(keys: [key])
        let entry = try repository.pack(files, id: "pack", version: "1")
        try repository.sign(with: [key])
        nginx = try await NginxServer.start(root: repository.directory)
        archivePath = "/packages/" + repository.archive(entry).lastPathComponent
        root = work.appendingPathComponent("store")
        hot = try builtExecutable("hot").path
        sync =
            ["sync", "--manifest", repository.url(on: nginx).absoluteString, "--root", root.path]
            + ["--trust", publicKey.path]
    }

    /// Stops nginx and removes the work directory.
    func stopNow() {
        nginx.stopNow()
        try? FileManager.default.removeItem(at: work)
    }
}
