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

/// A signed repository on disk, written with the library code `hot` uses: content-addressed
/// package files under `packages/`, one manifest per channel.
final class SignedRepository {
    let directory: URL
    let channel: String?
    var body: SignedManifestBody

    /// Creates a repository (or a channel of an existing one, sharing its package files)
    /// whose manifest declares `keys` with `threshold`.
    init(directory: URL? = nil, channel: String? = nil, keys: [any Signer], threshold: Int = 1) throws {
        self.directory = try directory ?? makeTemporaryDirectory("signed-repo")
        self.channel = channel
        var table: [String: SignedManifestBody.Key] = [:]
        for key in keys { table[try CryptoVerifier().keyID(of: key.publicKey)] = SignedManifestBody.Key(key.publicKey) }
        body = SignedManifestBody(channel: channel, keys: table, threshold: threshold)
    }

    var manifestPath: String { channel.map { "channels/\($0)/manifest.json" } ?? "manifest.json" }
    var manifestFile: URL { directory.appendingPathComponent(manifestPath) }

    /// The manifest's URL on `server`.
    func url(on server: NginxServer) -> URL { server.baseURL.appendingPathComponent(manifestPath) }

    /// Zips `files` into `packages/<id>-<version>-<sha>.zip`, lists the version and, unless
    /// `release` is false, releases it.
    @discardableResult
    func pack(
        _ files: [String: Data],
        id: String,
        version: String,
        release: Bool = true
    ) throws
        -> SignedManifestBody.Version
    {
        let source = try makeTemporaryDirectory("pack-source")
        defer { try? FileManager.default.removeItem(at: source) }
        try writeTree(files, under: source)
        let packages = directory.appendingPathComponent("packages", isDirectory: true)
        try FileManager.default.createDirectory(at: packages, withIntermediateDirectories: true)
        let temporary = packages.appendingPathComponent(".\(UUID().uuidString).zip")
        _ = try ZipWriter.write(directory: source, to: temporary, options: ZipWriter.Options())
        let verifier = CryptoVerifier()
        let sha256 = try verifier.digest(ofFile: temporary, using: .sha256).hex
        let name = "\(id)-\(version)-\(sha256.prefix(12)).zip"
        let archive = packages.appendingPathComponent(name)
        if FileManager.default.fileExists(atPath: archive.path) {
            try FileManager.default.removeItem(at: temporary)
        } else {
            try FileManager.default.moveItem(at: temporary, to: archive)
        }
        let entry = SignedManifestBody.Version(
            version: version,
            url: (channel == nil ? "" : "../../") + "packages/\(name)",
            size: Int64(try Data(contentsOf: archive).count),
            sha256: sha256
        )
        body.editPackage(id) { package in
            package.versions.append(entry)
            if release { package.releases.append(version) }
        }
        return entry
    }

    /// The file of a listed version.
    func archive(_ entry: SignedManifestBody.Version) -> URL {
        directory.appendingPathComponent("packages").appendingPathComponent(
            (entry.url as NSString).lastPathComponent
        )
    }

    /// Bumps the version (or sets `version`), signs with `signers` and writes the manifest.
    ///
    /// - Returns: The served bytes.
    @discardableResult
    func sign(
        with signers: [any Signer],
        expires: Date = Date().addingTimeInterval(86_400),
        version: Int? = nil
    )
        throws -> Data
    {
        body.version = version ?? body.version + 1
        body.expires = expires
        let envelope = try SignedEnvelope.sign(try body.canonicalBytes(), with: signers, verifier: CryptoVerifier())
        return try write(envelope.encoded())
    }

    /// Serves `data` as the manifest.
    @discardableResult
    func write(_ data: Data) throws -> Data {
        try FileManager.default.createDirectory(
            at: manifestFile.deletingLastPathComponent(),
            withIntermediateDirectories: true
        )
        try data.write(to: manifestFile)
        return data
    }
}

/// A client of a signed repository: an updater over its own root and a source for it.
struct SignedClient {
    let root: URL
    var trust: ManifestTrust
    var context = ClientContext()
    /// Generous: on a loaded machine nginx on loopback has been seen to send nothing for 5 s;
    /// the tests of stalls and trickles set their own short windows.
    var timeouts = TransportRequest.Timeouts(connect: .seconds(10), lowSpeedWindow: .seconds(20))
    var maxManifestBytes: Int64 = 1 << 20
    var now: @Sendable () -> Date = { Date() }
    /// Where the updater's telemetry goes, if anywhere.
    var telemetry: (any TelemetryReporter)?

    init(trust: ManifestTrust, context: ClientContext = ClientContext()) throws {
        root = try makeTemporaryDirectory("client")
        self.trust = trust
        self.context = context
    }

    /// A fresh updater over the same root: what the app has after a restart.
    func updater(packageTimeouts: TransportRequest.Timeouts? = nil) -> Updater {
        var configuration = UpdaterConfiguration(
            root: root,
            transport: httpTransport(),
            unarchiver: ZipUnarchiver(),
            verifier: CryptoVerifier(),
            store: FileMetadataStore(root: root),
            timeouts: packageTimeouts ?? timeouts,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        configuration.commitHooks = [NameIndexWriter()]
        configuration.telemetry = telemetry
        return Updater(configuration: configuration)
    }

    func source(_ url: URL) -> SignedManifestSource {
        SignedManifestSource(
            url: url,
            transport: httpTransport(),
            verifier: CryptoVerifier(),
            trust: trust,
            storeRoot: root,
            context: context,
            maxBytes: maxManifestBytes,
            timeouts: timeouts,
            now: now,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
    }

    /// Syncs with a fresh updater and source.
    @discardableResult
    func sync(_ url: URL) async throws -> SyncReport {
        try await updater().sync(from: source(url))
    }

    /// `id version` of every package assets resolve from.
    func active() async throws -> [String] {
        try await updater().installedPackages().map { "\($0.id) \($0.version)" }.sorted()
    }

    /// What `name` resolves to: the file's text and where it came from.
    func resolve(_ name: String, bundle: URL) async throws -> String? {
        let packages = try await updater().installedPackages()
        let resolver = try AssetResolverChain.make(packages: packages, bundle: bundle)
        guard let asset = resolver.resolve(name) else { return nil }
        let text = String(decoding: try Data(contentsOf: asset.url), as: UTF8.self)
        switch asset.origin {
        case .package(let id, let version): return "\(text) from \(id) \(version)"
        case .bundle: return "\(text) from bundle"
        }
    }

    /// Every installed file, for byte-for-byte comparisons.
    func installedTree() throws -> [String: Data] {
        try readTree(root.appendingPathComponent("packages"))
    }
}

/// The files of a sample release: its text and an image.
func releaseFiles(_ version: String) -> [String: Data] {
    [
        "config.txt": Data("config \(version)".utf8),
        "sub/sample@2x.png": noise(20_000, seed: UInt64(version.utf8.reduce(0) { $0 &* 31 &+ UInt64($1) })),
    ]
}

/// A bundle with its own copy of `config.txt`.
func makeBundle() throws -> URL {
    let bundle = try makeTemporaryDirectory("bundle")
    try writeTree(["config.txt": Data("config bundled".utf8)], under: bundle)
    return bundle
}
