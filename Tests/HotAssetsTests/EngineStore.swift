import Foundation
import HotAssets
import HotCore
import HotTesting
import Logging
import Testing

/// A store with packages installed through the engine (fake transport and archives, real
/// files), for the tests of the resolvers that open a store's name index.
struct EngineStore {
    let root: URL
    let updater: Updater
    let transport = FakeTransport()
    let verifier = FakeVerifier()
    let metadata = FakeMetadataStore()

    init(parent: URL) {
        root = parent.appendingPathComponent("store")
        updater = Self.updater(root: root, transport: transport, verifier: verifier, metadata: metadata, log: nil)
    }

    /// A fresh updater over the same root and metadata: a new launch, logging to `log`.
    func relaunch(log: LogLines? = nil) -> Updater {
        Self.updater(root: root, transport: transport, verifier: verifier, metadata: metadata, log: log)
    }

    /// Installs `files` (path → content) as version `version` of package `id`.
    func install(_ id: String, version: String = "1", files: [String: String]) async throws {
        let bytes = try FakeArchive.make(files)
        let url = try #require(URL(string: "https://cdn.test/\(id)-\(version).zip"))
        await transport.serve(bytes, at: url)
        _ = try await updater.install(
            PackageDescriptor(
                id: id,
                version: version,
                url: url,
                size: Int64(bytes.count),
                sha256: verifier.digest(of: bytes, using: .sha256)
            )
        )
    }

    /// The name index file of the store's current generation.
    func indexFile() async throws -> URL {
        let generation = try await updater.currentSnapshot().generation
        return root.appendingPathComponent("index/names-\(generation)")
    }

    private static func updater(
        root: URL,
        transport: FakeTransport,
        verifier: FakeVerifier,
        metadata: FakeMetadataStore,
        log: LogLines?
    ) -> Updater {
        var configuration = UpdaterConfiguration(
            root: root,
            transport: transport,
            unarchiver: FakeUnarchiver(),
            verifier: verifier,
            store: metadata,
            logger: Logger(label: "test", factory: { _ in log ?? LogLines() })
        )
        configuration.commitHooks = [NameIndexWriter()]
        return Updater(configuration: configuration)
    }
}
