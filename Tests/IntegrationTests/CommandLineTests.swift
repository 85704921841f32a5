import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import Testing

/// The `hot` tool, run as a user runs it.
@Suite("hot command line")
struct CommandLineTests {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// The `hot` executable built beside the test bundle.
    static func hotExecutable() throws -> URL {
        try builtExecutable("hot")
    }

    /// Runs `hot`, waiting on a thread of its own (see ``Subprocess``).
    static func run(_ arguments: [String]) async throws -> Result {
        let output = try await Subprocess.run(try hotExecutable().path, arguments)
        return Result(status: output.status, stdout: output.stdout, stderr: output.stderr)
    }

    struct StatusDocument: Decodable {
        struct Package: Decodable {
            var id: String
            var version: String?
            var state: String
            var path: String?
        }
        var packages: [Package]
    }

    @Test("pack, sync over HTTP, status --json, resolve with fallback")
    func publishAndInstall() async throws {
        let source = try makeTemporaryDirectory("src")
        let files = ["sub/sample@3x.png": noise(4_000, seed: 1), "a/b/c.json": Data("{}".utf8)]
        try writeTree(files, under: source)
        let repo = try makeTemporaryDirectory("repo")
        let packed = try await Self.run(["pack", source.path, "--id", "images", "--version", "7", "--repo", repo.path])
        #expect(packed.status == 0, "\(packed.stderr)")
        let envelope = try SignedEnvelope.parse(Data(contentsOf: repo.appendingPathComponent("manifest.json")))
        #expect(envelope.signatures.isEmpty)
        let entry = try #require(try SignedManifestBody.decode(envelope.signed).package("images")?.entry(for: "7"))
        // Content-addressed: the name carries the first 12 hex digits of the archive's SHA-256.
        #expect(entry.url == "packages/images-7-\(entry.sha256.prefix(12)).zip")

        let server = try await NginxServer.start(root: repo)
        let root = try makeTemporaryDirectory("store")
        for transport in TransportKind.allCases.map(\.rawValue) {
            let storeRoot = root.appendingPathComponent(transport)
            let synced = try await Self.run([
                "sync", "--manifest", server.baseURL.appendingPathComponent("manifest.json").absoluteString,
                "--root", storeRoot.path, "--transport", transport, "--allow-unsigned",
            ])
            #expect(synced.status == 0, "\(synced.stderr)")

            let status = try await Self.run(["status", "--root", storeRoot.path, "--json"])
            let document = try JSONDecoder().decode(StatusDocument.self, from: Data(status.stdout.utf8))
            let package = try #require(document.packages.first)
            #expect(package.id == "images" && package.version == "7" && package.state == "installed")
            #expect(try readTree(URL(fileURLWithPath: try #require(package.path))) == files)

            let bundle = try makeTemporaryDirectory("bundle")
            try writeTree(["logo.png": Data("l".utf8)], under: bundle)
            let resolved = try await Self.run([
                "resolve", "sub/sample", "--root", storeRoot.path, "--bundle", bundle.path,
            ])
            #expect(
                resolved.stdout.trimmingCharacters(in: .newlines) == "\(try #require(package.path))/sub/sample@3x.png"
            )
            let fallback = try await Self.run(["resolve", "logo", "--root", storeRoot.path, "--bundle", bundle.path])
            #expect(fallback.stdout.trimmingCharacters(in: .newlines) == bundle.appendingPathComponent("logo.png").path)
            let missing = try await Self.run(["resolve", "nothing", "--root", storeRoot.path, "--bundle", bundle.path])
            #expect(missing.status != 0)
        }
        await server.stop()
    }

    @Test(
        "hot sync and hot install check a manifest alike: unsigned despite --trust only with --allow-unsigned-despite-trust"
    )
    func installAndSyncShareManifestOptions() async throws {
        let repo = try makeTemporaryDirectory("repo")
        for id in ["a", "b"] {
            let source = try makeTemporaryDirectory("src-\(id)")
            try writeTree(["\(id).txt": Data(id.utf8)], under: source)
            let packed = try await Self.run(["pack", source.path, "--id", id, "--version", "1", "--repo", repo.path])
            #expect(packed.status == 0, "\(packed.stderr)")
        }
        let keys = try makeTemporaryDirectory("keys")
        let (privateKey, publicKey) = (
            keys.appendingPathComponent("k.pem").path, keys.appendingPathComponent("k.pub").path
        )
        #expect(try await Self.run(["keygen", "--private", privateKey, "--public", publicKey]).status == 0)
        let manifest = repo.appendingPathComponent("manifest.json").path

        // The manifest is unsigned: `hot pack` wrote it and nothing signed it.
        for (command, expected) in [(["sync"], ["a", "b"]), (["install", "b"], ["b"])] {
            let root = try makeTemporaryDirectory("store")
            let base = command + ["--manifest", manifest, "--root", root.path, "--trust", publicKey]
            let refused = try await Self.run(base + ["--allow-unsigned"])
            #expect(refused.status == 1, "\(command): \(refused.stderr)")
            #expect(refused.stderr.contains("this client was given trust keys"), "\(command): \(refused.stderr)")
            let alone = try await Self.run(base + ["--allow-unsigned-despite-trust"])
            #expect(alone.status == 64, "\(command): \(alone.stderr)")
            #expect(alone.stderr.contains("goes with --allow-unsigned and --trust"), "\(command): \(alone.stderr)")
            let noTime = try await Self.run(base + ["--allow-unsigned", "--timeout", "0"])
            #expect(noTime.status == 64, "\(command): \(noTime.stderr)")
            #expect(try StoreInspection.namedVersions(root: root) == [:], "\(command)")

            let accepted = try await Self.run(base + ["--allow-unsigned", "--allow-unsigned-despite-trust"])
            #expect(accepted.status == 0, "\(command): \(accepted.stderr)")
            #expect(accepted.stderr.contains("ACCEPTING AN UNSIGNED MANIFEST"), "\(command): \(accepted.stderr)")
            let status = try await Self.run(["status", "--root", root.path, "--json"])
            let document = try JSONDecoder().decode(StatusDocument.self, from: Data(status.stdout.utf8))
            #expect(document.packages.filter { $0.version == "1" }.map(\.id).sorted() == expected, "\(command)")
        }
    }

    @Test("a corrupted newer archive is refused with one clear line, and the previous version stays")
    func corruptedRelease() async throws {
        let repo = try makeTemporaryDirectory("repo")
        let v1 = try makeTemporaryDirectory("v1")
        try writeTree(["a.txt": Data("one".utf8)], under: v1)
        let v2 = try makeTemporaryDirectory("v2")
        try writeTree(["a.txt": Data("two".utf8)], under: v2)
        let keys = try makeTemporaryDirectory("keys")
        let (privateKey, publicKey) = (
            keys.appendingPathComponent("k.pem").path, keys.appendingPathComponent("k.pub").path
        )
        #expect(try await Self.run(["keygen", "--private", privateKey, "--public", publicKey]).status == 0)
        #expect(try await Self.run(["pack", v1.path, "--id", "p", "--version", "1", "--repo", repo.path]).status == 0)
        #expect(try await Self.run(["sign", "--repo", repo.path, "--key", privateKey]).status == 0)
        let server = try await NginxServer.start(root: repo)
        let root = try makeTemporaryDirectory("store")
        let manifestURL = server.baseURL.appendingPathComponent("manifest.json").absoluteString
        let sync = ["sync", "--manifest", manifestURL, "--root", root.path, "--trust", publicKey]
        #expect(try await Self.run(sync).status == 0)

        #expect(try await Self.run(["pack", v2.path, "--id", "p", "--version", "2", "--repo", repo.path]).status == 0)
        #expect(try await Self.run(["sign", "--repo", repo.path, "--key", privateKey]).status == 0)
        let name = try #require(
            try FileManager.default.contentsOfDirectory(atPath: repo.appendingPathComponent("packages").path)
                .first { $0.hasPrefix("p-2-") }
        )
        let archive = repo.appendingPathComponent("packages/\(name)")
        var bytes = try Data(contentsOf: archive)
        bytes[bytes.count / 2] ^= 0xff
        try bytes.write(to: archive)

        let failed = try await Self.run(sync)
        #expect(failed.status == 1)
        // Not a terminal: progress comes as plain lines, and the failure as one error line.
        let lines = failed.stderr.split(separator: "\n")
        let errors = lines.filter { $0.hasPrefix("hot: error: ") }
        #expect(errors.count == 1)
        #expect(errors.first?.contains("SHA-256") == true)
        #expect(errors.first?.contains("package p") == true)
        #expect(lines.contains { $0.hasPrefix("p\t2\tdownloading") })
        #expect(lines.contains { $0.hasPrefix("p\t2\tfailed") })

        let status = try JSONDecoder().decode(
            StatusDocument.self,
            from: Data(try await Self.run(["status", "--root", root.path, "--json"]).stdout.utf8)
        )
        #expect(status.packages.first?.version == "1")
        #expect(status.packages.first?.state == "failed")
        let path = try #require(status.packages.first?.path)
        #expect(try String(contentsOfFile: path + "/a.txt", encoding: .utf8) == "one")
        await server.stop()
    }

    /// A hostile archive for `hot unpack`: Python that writes it to `sys.argv[1]`, extra
    /// arguments, and the words the one-line error must contain (the entry and the reason).
    struct HostileUnpack: Sendable, CustomTestStringConvertible {
        var name: String
        var script: String
        var arguments: [String] = []
        var mentions: [String]
        var testDescription: String { name }
    }

    static let hostileUnpacks: [HostileUnpack] = [
        HostileUnpack(
            name: "zip-slip",
            script: #"z.writestr("../../evil.txt", "escaped")"#,
            mentions: ["../../evil.txt", "'..' component"]
        ),
        HostileUnpack(
            name: "absolute path",
            script: #"z.writestr("/evil-absolute.txt", "escaped")"#,
            mentions: ["/evil-absolute.txt", "absolute"]
        ),
        HostileUnpack(
            name: "symlink",
            script: """
                link = zipfile.ZipInfo("link")
                link.create_system = 3
                link.external_attr = 0o120777 << 16
                z.writestr(link, "../../evil.txt")
                """,
            mentions: ["link", "symbolic link"]
        ),
        HostileUnpack(
            name: "name component over 255 bytes",
            script: #"z.writestr("d/" + "n" * 300 + ".txt", "x")"#,
            mentions: [String(repeating: "n", count: 300), "255"]
        ),
        HostileUnpack(
            name: "inflates past --max-bytes",
            script: #"z.writestr("zeros.bin", bytes(4 << 20), compress_type=zipfile.ZIP_DEFLATED)"#,
            arguments: ["--max-bytes", "1000000"],
            mentions: ["zeros.bin", "limit of 1000000 bytes"]
        ),
    ]

    @Test(
        "unpack refuses a hostile archive with both backends, names the entry and the reason, and leaves nothing",
        arguments: hostileUnpacks
    )
    func unpackHostile(_ hostile: HostileUnpack) async throws {
        let work = try makeTemporaryDirectory("unpack")
        let archive = work.appendingPathComponent("evil.zip")
        let script = """
            import zipfile, sys
            with zipfile.ZipFile(sys.argv[1], "w") as z:
                z.writestr("ok.txt", "fine")
            \(hostile.script.split(separator: "\n").map { "    " + $0 }.joined(separator: "\n"))
            """
        try await Subprocess.check("python3", ["-c", script, archive.path])

        let destination = work.appendingPathComponent("out")
        for backend in UnarchiverKind.allCases.map(\.rawValue) {
            let before = try FileManager.default.contentsOfDirectory(atPath: work.path).sorted()
            let result = try await Self.run(
                ["unpack", archive.path, destination.path, "--backend", backend] + hostile.arguments
            )
            #expect(result.status != 0)
            #expect(result.stdout.isEmpty)
            #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
            for word in hostile.mentions {
                #expect(result.stderr.contains(word), "\(backend): \(result.stderr)")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: work.path).sorted() == before)
            #expect(
                !FileManager.default.fileExists(
                    atPath: work.deletingLastPathComponent().appendingPathComponent("evil.txt").path
                )
            )
            #expect(!FileManager.default.fileExists(atPath: "/evil-absolute.txt"))
        }
    }

    @Test("bad invocations fail with one line on stderr")
    func badInvocations() async throws {
        let root = try makeTemporaryDirectory("bad")
        let missingDirectory = try await Self.run([
            "pack", root.appendingPathComponent("nope").path, "--id", "a", "--version", "1", "--repo", root.path,
        ])
        #expect(missingDirectory.status != 0)
        #expect(missingDirectory.stderr.contains("not a directory"))
        let badID = try await Self.run(["pack", root.path, "--id", "../x", "--version", "1", "--repo", root.path])
        #expect(badID.status != 0)
        let badManifest = try await Self.run([
            "sync", "--manifest", root.appendingPathComponent("none.json").path, "--root", root.path,
            "--allow-unsigned",
        ])
        #expect(badManifest.status != 0)
        #expect(badManifest.stderr.split(separator: "\n").count == 1)
    }

    /// A `hot` built without a trait names it when asked for its backend, in one line, before
    /// touching the store; one built with it does not refuse.
    @Test("a backend left out of the build is refused naming its trait")
    func backendsLeftOut() async throws {
        let root = try makeTemporaryDirectory("left-out")
        let store = root.appendingPathComponent("store")
        let zip = root.appendingPathComponent("a.zip")
        try await Subprocess.check(
            "python3",
            ["-c", "import zipfile, sys; zipfile.ZipFile(sys.argv[1], 'w').writestr('a.txt', 'a')", zip.path]
        )
        let requests: [(arguments: [String], trait: String, linked: Bool)] = [
            (
                ["unpack", zip.path, root.appendingPathComponent("out").path, "--backend", "libarchive"], "LibArchive",
                UnarchiverKind.allCases.map(\.rawValue).contains("libarchive")
            ),
            (
                [
                    "sync", "--manifest", "http://127.0.0.1:9/manifest.json", "--root", store.path, "--allow-unsigned",
                    "--transport", "curl",
                ], "Curl", TransportKind.allCases.map(\.rawValue).contains("curl")
            ),
            (
                [
                    "sync", "--manifest", "http://127.0.0.1:9/manifest.json", "--root", store.path, "--allow-unsigned",
                    "--unarchiver", "libarchive",
                ], "LibArchive", UnarchiverKind.allCases.map(\.rawValue).contains("libarchive")
            ),
        ]
        for request in requests {
            let result = try await Self.run(request.arguments)
            if request.linked {
                #expect(!result.stderr.contains("trait"), "\(result.stderr)")
            } else {
                #expect(result.status == 1)
                #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
                #expect(result.stderr.contains("not in this build of hot"), "\(result.stderr)")
                #expect(result.stderr.contains("'\(request.trait)'"), "\(result.stderr)")
                #expect(!FileManager.default.fileExists(atPath: store.path))
            }
        }
    }
}

/// The store maintenance commands: repair, delete, gc.
@Suite("hot store maintenance")
struct StoreMaintenanceCommandTests {
    @Test("hot repair restores a deleted installed file with the server stopped; delete and gc free what nothing uses")
    func repairOffline() async throws {
        let repo = try makeTemporaryDirectory("repo")
        let shared = noise(50_000, seed: 9)
        let a = try makeTemporaryDirectory("a")
        try writeTree(["logo.png": shared, "a.txt": Data("a".utf8)], under: a)
        let b = try makeTemporaryDirectory("b")
        try writeTree(["img/logo.png": shared, "b.txt": Data("b".utf8)], under: b)
        for (directory, id) in [(a, "a"), (b, "b")] {
            let packed = try await CommandLineTests.run([
                "pack", directory.path, "--id", id, "--version", "1", "--repo", repo.path,
            ])
            #expect(packed.status == 0, "\(packed.stderr)")
        }
        let server = try await NginxServer.start(root: repo)
        let root = try makeTemporaryDirectory("store")
        let manifestURL = server.baseURL.appendingPathComponent("manifest.json").absoluteString
        let synced = try await CommandLineTests.run([
            "sync", "--manifest", manifestURL, "--root", root.path, "--allow-unsigned",
        ])
        #expect(synced.status == 0, "\(synced.stderr)")
        await server.stop()

        let installed = root.appendingPathComponent("packages/b/1/img/logo.png")
        try FileManager.default.removeItem(at: installed)
        let status = try await CommandLineTests.run(["status", "--root", root.path, "--check"])
        #expect(status.stdout.contains("b\t1\tfileMissing"), "\(status.stdout)")
        #expect(status.status == 1)
        #expect(status.stderr.contains("hot: b 1: missing img/logo.png"), "\(status.stderr)")

        let repaired = try await CommandLineTests.run(["repair", "--root", root.path])
        #expect(repaired.status == 0, "\(repaired.stderr)")
        #expect(repaired.stdout.contains("b\t1\trepaired\trestored 1 file(s) from objects"), "\(repaired.stdout)")
        #expect(repaired.stdout.contains("a\t1\tok"))
        #expect(try Data(contentsOf: installed) == shared)
        let after = try await CommandLineTests.run(["status", "--root", root.path, "--json"])
        let document = try JSONDecoder().decode(CommandLineTests.StatusDocument.self, from: Data(after.stdout.utf8))
        #expect(document.packages.map(\.state) == ["installed", "installed"])

        let deleted = try await CommandLineTests.run(["delete", "a", "--root", root.path])
        #expect(deleted.status == 0, "\(deleted.stderr)")
        #expect(deleted.stdout.hasPrefix("deleted a: 1 version(s), 1 object(s)"), "\(deleted.stdout)")
        #expect(try Data(contentsOf: installed) == shared)
        let missing = try await CommandLineTests.run(["delete", "a", "--root", root.path])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("package a"))

        let collected = try await CommandLineTests.run(["gc", "--root", root.path])
        #expect(collected.status == 0)
        #expect(collected.stdout.hasPrefix("removed 0 version(s), 0 object(s)"), "\(collected.stdout)")
    }
}
