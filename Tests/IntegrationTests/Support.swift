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

/// A fresh temporary directory per test.
func makeTemporaryDirectory(_ label: String) throws -> URL {
    try ScratchDirectory.make("hot-\(label)")
}

/// Writes files (relative path → bytes) under `directory`.
func writeTree(_ files: [String: Data], under directory: URL) throws {
    for (path, data) in files {
        let url = directory.appendingPathComponent(path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url)
    }
}

/// Every regular file under `directory`, relative path → bytes.
func readTree(_ directory: URL) throws -> [String: Data] {
    var result: [String: Data] = [:]
    let base = directory.standardizedFileURL.resolvingSymlinksInPath().path
    let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey])
    while let url = enumerator?.nextObject() as? URL {
        guard try url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile == true else { continue }
        let path = url.standardizedFileURL.resolvingSymlinksInPath().path
        result[String(path.dropFirst(base.count + 1))] = try Data(contentsOf: url)
    }
    return result
}

/// Deterministic bytes that do not compress (a cheap xorshift stream).
func noise(_ count: Int, seed: UInt64) -> Data {
    var state = seed | 1
    var bytes = [UInt8](repeating: 0, count: count)
    for index in 0..<count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        bytes[index] = UInt8(truncatingIfNeeded: state)
    }
    return Data(bytes)
}

/// A static repository on disk, written the way `hot pack` writes it.
struct Repository {
    let directory: URL

    init() throws {
        directory = try makeTemporaryDirectory("repo")
    }

    var manifestFile: URL { directory.appendingPathComponent("manifest.json") }

    /// Packs `source` as `id` `version` and records it in the manifest.
    @discardableResult
    func publish(_ source: URL, id: String, version: String) throws -> ManifestDocument.Entry {
        let packages = directory.appendingPathComponent("packages", isDirectory: true)
        try FileManager.default.createDirectory(at: packages, withIntermediateDirectories: true)
        let archive = packages.appendingPathComponent("\(id)-\(version).zip")
        _ = try ZipWriter.write(directory: source, to: archive, options: ZipWriter.Options())
        let verifier = CryptoVerifier()
        let entry = ManifestDocument.Entry(
            id: id,
            version: version,
            url: "packages/\(id)-\(version).zip",
            size: Int64(try Data(contentsOf: archive).count),
            sha256: try verifier.digest(ofFile: archive, using: .sha256).hex,
            md5: try verifier.digest(ofFile: archive, using: .md5).hex
        )
        try update { $0.upsert(entry) }
        return entry
    }

    /// Edits the manifest in place.
    func update(_ edit: (inout ManifestDocument) throws -> Void) throws {
        var document = ManifestDocument()
        if FileManager.default.fileExists(atPath: manifestFile.path) {
            document = try ManifestDocument.decode(Data(contentsOf: manifestFile))
        }
        try edit(&document)
        try document.encoded().write(to: manifestFile)
    }

    func archive(_ entry: ManifestDocument.Entry) -> URL {
        directory.appendingPathComponent(entry.url)
    }
}

/// The transports under test.
/// `curl` only where this build links libcurl (the package's `Curl` trait).
enum TransportKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    #if Curl
    case curl
    #endif
    case urlsession
    var testDescription: String { rawValue }
    func make() -> any Transport {
        switch self {
        #if Curl
        case .curl: CurlTransport()
        #endif
        case .urlsession: URLSessionTransport()
        }
    }

    /// The HTTP transport of tests that do not compare transports: curl where linked.
    static var http: TransportKind {
        #if Curl
        return .curl
        #else
        return .urlsession
        #endif
    }
}

/// The unarchivers under test; `libarchive` only where this build links it (the package's
/// `LibArchive` trait).
enum UnarchiverKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case zip
    #if LibArchive
    case libarchive
    #endif
    var testDescription: String { rawValue }
    func make() -> any Unarchiver {
        switch self {
        case .zip: ZipUnarchiver()
        #if LibArchive
        case .libarchive: LibArchiveUnarchiver()
        #endif
        }
    }
}

/// The HTTP transport of the tests that do not compare transports: libcurl where this build
/// links it, URLSession otherwise.
func httpTransport() -> any Transport {
    SchemeRoutingTransport.platformHTTP()
}

/// Builds an updater over a fresh root with real parts.
func makeUpdater(
    root: URL,
    transport: TransportKind,
    unarchiver: UnarchiverKind = .zip,
    plist: Bool = false
) -> Updater {
    var configuration = UpdaterConfiguration(
        root: root,
        transport: transport.make(),
        unarchiver: unarchiver.make(),
        verifier: CryptoVerifier(),
        store: FileMetadataStore(root: root, format: plist ? .propertyList : .json),
        timeouts: TransportRequest.Timeouts(connect: .seconds(5), lowSpeedWindow: .seconds(5)),
        logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    )
    configuration.commitHooks = [NameIndexWriter()]
    return Updater(configuration: configuration)
}

/// An executable product (`hot`, an example) built beside the test bundle.
func builtExecutable(_ name: String) throws -> URL {
    var directory = Bundle.main.bundleURL
    if directory.pathExtension == "xctest" { directory.deleteLastPathComponent() }
    for candidate in [directory, Bundle.main.bundleURL.deletingLastPathComponent()] {
        let url = candidate.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: url.path) { return url }
    }
    Issue.record("the \(name) executable is not built next to the tests; run `swift build --build-tests` first")
    throw HotUpdateError(.notFound, "\(name) executable not found near \(directory.path)")
}

/// The package's source directory (for the examples' files).
let packageDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
