import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import Testing

/// Password-protected packages with 7-Zip on the other side: `hot unpack --password` reads what
/// 7-Zip packed with AES-256, `hot pack --password` writes what 7-Zip lists as AES-256 and
/// extracts, and `hot sync` installs it over nginx, full and as a delta. Runs where 7-Zip is
/// installed (`scripts/ensure-deps test` installs p7zip-full), and always under `CI=true`.
@Suite(
    "encrypted packages",
    .enabled(
        if: SevenZip.path != nil || ProcessInfo.processInfo.environment["CI"] == "true",
        "skipped: 7-Zip (7z) is not installed; scripts/ensure-deps test installs p7zip-full. Under CI=true its absence fails instead"
    )
)
struct EncryptedPackTests {

    /// A resource pack: images that do not compress (7-Zip stores them) beside text that does.
    static let files: [String: Data] = [
        "images/hero@3x.png": noise(300_000, seed: 3),
        "images/icon.png": noise(2_000, seed: 4),
        "index.json": Data(String(repeating: #"{"type": "overlay", "name": "frame"}"#, count: 500).utf8),
        "fonts/Title.otf": noise(40_000, seed: 5),
        "filters/warm.cube": Data(String(repeating: "0.1 0.2 0.3\n", count: 20_000).utf8),
        "empty.txt": Data(),
    ]

    private func require7z() throws -> String {
        try #require(SevenZip.path, "7-Zip (7z) is not installed")
    }

    /// `files` under `work/src`, packed by 7-Zip with AES-256 (deflate where it helps) as
    /// `work/seven.zip`, and as `work/seven-stored.zip` with -mx=0 (every entry stored).
    private func sevenZipArchives(in work: URL) async throws -> (source: URL, archives: [URL]) {
        let sevenZip = try require7z()
        let source = work.appendingPathComponent("src")
        try writeTree(Self.files, under: source)
        let deflated = work.appendingPathComponent("seven.zip")
        let stored = work.appendingPathComponent("seven-stored.zip")
        try await Subprocess.check(sevenZip, ["a", "-tzip", "-mem=AES256", "-psecret", deflated.path, "."], in: source)
        try await Subprocess.check(
            sevenZip,
            ["a", "-tzip", "-mem=AES256", "-mx=0", "-psecret", stored.path, "."],
            in: source
        )
        let listing = try await Subprocess.check(sevenZip, ["l", "-slt", deflated.path]).stdout
        #expect(listing.contains("Method = AES-256 Deflate") && listing.contains("Method = AES-256 Store"))
        return (source, [deflated, stored])
    }

    @Test("hot unpack --password reads a directory 7-Zip packed with AES-256, deflated and stored, byte for byte")
    func unpackSevenZip() async throws {
        let work = try makeTemporaryDirectory("aes-unpack")
        let (_, archives) = try await sevenZipArchives(in: work)
        for archive in archives {
            let out = work.appendingPathComponent("out-\(archive.lastPathComponent)")
            let result = try await CommandLineTests.run(["unpack", archive.path, out.path, "--password", "secret"])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("unpacked \(Self.files.count) files"))
            #expect(try readTree(out) == Self.files)
        }
    }

    /// Runs `hot unpack` on `archive` and requires a refusal in one line naming `words`, leaving
    /// `work` as it was: no destination, no partial directory.
    private func expectRefusal(_ archive: URL, in work: URL, password: String, _ words: [String]) async throws {
        let before = try FileManager.default.contentsOfDirectory(atPath: work.path).sorted()
        let out = work.appendingPathComponent("refused")
        let result = try await CommandLineTests.run(["unpack", archive.path, out.path, "--password", password])
        #expect(result.status != 0)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
        for word in words { #expect(result.stderr.contains(word), "\(result.stderr)") }
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.path).sorted() == before)
    }

    @Test("a wrong password is refused, leaving nothing behind")
    func wrongPassword() async throws {
        let work = try makeTemporaryDirectory("aes-wrong")
        let (_, archives) = try await sevenZipArchives(in: work)
        for archive in archives {
            try await expectRefusal(archive, in: work, password: "not secret", ["password", "verifier"])
        }
    }

    @Test("one flipped byte of ciphertext is refused, leaving nothing behind")
    func flippedByte() async throws {
        let work = try makeTemporaryDirectory("aes-flipped")
        let (_, archives) = try await sevenZipArchives(in: work)
        for archive in archives {
            // The middle of the largest entry's encrypted bytes: hero@3x.png, stored or not.
            var bytes = try Data(contentsOf: archive)
            let name = Data("images/hero@3x.png".utf8)
            let header = try #require(bytes.firstRange(of: name))
            let extraLength = Int(bytes[header.lowerBound - 2]) | Int(bytes[header.lowerBound - 1]) << 8
            let data = header.upperBound + extraLength
            let middle = data + 18 + 100_000
            bytes[middle] ^= 0x10
            let damaged = work.appendingPathComponent("damaged-\(archive.lastPathComponent)")
            try bytes.write(to: damaged)
            try await expectRefusal(damaged, in: work, password: "secret", ["hero@3x.png", "authentication code"])
        }
    }

    @Test("hot pack --password makes what 7-Zip lists as AES-256 and extracts, and hot sync installs it")
    func packListExtractSync() async throws {
        let sevenZip = try require7z()
        let work = try makeTemporaryDirectory("aes-pack")
        let source = work.appendingPathComponent("v1")
        try writeTree(Self.files, under: source)
        let repo = work.appendingPathComponent("repo")
        let packed = try await CommandLineTests.run([
            "pack", source.path, "--id", "pack", "--version", "1", "--repo", repo.path,
            "--password", "secret", "--encryption", "aes256",
        ])
        #expect(packed.status == 0, "\(packed.stderr)")
        #expect(packed.stdout.contains("encrypted (aes256)"))
        let envelope = try SignedEnvelope.parse(Data(contentsOf: repo.appendingPathComponent("manifest.json")))
        let entry = try #require(try SignedManifestBody.decode(envelope.signed).package("pack")?.entry(for: "1"))
        #expect(entry.password == "secret")
        let archive = repo.appendingPathComponent(entry.url)

        // 7-Zip: every file AES-256, extracted byte for byte with the password.
        let listing = try await Subprocess.check(sevenZip, ["l", "-slt", archive.path]).stdout
        let methods = listing.split(separator: "\n").filter { $0.hasPrefix("Method = ") }
        let fileMethods = methods.filter { !$0.hasSuffix("= Store") || $0.contains("AES") }
        #expect(fileMethods.count == Self.files.count, "\(listing)")
        #expect(fileMethods.allSatisfy { $0.contains("AES-256") }, "\(methods)")
        let extracted = work.appendingPathComponent("7z-out")
        try await Subprocess.check(sevenZip, ["x", "-psecret", "-o\(extracted.path)", archive.path])
        #expect(try readTree(extracted) == Self.files)
        // Without the password 7-Zip gets nothing.
        let refused = try await Subprocess.run(
            sevenZip,
            ["x", "-pwrong", "-o\(work.appendingPathComponent("7z-wrong").path)", archive.path]
        )
        #expect(refused.status != 0)

        // hot sync over nginx installs it byte for byte, then version 2 through an encrypted delta.
        let server = try await NginxServer.start(root: repo)
        defer { server.stopNow() }
        let manifest = server.baseURL.appendingPathComponent("manifest.json").absoluteString
        let store = work.appendingPathComponent("store")
        let synced = try await CommandLineTests.run([
            "sync", "--manifest", manifest, "--root", store.path, "--allow-unsigned",
        ])
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(try await installedTree(store) == Self.files)

        var second = Self.files
        second["index.json"] = Data(String(repeating: #"{"type": "filter", "name": "warm"}"#, count: 500).utf8)
        second["images/new.png"] = noise(5_000, seed: 9)
        let v2 = work.appendingPathComponent("v2")
        try writeTree(second, under: v2)
        let packedTwo = try await CommandLineTests.run([
            "pack", v2.path, "--id", "pack", "--version", "2", "--repo", repo.path, "--password", "secret",
        ])
        #expect(packedTwo.status == 0, "\(packedTwo.stderr)")
        #expect(packedTwo.stdout.contains("delta pack 1 -> 2"), "\(packedTwo.stdout)")
        let deltas = try FileManager.default.contentsOfDirectory(atPath: repo.appendingPathComponent("packages").path)
            .filter { $0.hasSuffix(".delta") }
        let delta = try #require(deltas.first)
        let deltaListing = try await Subprocess.check(
            sevenZip,
            ["l", "-slt", repo.appendingPathComponent("packages/\(delta)").path]
        ).stdout
        #expect(deltaListing.contains("AES-256"), "the delta is not encrypted: \(deltaListing)")
        let updated = try await CommandLineTests.run([
            "sync", "--manifest", manifest, "--root", store.path, "--allow-unsigned",
        ])
        #expect(updated.status == 0, "\(updated.stderr)")
        #expect(updated.stdout.contains("delta from 1"), "\(updated.stdout)")
        #expect(try await installedTree(store) == second)
    }

    @Test("hot pack --encryption without --password is refused")
    func encryptionNeedsPassword() async throws {
        let work = try makeTemporaryDirectory("aes-invalid")
        try writeTree(["a.txt": Data("a".utf8)], under: work.appendingPathComponent("src"))
        let result = try await CommandLineTests.run([
            "pack", work.appendingPathComponent("src").path, "--id", "p", "--version", "1",
            "--repo", work.appendingPathComponent("repo").path, "--encryption", "aes128",
        ])
        #expect(result.status != 0)
        #expect(result.stderr.contains("--encryption needs --password"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: work.appendingPathComponent("repo").path))
    }

    /// The installed tree of the package `pack`, as `hot status --json` names it.
    private func installedTree(_ store: URL) async throws -> [String: Data] {
        let status = try await CommandLineTests.run(["status", "--root", store.path, "--json"])
        let document = try JSONDecoder().decode(CommandLineTests.StatusDocument.self, from: Data(status.stdout.utf8))
        let package = try #require(document.packages.first { $0.id == "pack" })
        return try readTree(URL(fileURLWithPath: try #require(package.path)))
    }
}

/// 7-Zip's command-line tool.
enum SevenZip {
    /// `7z` (p7zip-full or 7zip), `7zz` or `7za` on `PATH`, if installed.
    static let path: String? = ["7z", "7zz", "7za"].first { name in
        (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").contains {
            FileManager.default.isExecutableFile(atPath: "\($0)/\(name)")
        }
    }
}
