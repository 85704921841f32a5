import Foundation
import HotCore
import HotTesting
import Logging
import Testing

/// A fresh store root, fakes wired into an updater, and helpers to publish packages.
struct EngineFixture {
    let root: URL
    let transport = FakeTransport()
    let unarchiver = FakeUnarchiver()
    let verifier = FakeVerifier()
    let store: FakeMetadataStore
    let updater: Updater

    init(
        keepPreviousVersions: Int = 1,
        maxConcurrentPackages: Int = 2,
        store: FakeMetadataStore = FakeMetadataStore(),
        launch: LaunchPolicy = LaunchPolicy()
    ) throws {
        root = try ScratchDirectory.make("hotcore")
        self.store = store
        updater = Updater(
            configuration: UpdaterConfiguration(
                root: root,
                transport: transport,
                unarchiver: unarchiver,
                verifier: verifier,
                store: store,
                maxConcurrentPackages: maxConcurrentPackages,
                keepPreviousVersions: keepPreviousVersions,
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
                launch: launch
            )
        )
    }

    /// Serves a fake archive of `files` and returns its descriptor.
    func publish(
        _ id: String,
        _ version: String,
        _ files: [String: String],
        md5Only: Bool = false
    ) async throws -> PackageDescriptor {
        let bytes = try FakeArchive.make(files)
        let url = URL(string: "https://cdn.test/\(id)-\(version).zip")!
        await transport.serve(bytes, at: url, chunkSize: 7)
        if md5Only {
            return try PackageDescriptor(
                id: id,
                version: version,
                url: url,
                md5: verifier.digest(of: bytes, using: .md5)
            )
        }
        return try PackageDescriptor(
            id: id,
            version: version,
            url: url,
            size: Int64(bytes.count),
            sha256: verifier.digest(of: bytes, using: .sha256)
        )
    }

    func sync(_ packages: [PackageDescriptor]) async throws -> SyncReport {
        try await updater.apply(Manifest(packages: packages))
    }

    /// The active directory of `id`, read through the updater.
    func directory(of id: String) async throws -> URL? {
        try await updater.installedPackages().first { $0.id == id }?.directory
    }

    func contents(of id: String, _ path: String) async throws -> String? {
        guard let directory = try await directory(of: id) else { return nil }
        return try? String(contentsOf: directory.appendingPathComponent(path), encoding: .utf8)
    }

    /// Every file under the root, relative, sorted, with contents: proves "intact".
    func tree() throws -> [String: Data] {
        var result: [String: Data] = [:]
        let enumerator = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey])
        while let url = enumerator?.nextObject() as? URL {
            guard (try url.resourceValues(forKeys: [.isRegularFileKey])).isRegularFile == true else { continue }
            let relative = String(url.standardizedFileURL.path.dropFirst(root.standardizedFileURL.path.count))
            result[relative] = try Data(contentsOf: url)
        }
        return result
    }

    /// An updater over the same root and parts, as after a relaunch.
    func relaunched(keepPreviousVersions: Int? = nil) -> Updater {
        updater.store.endLaunches()  // the earlier process is gone
        var configuration = updater.configuration
        if let keepPreviousVersions { configuration.keepPreviousVersions = keepPreviousVersions }
        return Updater(configuration: configuration)
    }

    /// The file at `path` under the root.
    func url(_ path: String) -> URL {
        root.appendingPathComponent(path)
    }

    /// The object files under `objects/`, relative paths.
    func objectNames() -> [String] {
        let objects = root.appendingPathComponent("objects")
        return ((try? FileManager.default.contentsOfDirectory(atPath: objects.path)) ?? []).flatMap { fanout in
            ((try? FileManager.default.contentsOfDirectory(atPath: objects.appendingPathComponent(fanout).path)) ?? [])
                .map { "\(fanout)/\($0)" }
        }.sorted()
    }

    func stagingIsEmpty() -> Bool {
        let staging = root.appendingPathComponent("staging")
        return ((try? FileManager.default.contentsOfDirectory(atPath: staging.path)) ?? []).isEmpty
    }
}
