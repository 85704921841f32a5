import Foundation
import HotArchive
import HotCore
import HotManifest
import HotStore
import HotTestServers
import HotTesting
import HotTransport
import HotVerify
import Logging
import Testing

/// Many packages against real parts: nginx on 127.0.0.1, real zips, curl, the real file system.
@Suite("Many packages over nginx")
struct ManyPackagesTests {
    /// The descriptor of a published entry, with its URL on `server`.
    static func descriptor(_ entry: ManifestDocument.Entry, on server: NginxServer) throws -> PackageDescriptor {
        try PackageDescriptor(
            id: entry.id,
            version: entry.version,
            url: server.baseURL.appendingPathComponent(entry.url),
            size: entry.size,
            sha256: try Digest(algorithm: .sha256, hex: entry.sha256)
        )
    }

    /// Kilobytes allocated under `directory`, as `du` counts them (each inode once).
    static func allocatedKiB(_ directory: URL) async throws -> Int {
        let output = try await Subprocess.check("du", ["-sk", directory.path])
        return Int(output.stdout.split(separator: "\t").first ?? "") ?? -1
    }

    @Test("100 concurrent requests for one package make exactly one download at the server")
    func hundredCallersOneDownload() async throws {
        let source = try makeTemporaryDirectory("source")
        try writeTree(["a.png": noise(200_000, seed: 1), "b/c.json": Data("{}".utf8)], under: source)
        let repository = try Repository()
        let entry = try repository.publish(source, id: "filters", version: "1")
        // Slow enough that every caller arrives while the one download runs.
        let server = try await NginxServer.start(
            root: repository.directory,
            options: .init(locations: [.rateLimited(prefix: "/packages/", bytesPerSecond: 400_000, afterBytes: 8_192)])
        )
        let updater = makeUpdater(root: try makeTemporaryDirectory("store"), transport: .http)
        let offered = try Self.descriptor(entry, on: server)

        let installed = try await withThrowingTaskGroup(of: InstalledPackage.self) { group in
            for _ in 0..<100 { group.addTask { try await updater.install(offered) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(installed.count == 100)
        #expect(Set(installed.map(\.directory)).count == 1)
        _ = await server.waitForRequests(path: "/" + entry.url, count: 1)
        #expect(server.requestCount(for: "/" + entry.url) == 1)
        #expect(try readTree(try #require(installed.first).directory) == readTree(source))
        await server.stop()
    }

    @Test("two packages sharing half their files take the unique bytes on disk; deleting one frees only its own")
    func sharedFilesOnDisk() async throws {
        let fileSize = 256 << 10
        // Odd seeds: noise() sets the low bit, so seeds 2k and 2k+1 would give the same bytes.
        let files = (0..<24).map { noise(fileSize, seed: UInt64($0) * 2 + 101) }
        let first = try makeTemporaryDirectory("first")
        let second = try makeTemporaryDirectory("second")
        try writeTree(Dictionary(uniqueKeysWithValues: (0..<16).map { ("img/\($0).bin", files[$0]) }), under: first)
        try writeTree(Dictionary(uniqueKeysWithValues: (8..<24).map { ("img/\($0).bin", files[$0]) }), under: second)
        let repository = try Repository()
        try repository.publish(first, id: "first", version: "1")
        try repository.publish(second, id: "second", version: "1")
        let server = try await NginxServer.start(root: repository.directory)
        let root = try makeTemporaryDirectory("store")
        let updater = makeUpdater(root: root, transport: .http)
        let manifestURL = server.baseURL.appendingPathComponent("manifest.json")
        let report = try await updater.sync(from: StaticManifestSource(url: manifestURL, transport: httpTransport()))
        #expect(report.failures.isEmpty)

        let uniqueKiB = 24 * fileSize / 1024  // 6 MiB; without sharing it would be 8 MiB
        let slackKiB = 512  // directories, the metadata, file lists
        let used = try await Self.allocatedKiB(root)
        #expect(used >= uniqueKiB && used <= uniqueKiB + slackKiB, "du says \(used) KiB for \(uniqueKiB) KiB unique")

        let secondTree = try #require(try await updater.installedPackages().first { $0.id == "second" }).directory
        try await updater.remove(packageID: "first")
        let after = try await Self.allocatedKiB(root)
        let secondKiB = 16 * fileSize / 1024
        #expect(after >= secondKiB && after <= secondKiB + slackKiB, "du says \(after) KiB for \(secondKiB) KiB")
        #expect(try readTree(secondTree) == readTree(second))
        #expect(try await updater.health.verify(packageID: "second", depth: .full).isHealthy)
        await server.stop()
    }

    @Test("cancelAll mid-download leaves no partial package, and a later sync succeeds")
    func cancelAllMidDownload() async throws {
        let source = try makeTemporaryDirectory("source")
        try writeTree(["big.bin": noise(600_000, seed: 3), "small.txt": Data("s".utf8)], under: source)
        let repository = try Repository()
        try repository.publish(source, id: "big", version: "1")
        let slow = try await NginxServer.start(
            root: repository.directory,
            options: .init(locations: [.rateLimited(prefix: "/packages/", bytesPerSecond: 20_000, afterBytes: 16_384)])
        )
        let root = try makeTemporaryDirectory("store")
        let updater = makeUpdater(root: root, transport: .http)
        let events = updater.events()

        let sync = Task {
            try await updater.sync(
                from: StaticManifestSource(
                    url: slow.baseURL.appendingPathComponent("manifest.json"),
                    transport: httpTransport()
                )
            )
        }
        // Bytes have arrived: the download is under way.
        for await event in events {
            if case .progress(let progress) = event, progress.id == "big", progress.bytesReceived > 0 { break }
        }
        await updater.cancelAll()
        let report = try await sync.value
        #expect(report.failures.first?.error?.code == .cancelled)
        #expect(FileSystem.contents(of: root.appendingPathComponent("staging")).isEmpty)
        #expect(FileSystem.contents(of: root.appendingPathComponent("packages")).isEmpty)
        #expect(FileSystem.contents(of: root.appendingPathComponent("objects")).isEmpty)
        #expect(try await updater.installedPackages().isEmpty)
        #expect(try await updater.state(of: "big") == .new)
        await slow.stop()

        let fast = try await NginxServer.start(root: repository.directory)
        let retry = try await updater.sync(
            from: StaticManifestSource(
                url: fast.baseURL.appendingPathComponent("manifest.json"),
                transport: httpTransport()
            )
        )
        #expect(retry.failures.isEmpty)
        let installed = try #require(try await updater.installedPackages().first)
        #expect(try readTree(installed.directory) == readTree(source))
        await fast.stop()
    }
}
