import Foundation
import HotAssets
import HotCore
import HotTesting
import Logging
import Testing

/// Resolvers degrade, never fail: a broken package is left out and its names fall through.
@Suite("Resolvers skip broken packages")
struct DegradedPackageTests {
    /// An updater with three packages installed: `damaged`, `gone` and `good`, each with
    /// `shared.png` and a file of its own, and a bundle with `shared.png` and `own-*.png`.
    struct Store {
        let root: URL
        let updater: Updater
        let bundle: URL
        let log: LogLines

        init(_ parent: URL) async throws {
            root = parent.appendingPathComponent("store")
            let transport = FakeTransport()
            let verifier = FakeVerifier()
            let log = LogLines()
            self.log = log
            var configuration = UpdaterConfiguration(
                root: root,
                transport: transport,
                unarchiver: FakeUnarchiver(),
                verifier: verifier,
                store: FakeMetadataStore(),
                logger: Logger(label: "test", factory: { _ in log })
            )
            configuration.commitHooks = [NameIndexWriter()]
            updater = Updater(configuration: configuration)
            for id in ["damaged", "gone", "unlisted", "good"] {
                let bytes = try FakeArchive.make(["shared.png": id, "own-\(id).png": id])
                let url = try #require(URL(string: "https://cdn.test/\(id).zip"))
                await transport.serve(bytes, at: url)
                _ = try await updater.install(
                    try PackageDescriptor(
                        id: id,
                        version: "1",
                        url: url,
                        size: Int64(bytes.count),
                        sha256: verifier.digest(of: bytes, using: .sha256)
                    )
                )
            }
            bundle = parent.appendingPathComponent("bundle")
            try makeTree(
                bundle,
                files: ["shared.png", "own-damaged.png", "own-gone.png", "own-unlisted.png"],
                tag: "bundle"
            )
        }
    }

    @Test(
        "damaged packages, a package whose tree is gone and one whose file list is unreadable are skipped with a reason; names fall through"
    )
    func brokenPackagesFallThrough() async throws {
        try await withTemporaryDirectory { parent in
            let store = try await Store(parent)
            let root = store.root
            // fileMissing, recorded by a check; a tree gone without the store knowing; an unreadable list.
            try FileManager.default.removeItem(at: root.appendingPathComponent("packages/damaged/1/own-damaged.png"))
            #expect(try await !store.updater.health.verify(packageID: "damaged", depth: .quick).isHealthy)
            #expect(try await store.updater.state(of: "damaged") == .fileMissing)
            try FileManager.default.removeItem(at: root.appendingPathComponent("packages/gone/1"))
            try Data("not a file list".utf8).write(to: root.appendingPathComponent("filelists/unlisted/1.files"))

            let fresh = Updater(configuration: store.updater.configuration)  // reads the lists anew
            let chain = try await AssetResolverChain.make(updater: fresh, bundle: store.bundle)
            #expect(chain.resolve("own-good")?.origin == .package(id: "good", version: "1"))
            #expect(chain.resolve("shared")?.origin == .package(id: "good", version: "1"))
            for id in ["damaged", "gone", "unlisted"] {
                let asset = try #require(chain.resolve("own-\(id)"), "own-\(id)")
                #expect(asset.origin == .bundle, "own-\(id)")
                #expect(FileManager.default.fileExists(atPath: asset.url.path))
            }
            let lines = store.log.lines
            #expect(lines.contains { $0.contains("damaged package") && $0.contains("damaged") })
            #expect(lines.contains { $0.contains("tree is gone") && $0.contains("gone") })
            #expect(lines.contains { $0.contains("file list cannot be read") && $0.contains("unlisted") })
        }
    }

    @Test("a store that cannot be read leaves the bundle")
    func unreadableStoreLeavesTheBundle() async throws {
        try await withTemporaryDirectory { parent in
            let root = parent.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            let store = FakeMetadataStore(initial: StoreSnapshot(schema: StoreSnapshot.currentSchema + 1))
            var configuration = UpdaterConfiguration(
                root: root,
                transport: FakeTransport(),
                unarchiver: FakeUnarchiver(),
                verifier: FakeVerifier(),
                store: store
            )
            configuration.commitHooks = [NameIndexWriter()]
            let updater = Updater(configuration: configuration)
            let bundle = parent.appendingPathComponent("bundle")
            try makeTree(bundle, files: ["a.png"], tag: "bundle")
            let chain = try await AssetResolverChain.make(updater: updater, bundle: bundle)
            #expect(chain.resolve("a")?.origin == .bundle)
        }
    }
}

/// A log handler that keeps every line, with its metadata.
final class LogLines: LogHandler, @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    var lines: [String] { lock.withLock { stored } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        let text =
            "\(event.message) " + all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        lock.withLock { stored.append(text) }
    }
}
