import Foundation
import HotArchive
import HotAssets
import HotCore
import HotManifest
import HotStore
import HotTesting
import HotTransport
import HotVerify
import Logging
import Testing

/// The manifest's unpacked size: the exact limit of the unarchiver, under a ceiling the client sets.
@Suite("Declared unpacked size")
struct UnpackedSizeTests {
    /// A zipped tree of 300,000 bytes, served by file://.
    private struct Fixture {
        let work: URL
        let archive: URL
        let files: [String: Data]
        let descriptor: PackageDescriptor

        init() throws {
            work = try makeTemporaryDirectory("unpacked")
            files = ["a.bin": noise(200_000, seed: 71), "b/c.bin": noise(100_000, seed: 72)]
            try writeTree(files, under: work.appendingPathComponent("tree"))
            archive = work.appendingPathComponent("p.zip")
            _ = try ZipWriter.write(directory: work.appendingPathComponent("tree"), to: archive)
            let data = try Data(contentsOf: archive)
            descriptor = try PackageDescriptor(
                id: "p",
                version: "1",
                url: URL(fileURLWithPath: archive.path),
                size: Int64(data.count),
                sha256: CryptoVerifier().digest(of: data, using: .sha256)
            )
        }

        func updater(maxTotalBytes: Int64 = 4 << 30, maxUnpackedBytes: Int64? = nil) -> (Updater, URL) {
            let root = work.appendingPathComponent("store-\(UUID().uuidString)")
            var configuration = UpdaterConfiguration(
                root: root,
                transport: FileTransport(),
                unarchiver: ZipUnarchiver(),
                verifier: CryptoVerifier(),
                store: JSONMetadataStore(root: root),
                extractOptions: ExtractOptions(maxTotalBytes: maxTotalBytes),
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
            )
            if let maxUnpackedBytes { configuration.maxUnpackedBytes = maxUnpackedBytes }
            configuration.commitHooks = [NameIndexWriter()]
            return (Updater(configuration: configuration), root)
        }
    }

    @Test(
        "the declared size replaces the default limit: larger packages pass, a package unpacking past its figure is refused"
    )
    func declaredSizeIsTheLimit() async throws {
        let fixture = try Fixture()
        defer { try? FileManager.default.removeItem(at: fixture.work) }

        // A default limit below the package (as 4 GiB is below a 4.4 GB package): refused without a figure…
        let (plain, _) = fixture.updater(maxTotalBytes: 100_000)
        let refused = try await plain.apply(Manifest(packages: [fixture.descriptor]))
        #expect(
            refused.packages.first?.error?.code == .corruptArchive
                || refused.packages.first?.error?.code == .limitExceeded
        )

        // …and installed when the manifest declares its exact size.
        var declared = fixture.descriptor
        declared.unpackedSize = 300_000
        let (updater, _) = fixture.updater(maxTotalBytes: 100_000)
        let report = try await updater.apply(Manifest(packages: [declared]))
        #expect(report.packages.first?.error == nil, "\(report)")
        let directory = try #require(try await updater.installedPackages().first?.directory)
        #expect(try readTree(directory) == fixture.files)

        // A figure smaller than the truth is a bomb's signature: refused while unpacking.
        var lying = fixture.descriptor
        lying.unpackedSize = 299_999
        let (other, _) = fixture.updater()
        let lied = try await other.apply(Manifest(packages: [lying]))
        #expect(lied.packages.first?.error != nil)
        #expect(try await other.installedPackages().isEmpty)
    }

    @Test("a package declaring more than the client's ceiling is refused before a byte is downloaded")
    func ceiling() async throws {
        let fixture = try Fixture()
        defer { try? FileManager.default.removeItem(at: fixture.work) }
        var declared = fixture.descriptor
        declared.unpackedSize = 300_000
        let (updater, root) = fixture.updater(maxUnpackedBytes: 299_000)
        let report = try await updater.apply(Manifest(packages: [declared]))
        #expect(report.packages.first?.error?.code == .limitExceeded)
        #expect(FileSystem.contents(of: root.appendingPathComponent("partial")).isEmpty)
    }

    @Test("hot pack signs the unpacked size into the manifest; hot sync --max-unpacked-bytes refuses past it")
    func commandLine() async throws {
        let fixture = try Fixture()
        defer { try? FileManager.default.removeItem(at: fixture.work) }
        let repo = fixture.work.appendingPathComponent("repo")
        let packed = try await CommandLineTests.run([
            "pack", fixture.work.appendingPathComponent("tree").path, "--id", "p", "--version", "1", "--repo",
            repo.path,
        ])
        #expect(packed.status == 0, "\(packed.stderr)")
        #expect(!packed.stderr.contains("warning"))
        let envelope = try SignedEnvelope.parse(Data(contentsOf: repo.appendingPathComponent("manifest.json")))
        let entry = try #require(try SignedManifestBody.decode(envelope.signed).package("p")?.entry(for: "1"))
        #expect(entry.unpackedSize == 300_000)

        let manifest = repo.appendingPathComponent("manifest.json").path
        let root = fixture.work.appendingPathComponent("cli-store")
        let refused = try await CommandLineTests.run([
            "sync", "--manifest", manifest, "--root", root.path, "--allow-unsigned", "--quiet",
            "--max-unpacked-bytes", "299999",
        ])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("unpacks to 300000 bytes"), "\(refused.stderr)")
        let synced = try await CommandLineTests.run([
            "sync", "--manifest", manifest, "--root", root.path, "--allow-unsigned", "--quiet",
        ])
        #expect(synced.status == 0, "\(synced.stderr)")
    }
}
