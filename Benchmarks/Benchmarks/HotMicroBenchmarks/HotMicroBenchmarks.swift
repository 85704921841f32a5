import Benchmark
import Foundation
import HotArchive
import HotAssets
import HotCore
import HotManifest
import HotStore
import HotTransport
import HotVerify
import Logging

// Micro-benchmarks of the calls an app makes at launch and while it draws, in package-benchmark's
// form: `HOTUPDATE_DEV=1 swift package benchmark` from the repository's root (see
// Benchmarks/README.md). Each benchmark's setup writes what it measures into a temporary directory
// of its own, and its teardown removes it.

/// The store the store and resolver benchmarks use: this many packages of this many files.
let storePackages = 20
let storeFilesPerPackage = 200

/// The file the digest benchmarks hash.
let digestFileBytes = 16 << 20

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .throughput],
        maxDuration: .seconds(2)
    )

    // Digests of a file, as a sync checks every download and `hot repair --full` every file.
    let digestFile = Fixture<URL>()
    for algorithm in [Digest.Algorithm.sha256, .md5] {
        Benchmark(
            "Digest \(algorithm.name) of a 16 MiB file",
            configuration: .init(scalingFactor: .one)
        ) { benchmark in
            let verifier = CryptoVerifier()
            let file = digestFile.value
            for _ in benchmark.scaledIterations {
                blackHole(try verifier.digest(ofFile: file, using: algorithm))
            }
        } setup: {
            digestFile.value = try writeDigestFile()
        } teardown: {
            try? FileManager.default.removeItem(at: digestFile.value.deletingLastPathComponent())
        }
    }

    // Opening a store: a new Updater on an existing root until installedPackages() answers
    // (the metadata loaded, the sweep done), what an app pays at launch.
    let openStore = Fixture<StoreFixture>()
    Benchmark(
        "Store open, \(storePackages) packages"
    ) { benchmark async throws in
        let store = openStore.value
        for _ in benchmark.scaledIterations {
            blackHole(try await makeUpdater(root: store.root).installedPackages())
        }
    } setup: {
        openStore.value = try await StoreFixture.make()
    } teardown: {
        openStore.value.remove()
    }

    // The app's chain: every installed package indexed from the file list the store keeps,
    // merged into one index, newest first.
    let buildChain = Fixture<StoreFixture>()
    Benchmark(
        "Build the resolver chain from the store, \(storePackages * storeFilesPerPackage) files"
    ) { benchmark async throws in
        let updater = makeUpdater(root: buildChain.value.root)
        _ = try await updater.installedPackages()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try await AssetResolverChain.make(updater: updater, bundle: nil))
        }
        benchmark.stopMeasurement()
    } setup: {
        buildChain.value = try await StoreFixture.make()
    } teardown: {
        buildChain.value.remove()
    }

    // Resolving through that chain: one iteration is one name, the names taken in turn from
    // every package (scale suffixes and extensions left for the resolver to choose).
    let resolveChain = Fixture<(store: StoreFixture, chain: AssetResolverChain)>()
    Benchmark(
        "Resolve a name through the chain of \(storePackages) packages",
        configuration: .init(scalingFactor: .kilo)
    ) { benchmark in
        let (store, chain) = resolveChain.value
        var position = 0
        for _ in benchmark.scaledIterations {
            blackHole(chain.resolve(store.names[position]))
            position = position + 1 == store.names.count ? 0 : position + 1
        }
    } setup: {
        let store = try await StoreFixture.make()
        let chain = try await AssetResolverChain.make(updater: makeUpdater(root: store.root), bundle: nil)
        resolveChain.value = (store, chain)
    } teardown: {
        resolveChain.value.store.remove()
    }
}

/// A value a benchmark's setup makes and its body and teardown read, on whichever threads
/// the harness runs them.
final class Fixture<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value?

    var value: Value {
        get {
            guard let value = lock.withLock({ stored }) else { fatalError("the benchmark's setup did not run") }
            return value
        }
        set { lock.withLock { stored = newValue } }
    }
}

/// Writes `digestFileBytes` of seeded bytes into a new temporary directory.
func writeDigestFile() throws -> URL {
    let directory = try makeWorkDirectory("digest")
    var random = SplitMix64(seed: 1)
    var bytes = [UInt8](repeating: 0, count: digestFileBytes)
    for index in stride(from: 0, to: bytes.count, by: 8) {
        withUnsafeBytes(of: random.next().littleEndian) { word in
            for offset in 0..<min(8, bytes.count - index) { bytes[index + offset] = word[offset] }
        }
    }
    let file = directory.appendingPathComponent("payload.bin")
    try Data(bytes).write(to: file)
    return file
}

/// A store with `storePackages` packages installed through the engine from `file://`, and the
/// names an app asks for.
struct StoreFixture: Sendable {
    /// The temporary directory holding the repository and the store.
    let work: URL
    /// The store's root.
    let root: URL
    /// Every package's names as an app asks for them: `img/3/p07-icon12` for `@3x.png`.
    let names: [String]

    static func make() async throws -> StoreFixture {
        let work = try makeWorkDirectory("store")
        let repository = work.appendingPathComponent("repository", isDirectory: true)
        var document = ManifestDocument()
        var names: [String] = []
        let verifier = CryptoVerifier()
        for package in 0..<storePackages {
            let id = String(format: "p%02d", package)
            let tree = repository.appendingPathComponent("trees/\(id)", isDirectory: true)
            for file in 0..<storeFilesPerPackage {
                let folder = "img/\(file % 10)"
                let path: String
                switch file % 3 {
                case 0:
                    path = "\(folder)/\(id)-icon\(file)@3x.png"
                    names.append("\(folder)/\(id)-icon\(file)")
                case 1:
                    path = "\(folder)/\(id)-icon\(file)@2x.png"
                    names.append("\(folder)/\(id)-icon\(file).png")
                default:
                    path = "data/\(id)-record\(file).json"
                    names.append(path)
                }
                let url = tree.appendingPathComponent(path)
                try FileManager.default.createDirectory(
                    at: url.deletingLastPathComponent(),
                    withIntermediateDirectories: true
                )
                try Data("\(id)/\(path)\n".utf8).write(to: url)
            }
            let archive = repository.appendingPathComponent("packages/\(id)-1.zip")
            try FileManager.default.createDirectory(
                at: archive.deletingLastPathComponent(),
                withIntermediateDirectories: true
            )
            let summary = try ZipWriter.write(directory: tree, to: archive)
            document.upsert(
                ManifestDocument.Entry(
                    id: id,
                    version: "1",
                    url: "packages/\(id)-1.zip",
                    size: summary.archiveBytes,
                    sha256: try verifier.digest(ofFile: archive, using: .sha256).hex
                )
            )
        }
        let manifest = repository.appendingPathComponent("manifest.json")
        try document.encoded().write(to: manifest)
        let root = work.appendingPathComponent("store", isDirectory: true)
        // Unsigned on purpose: the store, not the manifest, is measured.
        let source = StaticManifestSource(url: manifest, transport: FileTransport(), logger: silentLogger)
        let report = try await makeUpdater(root: root).sync(from: source)
        try report.throwIfFailed()
        return StoreFixture(work: work, root: root, names: names)
    }

    func remove() {
        try? FileManager.default.removeItem(at: work)
    }
}

/// An updater on `root` as an app makes one, logging nothing.
func makeUpdater(root: URL) -> Updater {
    var configuration = UpdaterConfiguration(
        root: root,
        transport: FileTransport(),
        unarchiver: ZipUnarchiver(),
        verifier: CryptoVerifier(),
        store: FileMetadataStore(root: root),
        logger: silentLogger
    )
    configuration.commitHooks = [NameIndexWriter()]
    return Updater(configuration: configuration)
}

/// A logger that prints nothing.
let silentLogger = Logger(label: "HotMicroBenchmarks", factory: { _ in SwiftLogNoOpLogHandler() })

/// A new, empty directory under the system's temporary directory.
func makeWorkDirectory(_ name: String) throws -> URL {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("hot-micro-\(name)-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory
}

/// SplitMix64: the same bytes on every run and machine.
struct SplitMix64 {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
