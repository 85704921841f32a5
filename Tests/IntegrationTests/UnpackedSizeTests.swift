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

        func updater(maxPackageBytes: Int64 = UpdaterConfiguration.defaultMaxPackageBytes) -> (Updater, URL) {
            let root = work.appendingPathComponent("store-\(UUID().uuidString)")
            var configuration = UpdaterConfiguration(
                root: root,
                transport: FileTransport(),
                unarchiver: ZipUnarchiver(),
                verifier: CryptoVerifier(),
                store: FileMetadataStore(root: root),
                maxPackageBytes: maxPackageBytes,
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
            )
            configuration.commitHooks = [NameIndexWriter()]
            return (Updater(configuration: configuration), root)
        }
    }

    @Test(
        "one limit: a package without a figure unpacks up to it; a declared figure is exact; a figure past it is refused"
    )
    func oneLimit() async throws {
        let fixture = try Fixture()
        defer { try? FileManager.default.removeItem(at: fixture.work) }

        // The package unpacks to 300,000 bytes. Without a figure, a limit below that refuses it
        // while unpacking, and nothing is installed…
        let (small, _) = fixture.updater(maxPackageBytes: 100_000)
        let refused = try await small.apply(Manifest(packages: [fixture.descriptor]))
        #expect(
            refused.packages.first?.error?.code == .corruptArchive
                || refused.packages.first?.error?.code == .limitExceeded
        )
        #expect(try await small.installedPackages().isEmpty)

        // …and a limit above it installs it.
        let (plain, _) = fixture.updater(maxPackageBytes: 400_000)
        let report = try await plain.apply(Manifest(packages: [fixture.descriptor]))
        #expect(report.packages.first?.error == nil, "\(report)")
        let directory = try #require(try await plain.installedPackages().first?.directory)
        #expect(try readTree(directory) == fixture.files)

        // The exact figure, under the limit, installs it too.
        var declared = fixture.descriptor
        declared.unpackedSize = 300_000
        let (exact, _) = fixture.updater(maxPackageBytes: 400_000)
        #expect(try await exact.apply(Manifest(packages: [declared])).packages.first?.error == nil)

        // A figure smaller than the truth is a bomb's signature: refused while unpacking.
        var lying = fixture.descriptor
        lying.unpackedSize = 299_999
        let (other, _) = fixture.updater()
        let lied = try await other.apply(Manifest(packages: [lying]))
        #expect(lied.packages.first?.error != nil)
        #expect(try await other.installedPackages().isEmpty)
    }

    @Test(
        "a package declaring more than the limit, unpacked or downloaded, is refused before a byte is downloaded",
        arguments: [true, false]
    )
    func ceiling(unpacked: Bool) async throws {
        let fixture = try Fixture()
        defer { try? FileManager.default.removeItem(at: fixture.work) }
        var declared = fixture.descriptor
        let limit: Int64
        if unpacked {
            declared.unpackedSize = 300_000
            limit = 299_000
        } else {
            limit = try #require(declared.size) - 1
        }
        let (updater, root) = fixture.updater(maxPackageBytes: limit)
        let report = try await updater.apply(Manifest(packages: [declared]))
        #expect(report.packages.first?.error?.code == .limitExceeded)
        #expect(FileSystem.contents(of: root.appendingPathComponent("partial")).isEmpty)
        #expect(FileSystem.contents(of: root.appendingPathComponent("staging")).isEmpty)
    }

    @Test("hot pack signs the unpacked size into the manifest; hot sync --max-package-bytes refuses past it")
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
            "--max-package-bytes", "299999",
        ])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("unpacks to 300000 bytes"), "\(refused.stderr)")
        let synced = try await CommandLineTests.run([
            "sync", "--manifest", manifest, "--root", root.path, "--allow-unsigned", "--quiet",
        ])
        #expect(synced.status == 0, "\(synced.stderr)")
    }
}
