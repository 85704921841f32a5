import Foundation
import HotArchive
import HotCore
import HotTesting
import HotTransport
import HotVerify
import Testing

/// A SHA-256 hasher that reports `forged` for content whose digest is `real`: what an
/// archive that lies about one file's digest in its central directory is made with.
private final class ForgingHasher: DigestHasher {
    private let inner: any DigestHasher
    private let real: Digest
    private let forged: Digest

    init(real: Digest, forged: Digest) throws {
        inner = try CryptoVerifier().makeHasher(for: .sha256)
        self.real = real
        self.forged = forged
    }

    var algorithm: Digest.Algorithm { inner.algorithm }
    func update(_ bytes: UnsafeRawBufferPointer) { inner.update(bytes) }
    func finalize() -> Digest {
        let digest = inner.finalize()
        return digest == real ? forged : digest
    }
}

/// The SHA-256s an archive records for its files are taken unhashed when the manifest gives
/// the archive's SHA-256. A package's records decide its own files only: an object one
/// package's records made is hashed before another package's file reuses it.
@Suite("Recorded digests and shared objects")
struct ClaimedDigestTests {
    /// Zips `files` into `directory` as `<id>.zip`, recording each file's SHA-256 (the ones
    /// `forging` maps, forged), and returns the descriptor a manifest would give it.
    private func publish(
        _ id: String,
        _ files: [String: Data],
        in directory: URL,
        forging: (real: Digest, forged: Digest)? = nil
    ) throws -> PackageDescriptor {
        let tree = directory.appendingPathComponent("\(id)-tree", isDirectory: true)
        try writeTree(files, under: tree)
        let archive = directory.appendingPathComponent("\(id).zip")
        _ = try ZipWriter.write(
            directory: tree,
            to: archive,
            options: ZipWriter.Options(fileHasher: {
                if let forging { return try ForgingHasher(real: forging.real, forged: forging.forged) }
                return try CryptoVerifier().makeHasher(for: .sha256)
            })
        )
        let bytes = try Data(contentsOf: archive)
        return try PackageDescriptor(
            id: id,
            version: "1",
            url: archive,
            size: Int64(bytes.count),
            sha256: try CryptoVerifier().digest(of: bytes, using: .sha256)
        )
    }

    private func sha256(_ data: Data) throws -> Digest {
        try CryptoVerifier().digest(of: data, using: .sha256)
    }

    @Test("A package that records another file's digest for its own changes no other package's file")
    func aFalseRecordPoisonsNothing() async throws {
        let work = try makeTemporaryDirectory("claims")
        let honest = Data("the victim's own bytes, 40 of them.....".utf8)
        let other = Data("the liar's bytes, just as many as those".utf8)
        #expect(honest.count == other.count)
        // The liar's a.txt holds `other` and its archive says it hashes to `honest`'s digest.
        let liar = try publish(
            "liar",
            ["a.txt": other],
            in: work,
            forging: (real: try sha256(other), forged: try sha256(honest))
        )
        let victim = try publish("victim", ["b.txt": honest], in: work)
        let root = work.appendingPathComponent("store", isDirectory: true)
        let updater = makeUpdater(root: root, using: FileTransport())

        _ = try await updater.install(liar)
        _ = try await updater.install(victim)

        // The victim gets its own bytes, not the object the liar's record named.
        #expect(try await installedTree(updater, "victim") == ["b.txt": honest])
        // The liar keeps what it shipped.
        #expect(try await installedTree(updater, "liar") == ["a.txt": other])
        // And the object under the victim's digest now holds the victim's bytes.
        let object = root.appendingPathComponent(
            "objects/\(try sha256(honest).hex.prefix(2))/\(try sha256(honest).hex)"
        )
        #expect(try Data(contentsOf: object) == honest)

        // Installed the other way round, the victim's object stays the victim's.
        let second = work.appendingPathComponent("store-2", isDirectory: true)
        let reversed = makeUpdater(root: second, using: FileTransport())
        _ = try await reversed.install(victim)
        _ = try await reversed.install(liar)
        #expect(try await installedTree(reversed, "victim") == ["b.txt": honest])
    }

    @Test("A package whose archive records a false digest keeps its own bytes, in every install order")
    func aLiarKeepsItsOwnBytes() async throws {
        let work = try makeTemporaryDirectory("claims-order")
        let recorded = Data(repeating: 0x42, count: 30_000)  // B: what the liar's record names
        let own = Data(repeating: 0x41, count: 30_000)  // A: what the liar's archive holds
        let liar = try publish(
            "liar",
            ["x.bin": own, "y.txt": Data("y".utf8)],
            in: work,
            forging: (real: try sha256(own), forged: try sha256(recorded))
        )
        let holder = try publish("holder", ["x.bin": recorded], in: work)
        for run in 0..<6 {
            let root = work.appendingPathComponent("store-\(run)", isDirectory: true)
            let updater = makeUpdater(root: root, using: FileTransport())
            switch run % 3 {
            case 0:  // the holder first: the liar's record names an existing object
                _ = try await updater.install(holder)
                _ = try await updater.install(liar)
            case 1:
                _ = try await updater.install(liar)
                _ = try await updater.install(holder)
            default:  // both at once, one install group
                async let first = updater.install(holder)
                async let second = updater.install(liar)
                _ = try await (first, second)
            }
            #expect(try await installedTree(updater, "liar") == ["x.bin": own, "y.txt": Data("y".utf8)], "run \(run)")
            #expect(try await installedTree(updater, "holder") == ["x.bin": recorded], "run \(run)")
            if run % 3 == 0 {
                // Hashed because an object existed: its list names what it holds, and a full
                // check passes. (Installed first, its file is taken on its record, unhashed.)
                #expect(try await updater.health.verify(packageID: "liar", depth: .full).isHealthy, "run \(run)")
            }
            #expect(try await updater.health.verify(packageID: "holder", depth: .full).isHealthy, "run \(run)")
        }
    }

    @Test("Files two packages record truthfully still share one object")
    func truthfulRecordsShare() async throws {
        let work = try makeTemporaryDirectory("claims-shared")
        let shared = Data(repeating: 7, count: 10_000)
        let first = try publish("first", ["img/a.png": shared, "only-first.txt": Data("1".utf8)], in: work)
        let second = try publish("second", ["img/a.png": shared, "only-second.txt": Data("2".utf8)], in: work)
        let root = work.appendingPathComponent("store", isDirectory: true)
        let updater = makeUpdater(root: root, using: FileTransport())
        _ = try await updater.install(first)
        _ = try await updater.install(second)

        let packages = try await updater.installedPackages()
        let inodes = try packages.map { package in
            try FileManager.default.attributesOfItem(
                atPath: package.directory.appendingPathComponent("img/a.png").path
            )[
                .systemFileNumber
            ] as? UInt64
        }
        #expect(inodes.count == 2)
        #expect(inodes[0] != nil && inodes[0] == inodes[1])
        #expect(try await installedTree(updater, "second")?["img/a.png"] == shared)
    }

    @Test(
        "Where the file system keeps no extended attributes, a package whose file does not match its record is refused"
    )
    func withoutExtendedAttributes() async throws {
        let work = try makeTemporaryDirectory("claims-ramfs")
        let mountPoint = work.appendingPathComponent("ramfs", isDirectory: true)
        try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
        try await TemporaryFileSystem.mountRamfs(at: mountPoint)
        defer { TemporaryFileSystem.unmount(mountPoint) }
        let honest = Data("the victim's own bytes, 40 of them.....".utf8)
        let other = Data("the liar's bytes, just as many as those".utf8)
        let liar = try publish(
            "liar",
            ["a.txt": other],
            in: work,
            forging: (real: try sha256(other), forged: try sha256(honest))
        )
        let truthful = try publish("truthful", ["b.txt": honest, "c.txt": honest], in: work)
        let root = mountPoint.appendingPathComponent("store", isDirectory: true)
        let updater = makeUpdater(root: root, using: FileTransport())

        await #expect {
            _ = try await updater.install(liar)
        } throws: { error in
            (error as? HotUpdateError)?.code == .corruptArchive
                && "\(error)".contains("records a SHA-256 for this file that its content does not have")
        }
        #expect(try await updater.installedPackages().isEmpty)
        // Truthful records install, their files checked as they are adopted, and share.
        _ = try await updater.install(truthful)
        #expect(try await installedTree(updater, "truthful") == ["b.txt": honest, "c.txt": honest])
        let package = try #require(try await updater.installedPackages().first)
        let inodes = try ["b.txt", "c.txt"].map { name in
            try FileManager.default.attributesOfItem(atPath: package.directory.appendingPathComponent(name).path)[
                .systemFileNumber
            ] as? UInt64
        }
        #expect(inodes[0] != nil && inodes[0] == inodes[1])
    }
}
