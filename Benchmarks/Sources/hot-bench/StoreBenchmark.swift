import ArgumentParser
import Foundation
import HotArchive
@_spi(Benchmarks) import HotAssets
import HotCore
import HotManifest
import HotStore
import HotTestServers
import HotTransport
import HotVerify
import Logging

/// `hot-bench store`: the engine with many packages. Builds a store of 100 packages holding
/// 100,000 files through the engine, then measures how long opening it takes, how many names
/// per second resolve against it, and what syncing 100 small packages costs concurrently
/// against one after another (over nginx on 127.0.0.1 when nginx is installed, else file://).
struct StoreBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Measure store open, resolve throughput and concurrent sync with many packages."
    )

    @Option(help: "Packages in the large store.")
    var packages = 100

    @Option(help: "Files per package in the large store.")
    var filesPerPackage = 1_000

    @Option(help: "Small packages synced in the sync comparison.")
    var smallPackages = 100

    @Option(help: "Timed runs of each measurement (the median is reported).")
    var runs = 5

    @Option(help: "Packages downloaded and unpacked at once in the concurrent sync.")
    var concurrency = 8

    @Option(help: "Also sync the small packages with each connection limited to this many bytes per second (0: not).")
    var rateLimit = 0

    @Option(help: "The work directory (default: the system's temporary directory).")
    var workDir: String?

    @Option(
        help: """
            Keep the large stores in this directory and reuse them on the next run with the same \
            --packages and --files-per-package (default: a new temporary directory, removed at the end).
            """
    )
    var storeDir: String?

    @Option(help: "The hot executable for the hot resolve rows (default: beside hot-bench, .build/release/hot, PATH).")
    var hot: String?

    @Flag(help: "Leave out the sync comparison.")
    var skipSync = false

    @Flag(help: .hidden)
    var resolveOnly = false

    @Flag(help: "Print the tables as Markdown.")
    var markdown = false

    func validate() throws {
        guard packages >= 1, filesPerPackage >= 3, smallPackages >= 1, runs >= 1, concurrency >= 1, rateLimit >= 0
        else {
            throw ValidationError("counts must be positive (at least 3 files per package)")
        }
    }

    func run() async throws {
        let parent =
            workDir.map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? FileManager.default.temporaryDirectory
        let work = parent.appendingPathComponent("hot-bench-store-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let stores: URL
        if let storeDir {
            stores = URL(fileURLWithPath: storeDir, isDirectory: true)
            try FileManager.default.createDirectory(at: stores, withIntermediateDirectories: true)
        } else {
            stores = work
        }
        do {
            var table = Table([("measurement", .left), ("median", .right), ("fastest", .right), ("goal", .left)])
            var growth = Table([])
            try await measureLargeStore(in: stores, into: &table, growth: &growth)
            if !skipSync { try await measureSyncs(in: work, into: &table) }
            print(table.render(markdown: markdown))
            print()
            print(growth.render(markdown: markdown))
        } catch let error as HotUpdateError {
            FileHandle.standardError.write(Data("hot-bench: error: \(error.detailedDescription())\n".utf8))
            throw ExitCode(1)
        }
    }

    // MARK: - The large store

    /// The package counts whose growth is reported: 1, 10 and `packages` (those not above it).
    private var growthCounts: [Int] {
        Array(Set([1, 10, packages].filter { $0 <= packages })).sorted()
    }

    /// The root of the store of `count` packages.
    private func storeRoot(_ count: Int, in work: URL) -> URL {
        work.appendingPathComponent("store-\(count)x\(filesPerPackage)", isDirectory: true)
    }

    /// Writes the packages and installs a store of each of ``growthCounts`` packages through
    /// the engine, unless `work` already holds them (a kept `--store-dir`). Returns the names
    /// an app would ask for, per package.
    private func prepareStores(in work: URL, into table: inout Table) async throws -> [[String]] {
        let names = (0..<packages).map { layout(index: $0, files: filesPerPackage).map(\.name) }
        let marker = work.appendingPathComponent("stores-\(packages)x\(filesPerPackage).complete")
        if FileManager.default.fileExists(atPath: marker.path) {
            note("reusing the stores in \(work.path)")
            return names
        }
        note("writing \(packages) packages × \(filesPerPackage) files")
        let repository = work.appendingPathComponent("large-repo", isDirectory: true)
        var entries: [ManifestDocument.Entry] = []
        for index in 0..<packages {
            entries.append(try writePackage(index: index, files: filesPerPackage, in: repository, fileBytes: 96).0)
        }
        let clock = ContinuousClock()
        for count in growthCounts {
            var document = ManifestDocument()
            for entry in entries.prefix(count) { document.upsert(entry) }
            let manifest = repository.appendingPathComponent("manifest-\(count).json")
            try document.encoded().write(to: manifest)
            note("installing \(count) of them through the engine (file://)")
            let root = storeRoot(count, in: work)
            try? FileManager.default.removeItem(at: root)
            let installStart = clock.now
            let report = try await makeUpdater(root: root, transport: FileTransport(), concurrency: concurrency)
                .sync(from: StaticManifestSource(url: manifest, transport: FileTransport()))
            try report.throwIfFailed()
            if count == packages {
                table.add([
                    "install \(packages) × \(filesPerPackage) files (once)",
                    format(seconds: (clock.now - installStart).seconds), "", "",
                ])
            }
        }
        try? FileManager.default.removeItem(at: repository.appendingPathComponent("sources"))
        try Data().write(to: marker)
        return names
    }

    /// What grows with the store: for each of ``growthCounts``, the chain's ready time and
    /// resolves per second in this process, and in new processes the time from start to the
    /// first resolve and `hot resolve`, each with its peak RSS.
    private func measureGrowth(
        in work: URL,
        names: [[String]],
        into table: inout Table,
        growth: inout Table
    )
        async throws
    {
        growth = Table([
            ("packages", .right), ("files", .right), ("chain ready", .right), ("resolves/s", .right),
            ("start to first resolve", .right), ("its peak RSS", .right), ("hot resolve", .right),
            ("its peak RSS", .right),
        ])
        let hot = hotExecutable()
        if hot == nil { note("no hot executable found (--hot): hot resolve is not measured") }
        // In this process: the chain's ready time and resolves per second, per store size.
        var inProcess: [Int: (ready: (median: Double, fastest: Double), rate: (median: Double, best: Double))] = [:]
        var parallel: (median: Double, best: Double, threads: Int)?
        for count in growthCounts {
            let (ready, chain) = try await measureChain(root: storeRoot(count, in: work))
            inProcess[count] = (ready, try measureResolves(chain: chain, names: Array(names.prefix(count))))
            if count == packages {
                parallel = try measureParallelResolves(chain: chain, names: Array(names.prefix(count)))
            }
        }
        // New processes, the store sizes taken in turn round after round (so that a change of
        // the machine's load falls on every size alike), at least 11 rounds.
        let spawner = try childSpawner(errorLog: work.appendingPathComponent("child.err").path)
        var samples: [String: [ChildOutcome]] = [:]
        for _ in 0..<max(runs * 2 + 1, 11) {
            for count in growthCounts {
                let root = storeRoot(count, in: work)
                let name = names[count - 1][0]
                samples["first \(count)", default: []].append(
                    try spawner([spawner.bench, "first-resolve", "--root", root.path, name])
                )
                if let hot {
                    samples["hot \(count)", default: []].append(
                        try spawner([hot, "resolve", name, "--root", root.path])
                    )
                }
            }
        }
        func summary(_ key: String) -> (seconds: Double, rss: Double, fastest: Double, leastRSS: Double)? {
            guard let outcomes = samples[key], !outcomes.isEmpty else { return nil }
            let times = outcomes.map(\.seconds)
            let peaks = outcomes.map { Double($0.peakRSS) }
            return (median(times), median(peaks), times.min() ?? 0, peaks.min() ?? 0)
        }
        var hotByCount: [Int: (seconds: Double, rss: Double)] = [:]
        for count in growthCounts {
            guard let (ready, rate) = inProcess[count], let first = summary("first \(count)") else { continue }
            var row = [
                "\(count)", "\(count * filesPerPackage)", format(seconds: ready.median), format(rate: rate.median),
                format(seconds: first.seconds), format(bytes: first.rss),
            ]
            if let resolved = summary("hot \(count)") {
                hotByCount[count] = (resolved.seconds, resolved.rss)
                row += [format(seconds: resolved.seconds), format(bytes: resolved.rss)]
            } else {
                row += ["", ""]
            }
            growth.add(row)
            if count == packages {
                table.add([
                    "the app's chain ready (name index), \(packages * filesPerPackage) files",
                    format(seconds: ready.median), format(seconds: ready.fastest),
                    verdict(ready.median <= 0.020, "≤ 20 ms"),
                ])
                table.add([
                    "resolve through the app's chain of \(packages) packages (resolves/s)", format(rate: rate.median),
                    format(rate: rate.best), verdict(rate.median >= 2_000_000, "≥ 2,000,000/s"),
                ])
                if let parallel {
                    table.add([
                        "the same on \(parallel.threads) threads at once (resolves/s, all together)",
                        format(rate: parallel.median), format(rate: parallel.best), "",
                    ])
                }
                table.add([
                    "process start to first resolve (new process, to exit)", format(seconds: first.seconds),
                    format(seconds: first.fastest), "",
                ])
                table.add(["peak RSS of that process", format(bytes: first.rss), format(bytes: first.leastRSS), ""])
            }
        }
        if let small = hotByCount[1], let large = hotByCount[packages], packages > 1 {
            let time = large.seconds / small.seconds
            let rss = large.rss / small.rss
            table.add([
                "hot resolve, \(packages) packages against 1 (time)", String(format: "%.2f×", time),
                format(seconds: large.seconds) + " / " + format(seconds: small.seconds), verdict(time <= 1.3, "≤ 1.3×"),
            ])
            table.add([
                "hot resolve, \(packages) packages against 1 (peak RSS)", String(format: "%.2f×", rss),
                format(bytes: large.rss) + " / " + format(bytes: small.rss), verdict(rss <= 1.3, "≤ 1.3×"),
            ])
        }
    }

    /// `AssetResolverChain.make(updater:)` on a freshly opened store, `runs` times: its
    /// median and fastest time, and the last chain made.
    private func measureChain(root: URL) async throws -> ((median: Double, fastest: Double), AssetResolverChain) {
        let clock = ContinuousClock()
        var builds: [Double] = []
        var chain = AssetResolverChain([])
        for _ in 0..<runs {
            let updater = makeUpdater(root: root, transport: FileTransport(), concurrency: concurrency)
            _ = try await updater.installedPackages()  // the store open, measured on its own
            let start = clock.now
            chain = try await AssetResolverChain.make(updater: updater, bundle: nil)
            builds.append((clock.now - start).seconds)
        }
        return ((median(builds), builds.min() ?? 0), chain)
    }

    /// Resolves per second of a first sweep over every name through a chain just made, with
    /// the check of each answer's file and without it, in turns: `runs` samples of each.
    private func measureFirstAnswers(
        root: URL,
        names: [[String]]
    ) async throws -> (checked: (median: Double, best: Double), unchecked: (median: Double, best: Double)) {
        let flat = names.flatMap { $0 }
        let clock = ContinuousClock()
        var checked: [Double] = []
        var unchecked: [Double] = []
        for _ in 0..<max(runs, 3) {
            for checking in [true, false] {
                let updater = makeUpdater(root: root, transport: FileTransport(), concurrency: concurrency)
                let chain =
                    checking
                    ? try await AssetResolverChain.make(updater: updater, bundle: nil)
                    : try await AssetResolverChain.makeWithoutPresenceCheck(updater: updater, bundle: nil)
                let start = clock.now
                var hits = 0
                for name in flat where chain.resolve(name) != nil { hits += 1 }
                let seconds = (clock.now - start).seconds
                guard hits == flat.count else {
                    throw HotUpdateError(.internalInconsistency, "\(flat.count - hits) names did not resolve")
                }
                if checking {
                    checked.append(Double(flat.count) / seconds)
                } else {
                    unchecked.append(Double(flat.count) / seconds)
                }
            }
        }
        return ((median(checked), checked.max() ?? 0), (median(unchecked), unchecked.max() ?? 0))
    }

    /// Resolves per second over every name asked again (the answers kept), through a chain
    /// made with the check and one made without it, in the same run.
    private func measureAskedAgain(
        root: URL,
        names: [[String]]
    ) async throws -> (checked: (median: Double, best: Double), unchecked: (median: Double, best: Double)) {
        let updater = makeUpdater(root: root, transport: FileTransport(), concurrency: concurrency)
        let checked = try await AssetResolverChain.make(updater: updater, bundle: nil)
        let unchecked = try await AssetResolverChain.makeWithoutPresenceCheck(updater: updater, bundle: nil)
        var checkedRates: [Double] = []
        var uncheckedRates: [Double] = []
        for _ in 0..<max(runs, 3) {
            checkedRates.append(try measureResolves(chain: checked, names: names).median)
            uncheckedRates.append(try measureResolves(chain: unchecked, names: names).median)
        }
        return (
            (median(checkedRates), checkedRates.max() ?? 0), (median(uncheckedRates), uncheckedRates.max() ?? 0)
        )
    }

    /// Every name of `names` resolved through `chain`, at least two million per run. The
    /// names are made before the timed loop, as an app holds its names as constants.
    private func measureResolves(
        chain: AssetResolverChain,
        names: [[String]]
    ) throws -> (median: Double, best: Double) {
        let flat = names.flatMap { $0 }
        return try measureResolves(runs: runs) {
            var hits = 0
            for name in flat where chain.resolve(name) != nil { hits += 1 }
            return (hits, flat.count)
        }
    }

    /// The same names resolved through `chain` by every core at once, each thread its own
    /// share of the packages, timed as ``measureResolves(runs:atLeast:_:)`` times one thread
    /// (each round a sweep of all shares): the resolves per second of all threads together,
    /// and the thread count.
    private func measureParallelResolves(
        chain: AssetResolverChain,
        names: [[String]]
    ) throws -> (median: Double, best: Double, threads: Int) {
        let threads = max(ProcessInfo.processInfo.activeProcessorCount, 1)
        let shares: [[String]] = (0..<threads).map { thread in
            stride(from: thread, to: names.count, by: threads).flatMap { names[$0] }
        }
        let total = shares.reduce(0) { $0 + $1.count }
        let rate = try measureResolves(runs: runs) {
            let missed = Counter()
            DispatchQueue.concurrentPerform(iterations: threads) { thread in
                var misses = 0
                for name in shares[thread] where chain.resolve(name) == nil { misses += 1 }
                missed.add(misses)
            }
            return (total - missed.value, total)
        }
        return (rate.median, rate.best, threads)
    }

    /// A count shared by threads.
    private final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var total = 0  // guarded by `lock`
        func add(_ amount: Int) { lock.withLock { total += amount } }
        var value: Int { lock.withLock { total } }
    }

    /// Runs one command in a new process (through `hot-bench-spawn` when it is built beside
    /// hot-bench) and returns how it went, failing when it fails; `bench` is hot-bench itself.
    private struct ChildSpawner {
        let bench: String
        let child: ChildProcess
        let errorLog: String

        func callAsFunction(_ command: [String]) throws -> ChildOutcome {
            let outcome = try child.run(command, errorLog: errorLog)
            guard outcome.succeeded else {
                throw HotUpdateError(
                    .internalInconsistency,
                    "'\(command.joined(separator: " "))' failed: \(outcome.errorOutput)"
                )
            }
            return outcome
        }
    }

    private func childSpawner(errorLog: String) throws -> ChildSpawner {
        guard let executable = Bundle.main.executablePath else {
            throw HotUpdateError(.internalInconsistency, "cannot find hot-bench's own executable")
        }
        let launcher = URL(fileURLWithPath: executable).deletingLastPathComponent()
            .appendingPathComponent("hot-bench-spawn").path
        return ChildSpawner(
            bench: executable,
            child: ChildProcess(launcher: findExecutable(launcher)),
            errorLog: errorLog
        )
    }

    /// The `hot` executable: `--hot`, else one beside hot-bench, else the repository's release
    /// build, else the first on `PATH`.
    private func hotExecutable() -> String? { locateHot(hot) }

    private func measureLargeStore(in work: URL, into table: inout Table, growth: inout Table) async throws {
        let names = try await prepareStores(in: work, into: &table)
        let root = storeRoot(packages, in: work)
        if resolveOnly {
            // Only the resolves through the app's chain of the large store (for profilers).
            let (_, chain) = try await measureChain(root: root)
            let rate = try measureResolves(chain: chain, names: names)
            table.add([
                "resolve through the app's chain (resolves/s)", format(rate: rate.median), format(rate: rate.best), "",
            ])
            let parallel = try measureParallelResolves(chain: chain, names: names)
            table.add([
                "the same on \(parallel.threads) threads at once (resolves/s, all together)",
                format(rate: parallel.median), format(rate: parallel.best), "",
            ])
            return
        }
        let clock = ContinuousClock()

        var opens: [Double] = []
        var launchChecks: [Double] = []
        var installed: [InstalledPackage] = []
        for _ in 0..<runs {
            let updater = makeUpdater(root: root, transport: FileTransport(), concurrency: concurrency)
            let start = clock.now
            installed = try await updater.installedPackages()
            opens.append((clock.now - start).seconds)
            let checkStart = clock.now
            for package in installed where !(await updater.health.isAvailable(package.id)) {
                throw HotUpdateError(.internalInconsistency, "the launch check failed", packageID: package.id)
            }
            launchChecks.append((clock.now - checkStart).seconds)
        }
        let openMedian = median(opens)
        table.add([
            "store open (\(packages) packages)", format(seconds: openMedian), format(seconds: opens.min() ?? 0),
            verdict(openMedian <= 0.050, "≤ 50 ms"),
        ])
        table.add([
            "launch check, \(packages * filesPerPackage) files (isAvailable)", format(seconds: median(launchChecks)),
            format(seconds: launchChecks.min() ?? 0), verdict(median(launchChecks) <= 0.020, "≤ 20 ms"),
        ])

        // The app's chain (`AssetResolverChain.make(updater:)`): the store's name index,
        // mapped and queried in place (the file lists only when the index is missing), for
        // each store size.
        try await measureGrowth(in: work, names: names, into: &table, growth: &growth)

        // First answers: each name asked once of a chain just made, so every answer is made
        // and its file checked once (a `stat`), against the same chain with that check off:
        // what noticing deleted files costs, sampled in turns in this one run.
        let firstAnswers = try await measureFirstAnswers(root: root, names: names)
        table.add([
            "first answers, each file checked once (resolves/s)", format(rate: firstAnswers.checked.median),
            format(rate: firstAnswers.checked.best), "",
        ])
        table.add([
            "first answers, without the check (resolves/s)", format(rate: firstAnswers.unchecked.median),
            format(rate: firstAnswers.unchecked.best),
            String(format: "check costs %.2f×", firstAnswers.unchecked.median / max(firstAnswers.checked.median, 1)),
        ])
        let asked = try await measureAskedAgain(root: root, names: names)
        table.add([
            "every name asked again, checked chain (resolves/s)", format(rate: asked.checked.median),
            format(rate: asked.checked.best), verdict(asked.checked.median >= 2_000_000, "≥ 2 M/s"),
        ])
        table.add([
            "every name asked again, chain without the check (resolves/s)", format(rate: asked.unchecked.median),
            format(rate: asked.unchecked.best),
            String(format: "%.2f× the checked chain", asked.unchecked.median / max(asked.checked.median, 1)),
        ])

        // What an app's screens ask: the same names again and again, here every 100th name
        // of every package (1,000 at 100 × 1,000), so the slots and answers stay in cache.
        let (_, chain) = try await measureChain(root: root)
        let working = names.map { package in stride(from: 0, to: package.count, by: 100).map { package[$0] } }
        let workingRate = try measureResolves(chain: chain, names: working)
        table.add([
            "the same, \(working.reduce(0) { $0 + $1.count }) names from every package asked again and again",
            format(rate: workingRate.median), format(rate: workingRate.best), "",
        ])
        // A resolve hands out the answer the index kept for the file without reading it;
        // reading its URL touches the answer and the URL, memory the sweep does not otherwise
        // touch. Every name, each answer's URL asked whether it is a file URL.
        let flat = names.flatMap { $0 }
        let withURLs = try measureResolves(runs: runs) {
            var hits = 0
            for name in flat where chain.resolve(name)?.url.isFileURL == true { hits += 1 }
            return (hits, flat.count)
        }
        table.add([
            "resolve through the app's chain, each answer's URL read (resolves/s)", format(rate: withURLs.median),
            format(rate: withURLs.best), "",
        ])

        // For comparison: one resolver per package from walking its tree, each asked alone
        // (as resource packs are addressed) and chained without merging.
        let byID = Dictionary(uniqueKeysWithValues: installed.map { ($0.id, $0) })
        let indexStart = clock.now
        var resolvers: [DirectoryAssetResolver] = []
        for index in 0..<packages {
            guard let package = byID[packageID(index)] else {
                throw HotUpdateError(.notFound, "not installed", packageID: packageID(index))
            }
            resolvers.append(
                try DirectoryAssetResolver(
                    directory: package.directory,
                    origin: .package(id: package.id, version: package.version)
                )
            )
        }
        table.add([
            "index \(packages * filesPerPackage) files by walking the trees (once)",
            format(seconds: (clock.now - indexStart).seconds), "", "",
        ])

        let perPackage = try measureResolves(runs: runs) {
            var hits = 0
            for (index, resolver) in resolvers.enumerated() {
                for name in names[index] where resolver.resolve(name) != nil { hits += 1 }
            }
            return (hits, packages * filesPerPackage)
        }
        table.add([
            "resolve in the owning package (resolves/s)", format(rate: perPackage.median),
            format(rate: perPackage.best), "",
        ])

        // Asking each package in turn, as a chain did before merging: a name in package k is
        // looked up in the k packages before it first. Names are sampled evenly.
        let unmerged = UnmergedChain(resolvers: resolvers)
        let sample = stride(from: 0, to: packages, by: max(1, packages / 10)).flatMap { names[$0].prefix(1_000) }
        let chained = try measureResolves(runs: runs, atLeast: 200_000) {
            var hits = 0
            for name in sample where unmerged.resolve(name) != nil { hits += 1 }
            return (hits, sample.count)
        }
        table.add([
            "resolve asking \(packages) packages in turn (resolves/s)", format(rate: chained.median),
            format(rate: chained.best), "",
        ])
    }

    /// Runs `body` until it has resolved at least `minimum` names per run; resolves per second.
    private func measureResolves(
        runs: Int,
        atLeast minimum: Int = 2_000_000,
        _ body: () -> (hits: Int, asked: Int)
    ) throws -> (median: Double, best: Double) {
        let clock = ContinuousClock()
        var rates: [Double] = []
        for _ in 0..<runs {
            var asked = 0
            let start = clock.now
            while asked < minimum {
                let result = body()
                guard result.hits == result.asked else {
                    throw HotUpdateError(
                        .internalInconsistency,
                        "\(result.asked - result.hits) of \(result.asked) names did not resolve"
                    )
                }
                asked += result.asked
            }
            rates.append(Double(asked) / (clock.now - start).seconds)
        }
        return (median(rates), rates.max() ?? 0)
    }

    // MARK: - Syncing many small packages

    private func measureSyncs(in work: URL, into table: inout Table) async throws {
        let repository = work.appendingPathComponent("small-repo", isDirectory: true)
        var document = ManifestDocument()
        for index in 0..<smallPackages {
            document.upsert(try writePackage(index: index, files: 20, in: repository, fileBytes: 2_048).0)
        }
        try document.encoded().write(to: repository.appendingPathComponent("manifest.json"))

        try await measureSyncs(from: repository, rateLimit: nil, in: work, into: &table)
        if rateLimit > 0 {
            try await measureSyncs(from: repository, rateLimit: rateLimit, in: work, into: &table)
        }
    }

    /// Syncs the small packages one after another and then `concurrency` at once, from nginx
    /// (each connection limited to `rateLimit` bytes per second when given) or from file://.
    private func measureSyncs(
        from repository: URL,
        rateLimit: Int?,
        in work: URL,
        into table: inout Table
    )
        async throws
    {
        let server: NginxServer?
        do {
            let locations = rateLimit.map {
                [NginxServer.Location.rateLimited(prefix: "/packages/", bytesPerSecond: $0)]
            }
            server = try await NginxServer.start(root: repository, options: .init(locations: locations ?? []))
        } catch {
            guard rateLimit == nil else {
                note("nginx is not available (\(error)); no rate-limited sync")
                return
            }
            note("nginx is not available (\(error)); syncing from file://")
            server = nil
        }
        let manifestURL =
            server?.baseURL.appendingPathComponent("manifest.json")
            ?? repository.appendingPathComponent("manifest.json")
        var over = server == nil ? "file://" : "nginx 127.0.0.1"
        if let rateLimit { over += " at \(rateLimit / 1024) KiB/s per connection" }
        func transport() -> any Transport {
            #if canImport(CHotCurl)
            if server != nil { return CurlTransport() }
            #else
            if server != nil { return URLSessionTransport() }
            #endif
            return FileTransport()
        }

        // The two ways taken in turn, run after run, each from a clean page cache (the
        // previous run's writes and deletions flushed first): neither inherits the other's
        // write-back, and a change of the machine's load falls on both alike.
        let ways = [("one after another", 1), ("\(concurrency) at once", concurrency)]
        note(
            "syncing \(smallPackages) small packages over \(over), \(ways.map(\.0).joined(separator: " and ")) in turn"
        )
        var timings: [(String, [Double])] = ways.map { ($0.0, []) }
        for run in 0..<runs {
            for (position, (_, width)) in ways.enumerated() {
                let root = work.appendingPathComponent("small-store-\(width)-\(run)", isDirectory: true)
                let updater = makeUpdater(root: root, transport: transport(), concurrency: width)
                sync()
                let clock = ContinuousClock()
                let start = clock.now
                try await updater.sync(from: StaticManifestSource(url: manifestURL, transport: transport()))
                    .throwIfFailed()
                timings[position].1.append((clock.now - start).seconds)
                try? FileManager.default.removeItem(at: root)
            }
        }
        await server?.stop()
        let sequential = median(timings[0].1)
        for (label, seconds) in timings {
            let ratio = median(seconds) / sequential
            table.add([
                "sync \(smallPackages) small packages over \(over), \(label)",
                format(seconds: median(seconds)) + String(format: " (%.2f×)", ratio),
                format(seconds: seconds.min() ?? 0),
                "",
            ])
        }
    }

    // MARK: - Helpers

    private func packageID(_ index: Int) -> String { String(format: "pack%03d", index) }

    /// Writes one package's tree (scale variants of images and some JSON; names and bytes
    /// differ from package to package, so a chain must look past the packages that lack a name), packs it into `repository/packages/`, and returns its manifest entry and the
    /// names an app would ask for.
    private func writePackage(
        index: Int,
        files: Int,
        in repository: URL,
        fileBytes: Int
    ) throws
        -> (ManifestDocument.Entry, [String])
    {
        let id = packageID(index)
        let source = repository.appendingPathComponent("sources/\(id)", isDirectory: true)
        var names: [String] = []
        for (file, item) in layout(index: index, files: files).enumerated() {
            let path = item.path
            names.append(item.name)
            let url = source.appendingPathComponent(path)
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(),
                withIntermediateDirectories: true
            )
            // The name, then seeded random bytes: every file differs and nothing compresses,
            // so an archive is as large as its files.
            var bytes = Data("\(id)/\(path)\n".utf8)
            if bytes.count < fileBytes {
                var random = SeededRandom(seed: UInt64(index) << 32 | UInt64(file))
                var tail = Data(count: fileBytes - bytes.count)
                tail.withUnsafeMutableBytes { random.fill($0) }
                bytes.append(tail)
            }
            try bytes.write(to: url)
        }
        let archive = repository.appendingPathComponent("packages/\(id)-1.zip")
        try FileManager.default.createDirectory(
            at: archive.deletingLastPathComponent(),
            withIntermediateDirectories: true
        )
        _ = try ZipWriter.write(directory: source, to: archive)
        let verifier = CryptoVerifier()
        let entry = ManifestDocument.Entry(
            id: id,
            version: "1",
            url: "packages/\(id)-1.zip",
            size: Int64(try Data(contentsOf: archive).count),
            sha256: try verifier.digest(ofFile: archive, using: .sha256).hex
        )
        return (entry, names)
    }

    /// The paths of package `index`'s files and the name an app asks for each (the same on
    /// every run, so kept stores are asked the same names).
    private func layout(index: Int, files: Int) -> [(path: String, name: String)] {
        let id = packageID(index)
        return (0..<files).map { file in
            let folder = "img/\(file % 10)"
            switch file % 3 {
            case 0: return ("\(folder)/\(id)-icon\(file)@3x.png", "\(folder)/\(id)-icon\(file)")
            case 1: return ("\(folder)/\(id)-icon\(file)@2x.png", "\(folder)/\(id)-icon\(file).png")
            default:
                let path = "data/\(file % 7)/\(id)-record\(file).json"
                return (path, path)
            }
        }
    }

    private func makeUpdater(root: URL, transport: any Transport, concurrency: Int) -> Updater {
        var configuration = UpdaterConfiguration(
            root: root,
            transport: transport,
            unarchiver: ZipUnarchiver(),
            verifier: CryptoVerifier(),
            store: FileMetadataStore(root: root),
            maxConcurrentPackages: concurrency,
            logger: Logger(label: "hot-bench", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        configuration.commitHooks = [NameIndexWriter()]
        return Updater(configuration: configuration)
    }

    private func format(seconds: Double) -> String {
        seconds < 1 ? String(format: "%.1f ms", seconds * 1000) : String(format: "%.2f s", seconds)
    }

    private func format(bytes: Double) -> String {
        String(format: "%.1f MB", bytes / 1e6)
    }

    private func format(rate: Double) -> String {
        String(format: "%.2f M/s", rate / 1_000_000)
    }

    private func verdict(_ met: Bool, _ goal: String) -> String {
        "\(goal): \(met ? "met" : "MISSED")"
    }

    private func note(_ message: String) {
        FileHandle.standardError.write(Data("hot-bench: \(message)\n".utf8))
    }
}

/// Asks its resolvers one after another, as an unmerged chain does: the baseline the
/// merged chain is compared with.
private struct UnmergedChain {
    let resolvers: [DirectoryAssetResolver]

    func resolve(_ name: String) -> ResolvedAsset? {
        for resolver in resolvers {
            if let asset = resolver.resolve(name) { return asset }
        }
        return nil
    }
}

extension Duration {
    /// The duration in seconds.
    fileprivate var seconds: Double {
        let (whole, fraction) = components
        return Double(whole) + Double(fraction) / 1e18
    }
}

/// `hot-bench first-resolve --root STORE NAME`: opens the store, makes the app's chain
/// (`AssetResolverChain.make(updater:)`) and resolves one name, failing when it does not
/// resolve: what an app does before it draws its first asset, timed by the parent.
struct FirstResolve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "first-resolve",
        abstract: "Open a store and resolve one name (used by the benchmark).",
        shouldDisplay: false
    )

    @Option(help: "The store's root.")
    var root: String

    @Argument(help: "The name to resolve.")
    var name: String

    func run() async throws {
        let rootURL = URL(fileURLWithPath: root, isDirectory: true)
        var configuration = UpdaterConfiguration(
            root: rootURL,
            transport: FileTransport(),
            unarchiver: ZipUnarchiver(),
            verifier: CryptoVerifier(),
            store: FileMetadataStore(root: rootURL),
            logger: Logger(label: "hot-bench", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        configuration.commitHooks = [NameIndexWriter()]
        let updater = Updater(configuration: configuration)
        let chain = try await AssetResolverChain.make(updater: updater, bundle: nil, rebuildingIndex: false)
        guard chain.resolve(name) != nil else {
            FileHandle.standardError.write(Data("hot-bench first-resolve: \(name) does not resolve\n".utf8))
            throw ExitCode(1)
        }
    }
}
