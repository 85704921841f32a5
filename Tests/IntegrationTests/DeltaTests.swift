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

/// Deltas end to end over nginx: a version assembled from the store's objects plus a delta
/// (whole files and zstd patches), and every refused delta falling back to the full
/// package with the fallback in the report and the events.
///
/// Patches are made by libzstd's encoder, linked with the package trait `Zstd` (on by default
/// off Apple platforms); a build without it (the Apple configuration) writes deltas of whole
/// files, as its `hot pack` does, and runs every test here but the one about an updater with no
/// patcher, which needs a delta holding a patch.
@Suite("deltas")
struct DeltaTests {
    /// How the tests write deltas: with zstd patches where this build can make them.
    static let writerOptions = DeltaWriter.Options(patcher: ZstdPatcher.canMakePatches ? ZstdPatcher() : nil)

    /// A small web package: a large script, a stylesheet, images, and text files.
    static func files(_ version: Int) -> [String: Data] {
        var files: [String: Data] = [:]
        var script = ""
        for line in 0..<2_000 {
            // One line in ten changes with each version.
            let stamp = line % 10 == 0 ? version : 0
            script += "function f\(line)() { return \(line * 7 + stamp) + \"value \(line) \(stamp)\"; }\n"
        }
        files["app.js"] = Data(script.utf8)
        files["style.css"] = Data("body { color: #\(version)\(version)\(version); }\n".utf8)
        for index in 0..<20 {
            files["img/\(index).png"] = noise(3_000, seed: UInt64(index + 1))
        }
        files["img/changed.png"] = noise(5_000, seed: UInt64(100 + version))
        files["v\(version).txt"] = Data("only in \(version)".utf8)  // added, and removed in the next
        return files
    }

    /// The client's updater: the signed client's parts plus a zstd patcher, logging nowhere.
    static func updater(
        _ client: SignedClient,
        patcher: Bool = true,
        telemetry: (any TelemetryReporter)? = nil
    ) -> Updater {
        var configuration = UpdaterConfiguration(
            root: client.root,
            transport: SchemeRoutingTransport.platformHTTP(),
            unarchiver: ZipUnarchiver(),
            verifier: CryptoVerifier(),
            store: FileMetadataStore(root: client.root),
            timeouts: client.timeouts,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        configuration.patcher = patcher ? ZstdPatcher() : nil
        configuration.commitHooks = [NameIndexWriter()]
        configuration.telemetry = telemetry
        return Updater(configuration: configuration)
    }

    /// Keeps the download events it is given.
    final class Downloads: TelemetryReporter, @unchecked Sendable {
        private let lock = NSLock()
        private var events: [TelemetryEvent] = []
        func record(_ event: TelemetryEvent) { lock.withLock { if event.kind == .download { events.append(event) } } }
        var recorded: [TelemetryEvent] { lock.withLock { events } }
    }

    /// Packs `version`, with a delta from `base` written by `DeltaWriter`.
    static func release(
        _ repository: SignedRepository,
        _ version: Int,
        from base: (Int, SignedManifestBody.Version)?
    ) throws -> (SignedManifestBody.Version, URL?) {
        let entry = try repository.pack(files(version), id: "web", version: "\(version)")
        guard let (baseVersion, baseEntry) = base else { return (entry, nil) }
        let work = try makeTemporaryDirectory("delta-trees")
        defer { try? FileManager.default.removeItem(at: work) }
        let baseTree = work.appendingPathComponent("base")
        let targetTree = work.appendingPathComponent("target")
        try writeTree(files(baseVersion), under: baseTree)
        try writeTree(files(version), under: targetTree)
        let delta = repository.directory.appendingPathComponent("packages/web-\(baseVersion)-to-\(version).delta")
        do {
            try DeltaWriter.write(
                packageID: "web",
                base: DeltaWriter.Side(version: "\(baseVersion)", sha256: baseEntry.sha256, directory: baseTree),
                target: DeltaWriter.Side(version: "\(version)", sha256: entry.sha256, directory: targetTree),
                to: delta,
                verifier: CryptoVerifier(),
                options: writerOptions
            )
        }
        let data = try Data(contentsOf: delta)
        let sha256 = try CryptoVerifier().digest(of: data, using: .sha256).hex
        repository.body.editPackage("web") { package in
            package.versions[package.versions.count - 1].deltas = [
                DeltaEntry(
                    from: "\(baseVersion)",
                    fromSHA256: baseEntry.sha256,
                    url: "packages/\(delta.lastPathComponent)",
                    size: Int64(data.count),
                    sha256: sha256
                )
            ]
        }
        return (entry, delta)
    }

    /// Every installed file of the active version, by path.
    static func activeTree(_ updater: Updater) async throws -> [String: Data] {
        let package = try #require(try await updater.installedPackages().first)
        return try readTree(package.directory)
    }

    /// Collects the delta fallbacks an updater publishes.
    final class Fallbacks: @unchecked Sendable {
        private let lock = NSLock()
        private var values: [UpdateEvent.DeltaFallback] = []
        func append(_ value: UpdateEvent.DeltaFallback) { lock.withLock { values.append(value) } }
        var all: [UpdateEvent.DeltaFallback] { lock.withLock { values } }
    }

    static func watch(_ updater: Updater) -> (Fallbacks, Task<Void, Never>) {
        let fallbacks = Fallbacks()
        let events = updater.events()
        let task = Task {
            for await event in events { if case .deltaFallback(let value) = event { fallbacks.append(value) } }
        }
        return (fallbacks, task)
    }

    @Test(
        "an update downloads only the delta: changed and added files whole, the script as a zstd patch, removed paths gone, every byte equal"
    )
    func updateFromDelta() async throws {
        let key = try CryptoSigner.generate()
        let repository = try SignedRepository(keys: [key])
        let (v1, _) = try Self.release(repository, 1, from: nil)
        try repository.sign(with: [key])
        let server = try await NginxServer.start(root: repository.directory)
        defer { server.stopNow() }
        let client = try SignedClient(trust: .signed(by: [key.publicKey]))
        let first = try await Self.updater(client).sync(from: client.source(repository.url(on: server)))
        try first.throwIfFailed()
        #expect(first.packages.first?.delta == nil)

        let (v2, delta) = try Self.release(repository, 2, from: (1, v1))
        try repository.sign(with: [key])
        let deltaFile = try #require(delta)
        let deltaSize = Int64(try Data(contentsOf: deltaFile).count)
        let downloads = Downloads()
        let updater = Self.updater(client, telemetry: downloads)
        let report = try await updater.sync(from: client.source(repository.url(on: server)))
        try report.throwIfFailed()
        let outcome = try #require(report.packages.first)
        #expect(outcome.activeVersion == "2")
        #expect(outcome.delta == SyncReport.DeltaUse(baseVersion: "1", bytes: deltaSize))
        #expect(outcome.bytesDownloaded == deltaSize)
        // Telemetry says a delta was downloaded, and its bytes, not the package's.
        #expect(
            downloads.recorded.map { "\($0.version ?? "-") \($0.delivery?.rawValue ?? "-") \($0.bytes ?? -1)" } == [
                "2 delta \(deltaSize)"
            ]
        )
        // A tenth of the script's lines changed: patched, it costs next to nothing; whole, most of
        // a compressed script.
        let smaller: Int64 = ZstdPatcher.canMakePatches ? 4 : 2
        #expect(
            deltaSize * smaller < v2.size,
            "the delta (\(deltaSize) bytes) is far smaller than the package (\(v2.size))"
        )
        #expect(try await Self.activeTree(updater) == Self.files(2))

        // The delta holds a patch of the script, not the script (the script whole where this
        // build cannot make patches).
        let unpacked = try makeTemporaryDirectory("delta-unpacked")
        _ = try await ZipUnarchiver().extract(deltaFile, to: unpacked, options: ExtractOptions(), progress: { _ in })
        let header = try JSONDecoder().decode(
            DeltaLayout.Header.self,
            from: Data(contentsOf: unpacked.appendingPathComponent(DeltaLayout.headerName))
        )
        #expect(header.patches.map(\.path) == (ZstdPatcher.canMakePatches ? ["app.js"] : []))
        #expect(header.removed == ["v1.txt"])
        #expect(
            Set(try readTree(unpacked.appendingPathComponent(DeltaLayout.filesDirectory)).keys)
                == Set(["img/changed.png", "style.css", "v2.txt"] + (ZstdPatcher.canMakePatches ? [] : ["app.js"]))
        )

        // nginx served the delta and never the full package of version 2.
        let requests = server.requests().map(\.path)
        #expect(requests.contains("/packages/\(deltaFile.lastPathComponent)"))
        #expect(!requests.contains("/" + v2.url))
    }

    @Test(
        "a refused delta installs the full package and says so in the report and the events",
        arguments: ["corrupted", "dotdot", "absolute removed path", "file list lies"]
    )
    func refusedDelta(_ fault: String) async throws {
        let key = try CryptoSigner.generate()
        let repository = try SignedRepository(keys: [key])
        let (v1, _) = try Self.release(repository, 1, from: nil)
        try repository.sign(with: [key])
        let server = try await NginxServer.start(root: repository.directory)
        defer { server.stopNow() }
        let client = try SignedClient(trust: .signed(by: [key.publicKey]))
        try await Self.updater(client).sync(from: client.source(repository.url(on: server))).throwIfFailed()

        /// A hostile delta: a real one whose header or file list is rewritten.
        func hostile(
            _ rewrite: @escaping (inout DeltaLayout.Header, inout String) -> Void
        ) -> (URL) async throws -> Void {
            { url in
                let work = try makeTemporaryDirectory("hostile")
                let base = work.appendingPathComponent("base")
                let target = work.appendingPathComponent("target")
                try writeTree(Self.files(1), under: base)
                try writeTree(Self.files(2), under: target)
                let honest = work.appendingPathComponent("honest.delta")
                try DeltaWriter.write(
                    packageID: "web",
                    base: DeltaWriter.Side(version: "1", sha256: v1.sha256, directory: base),
                    target: DeltaWriter.Side(
                        version: "2",
                        sha256: String(repeating: "0", count: 64),
                        directory: target
                    ),
                    to: honest,
                    verifier: CryptoVerifier(),
                    options: Self.writerOptions
                )
                let tree = work.appendingPathComponent("tree")
                _ = try await ZipUnarchiver().extract(honest, to: tree, options: ExtractOptions(), progress: { _ in })
                let headerURL = tree.appendingPathComponent(DeltaLayout.headerName)
                let listURL = tree.appendingPathComponent(DeltaLayout.fileListName)
                var header = try JSONDecoder().decode(DeltaLayout.Header.self, from: Data(contentsOf: headerURL))
                var list = try String(contentsOf: listURL, encoding: .utf8)
                rewrite(&header, &list)
                try JSONEncoder().encode(header).write(to: headerURL)
                try Data(list.utf8).write(to: listURL)
                _ = try ZipWriter.write(directory: tree, to: url)
            }
        }
        var patcher = true  // false: an updater with no zstd patcher
        var writer: ((URL) async throws -> Void)?
        let v2SHA = { () -> String in repository.body.package("web")?.versions.last?.sha256 ?? "" }
        switch fault {
        case "dotdot":
            writer = hostile { header, list in
                header.targetSHA256 = v2SHA()
                list = list.replacingOccurrences(of: " style.css\n", with: " ../../escape.css\n")
            }
        case "absolute removed path":
            writer = hostile { header, _ in
                header.targetSHA256 = v2SHA()
                header.removed.append("/etc/passwd")
            }
        case "file list lies":
            writer = hostile { header, list in
                header.targetSHA256 = v2SHA()
                // style.css is in the delta whole; the list claims img/1.png's content for it.
                let other = list.split(separator: "\n").first { $0.hasSuffix(" img/1.png") }?.prefix(64) ?? ""
                let lines = list.split(separator: "\n").map { line -> String in
                    line.hasSuffix(" style.css") ? String(other) + line.dropFirst(64) : String(line)
                }
                list = lines.joined(separator: "\n") + "\n"
            }
        case "no patcher":
            patcher = false
        default:
            break
        }
        // The hostile writers need version 2's digest, known once it is packed: pack first.
        let v2: SignedManifestBody.Version
        let delta: URL?
        if let writer {
            v2 = try repository.pack(Self.files(2), id: "web", version: "2")
            let url = repository.directory.appendingPathComponent("packages/web-1-to-2.delta")
            try await writer(url)
            let data = try Data(contentsOf: url)
            let sha256 = try CryptoVerifier().digest(of: data, using: .sha256).hex
            repository.body.editPackage("web") { package in
                package.versions[package.versions.count - 1].deltas = [
                    DeltaEntry(
                        from: "1",
                        fromSHA256: v1.sha256,
                        url: "packages/web-1-to-2.delta",
                        size: Int64(data.count),
                        sha256: sha256
                    )
                ]
            }
            delta = url
        } else {
            (v2, delta) = try Self.release(repository, 2, from: (1, v1))
        }
        try repository.sign(with: [key])
        let deltaFile = try #require(delta)
        if fault == "corrupted" {
            // Served bytes that differ from what the manifest signed.
            var bytes = try Data(contentsOf: deltaFile)
            bytes[bytes.count / 2] ^= 0xFF
            try bytes.write(to: deltaFile)
        }
        let updater = Self.updater(client, patcher: patcher)
        let (fallbacks, watching) = Self.watch(updater)
        let report = try await updater.sync(from: client.source(repository.url(on: server)))
        try report.throwIfFailed()
        let outcome = try #require(report.packages.first)
        #expect(outcome.activeVersion == "2")
        let fallback = try #require(outcome.deltaFallback, "the fallback is in the report")
        #expect(report.deltaFallbacks.map(\.id) == ["web"])
        #expect(outcome.bytesDownloaded >= v2.size)
        #expect(try await Self.activeTree(updater) == Self.files(2))
        #expect(!FileManager.default.fileExists(atPath: client.root.appendingPathComponent("escape.css").path))
        let expected: HotUpdateError.Code =
            switch fault {
            case "corrupted": .digestMismatch
            case "dotdot", "absolute removed path": .unsafeEntry
            case "file list lies": .digestMismatch
            default: .unsupported
            }
        #expect(fallback.code == expected, "\(fallback)")
        // And in the events.
        for _ in 0..<100 where fallbacks.all.isEmpty { try await Task.sleep(for: .milliseconds(20)) }
        watching.cancel()
        #expect(fallbacks.all.map(\.baseVersion) == ["1"])
        #expect(fallbacks.all.first?.error.code == expected)
        let paths = server.requests().map(\.path)
        #expect(paths.contains("/packages/\(deltaFile.lastPathComponent)"))
        #expect(paths.contains("/" + v2.url))
    }

    @Test(
        "a delta holding a patch, to an updater with no patcher, installs the full package and says so",
        .enabled(
            if: ZstdPatcher.canMakePatches,
            "making the patch needs libzstd's encoder, which this build leaves out (the package trait 'Zstd')"
        )
    )
    func deltaWithoutPatcher() async throws {
        try await refusedDelta("no patcher")
    }

    @Test("hot pack writes a delta against the last release and lists it; hot sync installs from it and says so")
    func commandLine() async throws {
        let work = try makeTemporaryDirectory("delta-cli")
        let repo = work.appendingPathComponent("repo").path
        let root = work.appendingPathComponent("store").path
        let privateKey = work.appendingPathComponent("release.pem").path
        let publicKey = work.appendingPathComponent("release.pub").path
        try await PublisherWorkflowTests.hot(["keygen", "--private", privateKey, "--public", publicKey])
        try FileManager.default.createDirectory(atPath: repo, withIntermediateDirectories: true)
        let server = try await NginxServer.start(root: URL(fileURLWithPath: repo, isDirectory: true))
        defer { server.stopNow() }
        let manifestURL = server.baseURL.appendingPathComponent("manifest.json").absoluteString
        var outputs: [String] = []
        for version in [1, 2] {
            let source = work.appendingPathComponent("v\(version)")
            try writeTree(Self.files(version), under: source)
            let packed = try await PublisherWorkflowTests.hot(
                ["pack", source.path, "--id", "web", "--version", "\(version)", "--repo", repo])
            if version == 2 { #expect(packed.stdout.contains("delta web 1 -> 2:"), "\(packed.stdout)") }
            try await PublisherWorkflowTests.hot(["sign", "--repo", repo, "--key", privateKey, "--expires", "1h"])
            let synced = try await PublisherWorkflowTests.hot(
                ["sync", "--manifest", manifestURL, "--root", root, "--trust", publicKey])
            outputs.append(synced.stdout)
        }
        #expect(outputs[0] == "web\tadd\tok\t1\n")
        #expect(outputs[1].hasPrefix("web\tupdate\tok\t2\tdelta from 1, "), "\(outputs[1])")
        let delta = try #require(
            try FileManager.default.contentsOfDirectory(atPath: repo + "/packages").first { $0.hasSuffix(".delta") }
        )
        #expect(delta.hasPrefix("web-1-to-2-"))
        #expect(server.requestCount(for: "/packages/\(delta)") == 1)
        #expect(!server.requests().contains { $0.path.hasPrefix("/packages/web-2-") && $0.path.hasSuffix(".zip") })
    }
}
