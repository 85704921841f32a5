// Resource packs, as a camera or editing app downloads them: zip packs of overlays,
// filters, images and fonts listed in each pack's index.json, published as on-demand packages
// of a signed manifest, installed when a screen first asks for them (from many screens at
// once), sharing files, cancelled, checked, repaired, deleted and evicted under a budget.
//
//     ResourcePacks <manifest-url> --key PUBLIC_KEY.pem [--root DIR] [--requests N]
//
// `ResourcePacks --help` says what each argument means.

import ArgumentParser
import Foundation
import HotUpdate
import Logging

struct ExampleError: Error, CustomStringConvertible {
    let description: String
}

/// The pack the app ships in its bundle.
let bundledPack = "starter"

/// The example's command line.
@main
struct ResourcePacksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ResourcePacks",
        abstract: "Install, share, cancel, check, repair, delete and evict on-demand resource packs.",
        discussion: """
            <manifest-url> is an http(s):// or file:// URL of the signed manifest.json that \
            `make-repository` (beside this example's source) publishes, every pack in it on \
            demand; --key is the public key it is signed with. One pack ships inside the app \
            (bundle:///packs/starter.zip).
            """
    )

    @Argument(help: ArgumentHelp("The signed manifest's URL (http, https or file).", valueName: "manifest-url"))
    var manifest: String

    @Option(help: ArgumentHelp("The public key (PEM) the manifest is signed with.", valueName: "file"))
    var key: String

    @Option(
        help: ArgumentHelp(
            "The store's directory (default: ResourcePacks-store in the temporary directory).",
            valueName: "dir"
        )
    )
    var root: String?

    @Option(help: "How many screens ask for the same pack at once.")
    var requests = 20

    func validate() throws {
        guard manifestURL != nil else { throw ValidationError("'\(manifest)' is not a URL") }
        guard requests > 0 else { throw ValidationError("--requests needs a positive number") }
    }

    /// The manifest's URL, when it has a scheme.
    var manifestURL: URL? {
        URL(string: manifest).flatMap { $0.scheme == nil ? nil : $0 }
    }

    func run() async throws {
        do {
            try await runExample(Arguments(self))
        } catch {
            FileHandle.standardError.write(Data("ResourcePacks: error: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }
}

struct Arguments {
    var manifest: URL
    var key: PublicKey
    var root: URL
    var requests: Int

    init(_ command: ResourcePacksCommand) throws {
        guard let url = command.manifestURL else {
            throw ExampleError(description: "'\(command.manifest)' is not a URL")
        }
        manifest = url
        key = try CryptoVerifier.publicKey(pem: try String(contentsOfFile: command.key, encoding: .utf8))
        root =
            (command.root.map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("ResourcePacks-store"))
            .standardizedFileURL
        requests = command.requests
    }
}

/// Counts the archives fetched, to show that many requests make one download.
actor FetchCounter {
    private var counts: [String: Int] = [:]
    func record(_ url: URL) { counts[url.lastPathComponent, default: 0] += 1 }
    func count(_ name: String) -> Int { counts[name] ?? 0 }
    /// The fetches of archives whose name starts with `prefix` (`hot pack` names them
    /// `ID-VERSION-SHA.zip`).
    func count(prefix: String) -> Int { counts.filter { $0.key.hasPrefix(prefix) }.values.reduce(0, +) }
}

struct CountingTransport: Transport {
    let inner: any Transport
    let counter: FetchCounter

    func fetch(_ request: TransportRequest) async throws -> TransportResponse {
        if request.url.pathExtension == "zip" { await counter.record(request.url) }
        return try await inner.fetch(request)
    }
}

/// What `events()` told, per pack: the states in order and the last progress.
actor EventLog {
    private var states: [String: [PackageState]] = [:]
    private var progress: [String: UpdateEvent.PackageProgress] = [:]
    private var progressEvents: [String: Int] = [:]

    func record(_ event: UpdateEvent) {
        switch event {
        case .state(let change): states[change.id, default: []].append(change.state)
        case .progress(let update):
            progress[update.id] = update
            progressEvents[update.id, default: 0] += 1
        case .overall, .deltaFallback: break
        }
    }

    func bytesReceived(_ id: String) -> Int64 { progress[id]?.bytesReceived ?? 0 }

    /// One line per pack: its states, and how far its last progress event got.
    func summary(_ id: String) -> String {
        let path = (states[id] ?? []).map(\.description).joined(separator: " → ")
        guard let last = progress[id] else { return "\(id): \(path)" }
        let bytes = last.bytesExpected.map { "\(last.bytesReceived)/\($0) bytes" } ?? "\(last.bytesReceived) bytes"
        let files = last.filesTotal.map { "\(last.filesUnpacked)/\($0) files" } ?? "\(last.filesUnpacked) files"
        return "\(id): \(path); \(progressEvents[id] ?? 0) progress events, last \(bytes), \(files)"
    }
}

/// The path of `url` under `root`, for printing.
func relative(_ url: URL, to root: URL) -> String {
    let path = url.standardizedFileURL.path
    let prefix = root.path + "/"
    return path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path
}

/// The regular files under `directory`: relative path → (size, inode).
func files(under directory: URL) throws -> [String: (size: Int64, inode: UInt64)] {
    var result: [String: (size: Int64, inode: UInt64)] = [:]
    guard let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else {
        return result
    }
    for case let url as URL in walker {
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        guard attributes[.type] as? FileAttributeType == .typeRegular else { continue }
        let size = (attributes[.size] as? NSNumber)?.int64Value ?? 0
        let inode = (attributes[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0
        result[relative(url, to: directory)] = (size, inode)
    }
    return result
}

func describe(_ error: any Error) -> String {
    if let error = error as? HotUpdateError { return "\(error.code): \(error)" }
    if error is CancellationError { return "cancelled" }
    return "\(error)"
}

func runExample(_ arguments: Arguments) async throws {
    guard let bundle = Bundle.module.url(forResource: "Bundle", withExtension: nil) else {
        throw ExampleError(description: "the example's bundle is missing from its resources")
    }
    let counter = FetchCounter()
    let routing = SchemeRoutingTransport(
        http: SchemeRoutingTransport.platformHTTP(),
        file: FileTransport(bundleRoot: bundle)
    )
    let transport = CountingTransport(inner: routing, counter: counter)
    var logger = Logger(label: "ResourcePacks")
    logger.logLevel = .error
    // The standard parts under the store root, the one place it is named; packs are counted
    // as they are fetched.
    let configuration = UpdaterConfiguration.standard(root: arguments.root, transport: transport, logger: logger)
    let root = configuration.root
    let updater = Updater(configuration: configuration)

    // Progress and states, from every pack, as the app's UI would show them.
    let log = EventLog()
    let events = updater.events()
    let listener = Task { for await event in events { await log.record(event) } }
    defer { listener.cancel() }

    // The signed manifest offers every pack on demand: a sync checks it and records what it
    // offers, and downloads none of them.
    let source = SignedManifestSource(
        url: arguments.manifest,
        transport: routing,
        verifier: CryptoVerifier(),
        trust: .signed(by: [arguments.key]),
        storeRoot: configuration.root,
        logger: logger
    )
    let sync = try await updater.sync(from: source)
    let offered = try await updater.offeredPackages()
    let notRequested = sync.packages.filter { $0.change == .notRequested }.count
    let manifestVersion = sync.manifestVersion.map { String($0) } ?? "-"
    print(
        "sync: manifest \(manifestVersion), \(notRequested) on-demand packs offered, \(sync.bytesDownloaded) bytes downloaded"
    )
    for pack in offered.sorted(by: { $0.id < $1.id }) {
        print("  \(pack.id): \(pack.delivery), \(pack.size ?? 0) bytes")
    }
    guard let fonts = offered.first(where: { $0.id == "fonts" }), let large = offered.first(where: { $0.id == "3002" }),
        let filters = offered.first(where: { $0.id == "3001" }),
        let bundledURL = URL(string: "bundle:///packs/\(bundledPack).zip")
    else { throw ExampleError(description: "the manifest lacks one of the packs 3001, 3002, fonts") }
    // The pack shipped in the app's bundle is described by the app itself.
    let starter = try PackageDescriptor(id: bundledPack, version: "1", url: bundledURL)

    // 1. Many screens ask for the same pack at once: one download, one unpack.
    let requests = arguments.requests
    let directories = try await withThrowingTaskGroup(of: URL.self) { group in
        for _ in 0..<requests { group.addTask { try await updater.install(id: "3000").directory } }
        return try await group.reduce(into: Set<URL>()) { $0.insert($1) }
    }
    print(
        "\(requests) concurrent requests for 3000: \(await counter.count(prefix: "3000-")) download, "
            + "every caller got \(directories.map { relative($0, to: root) }.sorted().joined(separator: ", "))"
    )

    // 2. An encrypted pack, its password in the signed manifest. A copy of its descriptor
    // with another password fails and installs nothing.
    var wrong = fonts
    wrong.password = "not-the-password"
    do {
        _ = try await updater.install(wrong)
        print("fonts with a wrong password: installed (unexpected)")
    } catch {
        print(
            "fonts with a wrong password: \(describe(error)); available: \(await updater.health.isAvailable("fonts"))"
        )
    }

    // A pack the signed manifest does not offer is refused: nothing enters from elsewhere.
    do {
        _ = try await updater.install(id: "4000")
        print("4000: installed (unexpected)")
    } catch {
        print("4000: \(describe(error))")
    }

    // 3. The other packs together, one from the app's bundle.
    try await withThrowingTaskGroup(of: Void.self) { group in
        for id in ["3001", "fonts"] { group.addTask { _ = try await updater.install(id: id) } }
        group.addTask { _ = try await updater.install(starter) }
        try await group.waitForAll()
    }
    for id in ["3000", "3001", "fonts", bundledPack] { print("  events \(await log.summary(id))") }

    // 4. Shared files are stored once: the two trees link the same objects.
    let installed = try await updater.installedPackages()
    func tree(_ id: String) throws -> [String: (size: Int64, inode: UInt64)] {
        guard let package = installed.first(where: { $0.id == id }) else {
            throw ExampleError(description: "pack \(id) is not installed")
        }
        return try files(under: package.directory)
    }
    let both = try Array(tree("3000").values) + Array(tree("3001").values)
    let logical = both.reduce(Int64(0)) { $0 + $1.size }
    var seen = Set<UInt64>()
    let stored = both.reduce(Int64(0)) { seen.insert($1.inode).inserted ? $0 + $1.size : $0 }
    print(
        "3000 + 3001: \(both.count) files, \(logical) bytes in their trees, \(stored) bytes stored "
            + "(\(both.count - seen.count) shared files stored once, \(logical - stored) bytes saved)"
    )

    // 5. Name → local file URL for each type, from each pack's index.json.
    let library = ResourcePackResolver().open(installed)
    for (id, error) in library.failures.sorted(by: { $0.key < $1.key }) { print("  pack \(id) refused: \(error)") }
    for pack in library.packs.sorted(by: { $0.packageID < $1.packageID }) {
        for (type, resources) in pack.resources.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            for (name, url) in resources.sorted(by: { $0.key < $1.key }) {
                print("  resolve \(pack.packageID) \(type) \(name) -> \(relative(url, to: root))")
            }
        }
    }

    // 6. Availability, as a screen checks before it draws.
    print(
        "available: 3000 \(await updater.health.isAvailable("3000")), 3002 \(await updater.health.isAvailable("3002"))"
    )
    print(
        "available: 3000/blend.jpg \(await updater.health.isAvailable(resource: "blend.jpg", in: "3000")), "
            + "3000/missing.jpg \(await updater.health.isAvailable(resource: "missing.jpg", in: "3000"))"
    )

    // 7. Cancel one pack while it downloads: nothing half-installed, and a later request starts afresh.
    let first = Task { try await updater.install(id: "3002") }
    var waited = 0
    while await log.bytesReceived("3002") == 0, waited < 2000 {
        try await Task.sleep(for: .milliseconds(5))
        waited += 1
    }
    await updater.cancel(packageID: "3002")
    switch await first.result {
    case .success: print("cancel 3002: it finished before the cancel")
    case .failure(let error):
        print("cancel 3002: \(describe(error)); available: \(await updater.health.isAvailable("3002"))")
    }
    // Two screens ask again; one leaves, the other still gets the pack. The one that stays
    // asks first and its download has begun before the other asks and leaves, so the
    // leaving caller never owns the flight alone.
    let requestsBefore = await counter.count(large.url.lastPathComponent)
    let staying = Task { try await updater.install(id: "3002") }
    waited = 0
    while await counter.count(large.url.lastPathComponent) == requestsBefore, waited < 2000 {
        try await Task.sleep(for: .milliseconds(5))
        waited += 1
    }
    let leaving = Task { try await updater.install(id: "3002") }
    leaving.cancel()
    let leavingResult = await leaving.result
    let kept = try await staying.value
    print(
        "3002 again: the caller that left got \((try? leavingResult.get()) == nil ? "cancelled" : "the pack"), "
            + "the other got \(relative(kept.directory, to: root)); available: \(await updater.health.isAvailable("3002"))"
    )

    // 8. Self-repair: a file deleted behind the app's back comes back from objects/, no download.
    guard let sepia = library.pack(packageID: "3001")?.url(for: "sepia.png", type: .filter) else {
        throw ExampleError(description: "3001 has no sepia.png filter")
    }
    let original = try Data(contentsOf: sepia)
    try FileManager.default.removeItem(at: sepia)
    let health = try await updater.health.verify(packageID: "3001", depth: .quick)
    print("verify 3001: missing \(health.missing.joined(separator: ", ")); state \(health.state)")
    let downloadsBefore = await counter.count(filters.url.lastPathComponent)
    let repair = try await updater.health.repair(packageID: "3001")
    let same = (try? Data(contentsOf: sepia)) == original
    print(
        "repair 3001: restored \(repair.restored.joined(separator: ", ")), downloads \(await counter.count(filters.url.lastPathComponent) - downloadsBefore), "
            + "identical \(same), healthy \(repair.after.isHealthy)"
    )

    // 9. Delete one pack: only what nothing else links is freed; the pack sharing files stays whole.
    let freed = try await updater.remove(packageID: "3000")
    let afterDelete = try await updater.health.verify(packageID: "3001", depth: .full)
    print(
        "delete 3000: \(freed.objectsRemoved) objects, \(freed.bytesFreed) bytes freed; "
            + "3001 healthy \(afterDelete.isHealthy) (\(afterDelete.filesChecked) files hashed)"
    )

    // 10. A storage budget: with none to spare, every on-demand pack not open goes, least
    // recently used first; the open one and the bundled one stay. Asked again, a pack comes back.
    updater.beginUsing(packageID: "3001")
    let eviction = try await updater.evictOnDemandPacks(budget: OnDemandBudget(maxBytes: 0))
    updater.endUsing(packageID: "3001")
    print(
        "evict (budget 0, 3001 open): \(eviction.evicted.joined(separator: ", ")); "
            + "\(eviction.garbage.objectsRemoved) objects, \(eviction.garbage.bytesFreed) bytes freed"
    )
    let fontsBefore = await counter.count(prefix: "fonts-")
    let again = try await updater.install(id: "fonts")
    let fontsFetched = await counter.count(prefix: "fonts-") - fontsBefore
    print("fonts asked again: \(relative(again.directory, to: root)), downloaded again \(fontsFetched)")

    print("states:")
    let snapshot = try await updater.currentSnapshot()
    for record in snapshot.packages.values.sorted(by: { $0.id < $1.id }) {
        print("  \(record.id) \(record.active?.version ?? "-") \(record.state)")
    }
}
