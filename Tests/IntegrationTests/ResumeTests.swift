import Foundation
import HotArchive
import HotAssets
import HotCore
import HotManifest
import HotStore
import HotTestServers
import HotTesting
import HotTransport
import HotVerify
import Logging
import Testing

/// A package of incompressible files, zipped, with the descriptor a manifest gives it.
private struct ResumePackage {
    let files: [String: Data]
    let archive: Data
    let sha256: Digest

    init(seed: UInt64, bytes: Int = 600_000) throws {
        let work = try makeTemporaryDirectory("resume-src")
        defer { try? FileManager.default.removeItem(at: work) }
        files = [
            "a.bin": noise(bytes / 2, seed: seed), "sub/b.bin": noise(bytes / 2, seed: seed &+ 1),
            "sub/c.txt": Data("version \(seed)".utf8),
        ]
        try writeTree(files, under: work.appendingPathComponent("tree"))
        let zip = work.appendingPathComponent("p.zip")
        _ = try ZipWriter.write(directory: work.appendingPathComponent("tree"), to: zip, options: ZipWriter.Options())
        archive = try Data(contentsOf: zip)
        sha256 = try CryptoVerifier().digest(of: archive, using: .sha256)
    }

    func descriptor(at url: URL) throws -> PackageDescriptor {
        try PackageDescriptor(id: "p", version: "1", url: url, size: Int64(archive.count), sha256: sha256)
    }

    /// The partial download of this package under `root`.
    func partial(in root: URL) -> URL { root.appendingPathComponent("partial/\(sha256.hex)") }
}

/// Runs `body` with an updater over a fresh root using `transport`. A cut transfer is not
/// resumed within the sync that saw it (`resumesPerSync` 0), so that these tests see what the
/// next sync does with the kept bytes.
private func withUpdater(
    _ transport: any Transport,
    resumesPerSync: Int = 0,
    _ body: (Updater, URL) async throws -> Void
) async throws {
    let root = try makeTemporaryDirectory("resume-store")
    defer { try? FileManager.default.removeItem(at: root) }
    var configuration = UpdaterConfiguration(
        root: root,
        transport: transport,
        unarchiver: ZipUnarchiver(),
        verifier: CryptoVerifier(),
        store: FileMetadataStore(root: root),
        timeouts: TransportRequest.Timeouts(connect: .seconds(5), lowSpeedWindow: .seconds(5)),
        logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    )
    configuration.commitHooks = [NameIndexWriter()]
    configuration.partialDownloads.resumesPerSync = resumesPerSync
    let updater = Updater(configuration: configuration)
    try await body(updater, root)
}

/// The installed tree of `p`, read back.
private func installedTree(_ updater: Updater) async throws -> [String: Data]? {
    guard let directory = try await updater.installedPackages().first(where: { $0.id == "p" })?.directory else {
        return nil
    }
    return try readTree(directory)
}

/// Checks that a sync failed for `p`.
private func expectCut(_ report: SyncReport, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(report.packages.first?.error != nil, "the sync was expected to fail", sourceLocation: sourceLocation)
}

/// A transport that cuts the body of its next response after `cut` bytes with a transport
/// failure, as a dropped connection does; later responses pass whole.
private final class CuttingTransport: Transport, @unchecked Sendable {
    let inner: any Transport
    private let lock = NSLock()
    private var cut: Int?
    private(set) var requests: [TransportRequest] = []
    private(set) var statuses: [Int] = []

    init(_ inner: any Transport, cutAfter: Int) {
        self.inner = inner
        self.cut = cutAfter
    }

    func fetch(_ request: TransportRequest) async throws -> TransportResponse {
        var response = try await inner.fetch(request)
        let cut: Int? = lock.withLock {
            requests.append(request)
            statuses.append(response.statusCode)
            defer { self.cut = nil }
            return self.cut
        }
        guard let cut else { return response }
        let (stream, writer) = ByteStream.makeStream()
        let body = response.body
        Task {
            var sent = 0
            do {
                for try await chunk in body {
                    let take = min(chunk.count, cut - sent)
                    if take > 0 { try await writer.write(chunk.prefix(take)) }
                    sent += take
                    if sent >= cut {
                        body.cancel()
                        writer.finish(throwing: HotUpdateError(.transportFailed, "connection reset (cut on purpose)"))
                        return
                    }
                }
                writer.finish()
            } catch {
                writer.finish(throwing: error)
            }
        }
        response.body = stream
        return response
    }
}

@Suite("Resumable downloads")
struct ResumeTests {
    @Test(
        "a cut download keeps its bytes under partial/ and the next sync asks only for the rest",
        arguments: TransportKind.allCases
    )
    func resumesOverHTTP(_ transport: TransportKind) async throws {
        let package = try ResumePackage(seed: 11)
        let server = try RawHTTPServer.start(.file(quirk: .none))
        defer { server.stop() }
        server.setBody(package.archive)
        let half = package.archive.count / 2
        server.cutNextResponse(after: half)
        try await withUpdater(transport.make()) { updater, root in
            let manifest = try Manifest(packages: [package.descriptor(at: server.url)])
            try await expectCut(updater.apply(manifest))
            let kept = try FileManager.default.attributesOfItem(atPath: package.partial(in: root).path)
            #expect((kept[.size] as? Int) == half)
            let sidecar = try JSONSerialization.jsonObject(
                with: Data(contentsOf: root.appendingPathComponent("partial/\(package.sha256.hex).json"))
            )
            let fields = try #require(sidecar as? [String: Any])
            #expect(fields["url"] as? String == server.url.absoluteString)
            #expect((fields["validator"] as? [String: Any])?["etag"] as? String == server.entityTag)

            _ = try await updater.apply(manifest)
            #expect(try await installedTree(updater) == package.files)
            let snapshot = server.snapshot
            #expect(snapshot.statuses == [200, 206])
            #expect(snapshot.requestHeaders.last?["range"] == "bytes=\(half)-")
            #expect(snapshot.requestHeaders.last?["if-range"] == server.entityTag)
            #expect(snapshot.requestHeaders.last?["if-match"] == server.entityTag)
            // Each byte of the package crossed the network once.
            #expect(snapshot.bodyBytesSent == Int64(package.archive.count))
            #expect(!FileManager.default.fileExists(atPath: package.partial(in: root).path))
            #expect(FileSystem.contents(of: root.appendingPathComponent("partial")).isEmpty)
        }
    }

    /// The three servers that do not resume the way HTTP says, each after a cut midway.
    enum Awkward: String, CaseIterable, CustomTestStringConvertible {
        /// Answers a range with `200` and the whole file.
        case ignoresRange
        /// Follows the rules, but the file was uploaded again between the attempts: new ETag.
        case changedETag
        /// Ignores `If-Range` (as S3 does), and the file was uploaded again: only `If-Match` catches it.
        case ignoresIfRange
        var testDescription: String { rawValue }
    }

    @Test("awkward servers: each ends in a correct install", arguments: Awkward.allCases, TransportKind.allCases)
    func awkwardServers(_ awkward: Awkward, _ transport: TransportKind) async throws {
        let package = try ResumePackage(seed: 21)
        let quirk: RawHTTPServer.FileQuirk =
            switch awkward {
            case .ignoresRange: .ignoresRange
            case .changedETag: .none
            case .ignoresIfRange: .ignoresIfRange
            }
        let server = try RawHTTPServer.start(.file(quirk: quirk))
        defer { server.stop() }
        server.setBody(package.archive)
        server.cutNextResponse(after: package.archive.count / 3)
        try await withUpdater(transport.make()) { updater, root in
            let manifest = try Manifest(packages: [package.descriptor(at: server.url)])
            try await expectCut(updater.apply(manifest))
            if awkward != .ignoresRange { server.setBody(package.archive) }  // same bytes, new ETag

            _ = try await updater.apply(manifest)
            #expect(try await installedTree(updater) == package.files)
            let statuses = server.snapshot.statuses
            switch awkward {
            case .ignoresRange: #expect(statuses == [200, 200])
            // If-Match is checked before the range: the changed file is a 412, then a fresh download.
            case .changedETag, .ignoresIfRange: #expect(statuses == [200, 412, 200])
            }
            #expect(FileSystem.contents(of: root.appendingPathComponent("partial")).isEmpty)
        }
    }

    @Test("a resumed download whose bytes do not add up to the digest is fetched once more from the start")
    func corruptPrefixStartsOver() async throws {
        let package = try ResumePackage(seed: 31)
        let server = try RawHTTPServer.start(.file(quirk: .none))
        defer { server.stop() }
        server.setBody(package.archive)
        server.cutNextResponse(after: package.archive.count / 2)
        try await withUpdater(TransportKind.http.make()) { updater, root in
            let manifest = try Manifest(packages: [package.descriptor(at: server.url)])
            try await expectCut(updater.apply(manifest))
            // Damage the kept bytes, as a crash of the machine might.
            let handle = try FileHandle(forWritingTo: package.partial(in: root))
            try handle.seek(toOffset: 1000)
            try handle.write(contentsOf: Data(repeating: 0, count: 64))
            try handle.close()

            _ = try await updater.apply(manifest)
            #expect(try await installedTree(updater) == package.files)
            #expect(server.snapshot.statuses == [200, 206, 200])
        }
    }

    @Test("a download that was whole when its process died is checked and unpacked without a request")
    func wholePartialNeedsNoRequest() async throws {
        let package = try ResumePackage(seed: 35)
        let server = try RawHTTPServer.start(.file(quirk: .none))
        defer { server.stop() }
        server.setBody(package.archive)
        try await withUpdater(TransportKind.http.make()) { updater, root in
            try FileManager.default.createDirectory(
                at: root.appendingPathComponent("partial"),
                withIntermediateDirectories: true
            )
            try package.archive.write(to: package.partial(in: root))
            let sidecar =
                [
                    "url": server.url.absoluteString, "offset": package.archive.count,
                    "validator": ["etag": server.entityTag],
                ] as [String: Any]
            try JSONSerialization.data(withJSONObject: sidecar)
                .write(to: root.appendingPathComponent("partial/\(package.sha256.hex).json"))
            _ = try await updater.apply(try Manifest(packages: [package.descriptor(at: server.url)]))
            #expect(try await installedTree(updater) == package.files)
            #expect(server.snapshot.connections == 0)
            #expect(FileSystem.contents(of: root.appendingPathComponent("partial")).isEmpty)
        }
    }

    @Test("FileTransport resumes with its own ETag and sends the whole file when the file changed")
    func fileTransport() async throws {
        let package = try ResumePackage(seed: 41)
        let directory = try makeTemporaryDirectory("resume-files")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("p.zip")
        try package.archive.write(to: file)
        let url = URL(fileURLWithPath: file.path)

        let cutting = CuttingTransport(FileTransport(chunkSize: 16 << 10), cutAfter: 200_000)
        try await withUpdater(cutting) { updater, root in
            let manifest = try Manifest(packages: [package.descriptor(at: url)])
            try await expectCut(updater.apply(manifest))
            #expect(
                (try FileManager.default.attributesOfItem(atPath: package.partial(in: root).path)[.size] as? Int)
                    == 200_000
            )
            _ = try await updater.apply(manifest)
            #expect(try await installedTree(updater) == package.files)
            #expect(cutting.statuses == [200, 206])
            #expect(cutting.requests.last?.range == TransportRequest.ByteRange(start: 200_000))
        }

        // The file is written again between the attempts: a new ETag, so If-Match refuses the range.
        let again = CuttingTransport(FileTransport(chunkSize: 16 << 10), cutAfter: 100_000)
        try await withUpdater(again) { updater, _ in
            let manifest = try Manifest(packages: [package.descriptor(at: url)])
            try await expectCut(updater.apply(manifest))
            try FileManager.default.removeItem(at: file)
            try package.archive.write(to: file)
            _ = try await updater.apply(manifest)
            #expect(try await installedTree(updater) == package.files)
            #expect(again.statuses == [200, 412, 200])
        }
    }

    @Test("partial downloads past their age, or past the size cap, are removed; a held one is not")
    func pruning() async throws {
        let package = try ResumePackage(seed: 51, bytes: 20_000)
        let directory = try makeTemporaryDirectory("resume-prune")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("p.zip")
        try package.archive.write(to: file)
        try await withUpdater(FileTransport()) { updater, root in
            let partial = root.appendingPathComponent("partial")
            try FileManager.default.createDirectory(at: partial, withIntermediateDirectories: true)
            let old = partial.appendingPathComponent(String(repeating: "a", count: 64))
            let recent = partial.appendingPathComponent(String(repeating: "b", count: 64))
            try Data(count: 1000).write(to: old)
            try Data("{}".utf8).write(to: old.appendingPathExtension("json"))
            try Data(count: 1000).write(to: recent)
            try Data("{}".utf8).write(to: partial.appendingPathComponent("orphan.json"))
            try FileManager.default.setAttributes(
                [.modificationDate: Date(timeIntervalSinceNow: -8 * 24 * 3600)],
                ofItemAtPath: old.path
            )

            _ = try await updater.apply(
                try Manifest(packages: [package.descriptor(at: URL(fileURLWithPath: file.path))])
            )
            #expect(FileSystem.contents(of: partial).sorted() == [recent.lastPathComponent])

            // Past the size cap, the oldest go first.
            var configuration = updater.configuration
            configuration.partialDownloads = UpdaterConfiguration.PartialDownloadPolicy(maxTotalBytes: 500)
            let capped = Updater(configuration: configuration)
            _ = try await capped.remove(packageID: "p")
            _ = try await capped.apply(
                try Manifest(packages: [package.descriptor(at: URL(fileURLWithPath: file.path))])
            )
            #expect(FileSystem.contents(of: partial).isEmpty)
        }
    }

    @Test("hot killed midway through a download, then synced again: the package crosses the network about once")
    func killedAndSyncedAgain() async throws {
        let work = try makeTemporaryDirectory("resume-kill")
        defer { try? FileManager.default.removeItem(at: work) }
        let source = work.appendingPathComponent("src")
        try writeTree(["a.bin": noise(1_500_000, seed: 61), "b/c.bin": noise(500_000, seed: 62)], under: source)
        let repository = try Repository()
        defer { try? FileManager.default.removeItem(at: repository.directory) }
        let entry = try repository.publish(source, id: "p", version: "1")
        try FileManager.default.createSymbolicLink(
            atPath: repository.directory.appendingPathComponent("slow").path,
            withDestinationPath: "."
        )
        // Slow after the first 1.2 MB of each response: the first run is killed there, the
        // second asks for less than that and is never slowed.
        let server = try await NginxServer.start(
            root: repository.directory,
            options: .init(locations: [
                .rateLimited(prefix: "/slow/", bytesPerSecond: 50_000, afterBytes: 1_200_000)
            ])
        )
        let root = work.appendingPathComponent("store")
        func arguments(_ prefix: String) -> [String] {
            [
                "sync", "--manifest", server.baseURL.appendingPathComponent("\(prefix)manifest.json").absoluteString,
                "--root", root.path, "--allow-unsigned", "--quiet",
            ]
        }
        let firstLog = work.appendingPathComponent("first.log")
        let run = try HotRun(arguments("slow/"), log: firstLog)
        let partial = root.appendingPathComponent("partial/\(entry.sha256)").path
        // Long enough for a machine busy with other tests to start the process and send it
        // the first 1.2 MB; the rest then takes 16 s at the limited rate.
        let killed = await run.kill(when: { fileSize(partial) >= 1_200_000 }, timeout: .seconds(120))
        #expect(
            killed,
            "the first run ended before it was killed: \((try? String(contentsOf: firstLog, encoding: .utf8)) ?? "")"
        )
        _ = await run.wait()
        let (ending, output) = try await HotRun.run(arguments("slow/"), log: work.appendingPathComponent("second.log"))
        await server.stop()
        #expect(ending == .exited(0), "\(output)")
        let status = try await StoreInspection.status(
            root: root,
            check: true,
            log: work.appendingPathComponent("status.log")
        )
        let path = try #require(status["p"]?.path)
        #expect(try readTree(URL(fileURLWithPath: path)) == readTree(source))
        let sent = server.requests().filter { $0.path.hasSuffix(".zip") }.map(\.bodyBytesSent).reduce(0, +)
        #expect(sent > 0)
        #expect(Double(sent) <= 1.05 * Double(entry.size), "sent \(sent) bytes for a package of \(entry.size)")
    }

    @Test(
        "a server that closes a 6 MiB body after 4 MiB: hot sync asks for the rest with a Range and installs in one sync"
    )
    func cutMidBodyResumedInOneSync() async throws {
        let work = try makeTemporaryDirectory("resume-cut")
        defer { try? FileManager.default.removeItem(at: work) }
        let repo = work.appendingPathComponent("repo")
        let privateKey = work.appendingPathComponent("release.pem").path
        let publicKey = work.appendingPathComponent("release.pub").path
        try await PublisherWorkflowTests.hot(["keygen", "--private", privateKey, "--public", publicKey])
        let source = work.appendingPathComponent("src")
        let files = ["big.bin": noise(6 << 20, seed: 71), "small.txt": Data("cut".utf8)]
        try writeTree(files, under: source)
        try await PublisherWorkflowTests.hot([
            "pack", source.path, "--id", "big", "--version", "1", "--repo", repo.path, "--deltas", "0",
        ])
        try await PublisherWorkflowTests.hot(["sign", "--repo", repo.path, "--key", privateKey, "--expires", "30d"])
        let packages = try FileManager.default.contentsOfDirectory(atPath: repo.appendingPathComponent("packages").path)
        let archive = try #require(packages.first { $0.hasSuffix(".zip") })
        let size = try #require(
            try FileManager.default.attributesOfItem(atPath: repo.appendingPathComponent("packages/\(archive)").path)[
                .size
            ] as? Int
        )
        #expect(size > 6 << 20)

        // Everything under /cut/ comes through a proxy that closes a response after 4 MiB.
        let server = try await NginxServer.start(
            root: repo,
            options: .init(locations: [.cutsConnections(prefix: "/cut/", afterBytes: 4 << 20)])
        )
        let root = work.appendingPathComponent("store")
        let manifest = server.baseURL.appendingPathComponent("cut/manifest.json").absoluteString
        let (ending, output) = try await HotRun.run(
            ["sync", "--manifest", manifest, "--root", root.path, "--trust", publicKey],
            log: work.appendingPathComponent("sync.log")
        )
        let requests = await server.waitForRequests(path: "/cut/packages/\(archive)", count: 2)
        await server.stop()
        #expect(ending == .exited(0), "\(output)")

        // One sync: the first answer was cut past 4 MiB, the second asked for the rest.
        #expect(requests.map(\.status) == [200, 206], "\(requests)")
        let cut = try #require(requests.first)
        #expect(cut.bodyBytesSent >= 4 << 20 && cut.bodyBytesSent < Int64(size), "\(cut)")
        let range = try #require(requests.last?.range, "\(requests)")
        let offset = try #require(Int64(range.dropFirst("bytes=".count).dropLast()), "\(range)")
        #expect(range == "bytes=\(offset)-" && offset >= 4 << 20, "\(range)")
        #expect(requests.map(\.bodyBytesSent).reduce(0, +) <= Int64(size) + 64 * 1024, "\(requests)")

        // Installed byte for byte, with nothing kept under partial/.
        let status = try await StoreInspection.status(
            root: root,
            check: true,
            log: work.appendingPathComponent("status.log")
        )
        let path = try #require(status["big"]?.path)
        #expect(try readTree(URL(fileURLWithPath: path)) == files)
        #expect(FileSystem.contents(of: root.appendingPathComponent("partial")).isEmpty)
    }
}
