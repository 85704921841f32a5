import ArgumentParser
import Foundation
import HotCore
import HotTestServers
import HotVerify

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hot-bench check`: the check an app runs at every launch, as users run it. For each
/// catalogue size, a repository of one-file packages made by `hot keygen`, `hot pack` and
/// `hot sign`, served by nginx on 127.0.0.1, and a store that installed them all; then plain
/// `hot sync` runs with nothing changed, the sizes round-robin. Each check's wall time and
/// peak RSS come from `wait4`, the bytes from nginx's access log, and every file under the
/// root is compared before and after (size, modification time, SHA-256). Then one package
/// changes, and the bytes its check and install cost are counted. Last, the publisher's
/// commands: `hot pack` of one more package and `hot release` of it against an empty
/// repository, `hot sign` against the smallest catalogue, medians of round-robin runs.
struct CheckBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Measure the check at every launch (hot sync, nothing changed) against the catalogue's size."
    )

    @Option(help: "Catalogue sizes, comma-separated; the first is the reference.")
    var packages = "1,100,1000"

    @Option(help: "Timed checks per size (the median is reported).")
    var runs = 5

    @OptionGroup var tools: HotToolOptions

    @Flag(help: "Print the table as Markdown.")
    var markdown = false

    /// One catalogue: its repository, store and measurements.
    struct Catalogue {
        var count: Int
        var repository: URL
        var root: URL
        var manifestBytes: Int64 = 0
        var checks: [ChildOutcome] = []
        var bytes: [Int64] = []
        var rootChanged = 0
        var changedBytes: Int64 = 0
        var changedPackageBytes: Int64 = 0
        var changedRequests: [String] = []
        var packs: [Double] = []
        var releases: [Double] = []
        var signs: [Double] = []
    }

    func run() async throws {
        let sizes = packages.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !sizes.isEmpty, sizes.allSatisfy({ $0 > 0 }), runs > 0 else {
            throw ValidationError("--packages takes positive counts, --runs a positive number")
        }
        let (hot, child) = try tools.tools()
        let work = URL(fileURLWithPath: tools.workParent).appendingPathComponent("hot-bench-check-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let log = work.appendingPathComponent("hot.log").path
        let key = work.appendingPathComponent("release.pem").path
        let publicKey = work.appendingPathComponent("release.pub").path
        try hotRun(child, [hot, "keygen", "--private", key, "--public", publicKey], log)

        // The repositories, as a publisher makes them: one hot pack per package, then hot sign.
        var catalogues: [Catalogue] = []
        for count in sizes {
            let repository = work.appendingPathComponent("repo-\(count)")
            var catalogue = Catalogue(
                count: count,
                repository: repository,
                root: work.appendingPathComponent("store-\(count)")
            )
            note("hot pack of \(count) packages")
            for index in 1...count {
                let source = work.appendingPathComponent("src/p\(index)")
                try FileManager.default.createDirectory(at: source, withIntermediateDirectories: true)
                try Data("package \(index)\n".utf8).write(to: source.appendingPathComponent("p\(index).txt"))
                try hotRun(
                    child,
                    [
                        hot, "pack", source.path, "--id", "p\(index)", "--version", "1", "--repo", repository.path,
                        "--deltas", "0",
                    ],
                    log
                )
            }
            try hotRun(child, [hot, "sign", "--repo", repository.path, "--key", key, "--expires", "7d"], log)
            catalogue.manifestBytes = try size(of: repository.appendingPathComponent("manifest.json"))
            catalogues.append(catalogue)
        }
        let server = try await NginxServer.start(root: work)
        defer { server.stopNow() }
        func sync(_ catalogue: Catalogue) -> [String] {
            [
                hot, "sync", "--manifest",
                server.baseURL.appendingPathComponent("repo-\(catalogue.count)/manifest.json").absoluteString,
                "--root", catalogue.root.path, "--trust", publicKey, "--quiet",
            ]
        }
        for catalogue in catalogues {
            note("installing \(catalogue.count) packages")
            try hotRun(child, sync(catalogue), log)
            // A second check settles what the first one's answers leave to keep (validators).
            try hotRun(child, sync(catalogue), log)
        }

        // The checks, round-robin over the sizes.
        for run in 1...runs {
            for index in catalogues.indices {
                let before = try fingerprint(catalogues[index].root)
                let logged = server.requests().count
                let outcome = try hotRun(child, sync(catalogues[index]), log)
                let requests = await settledRequests(server, after: logged)
                catalogues[index].checks.append(outcome)
                catalogues[index].bytes.append(requests.reduce(0) { $0 + $1.bodyBytesSent })
                if try fingerprint(catalogues[index].root) != before { catalogues[index].rootChanged += 1 }
            }
            note(
                "run \(run): "
                    + catalogues.map { "\($0.count): \(format($0.checks.last?.seconds ?? 0))" }.joined(separator: ", ")
            )
        }

        // One package changes: what its check and install cost, against the catalogue.
        for index in catalogues.indices {
            let catalogue = catalogues[index]
            let source = work.appendingPathComponent("src/p1")
            try Data("package 1, version 2\n".utf8).write(to: source.appendingPathComponent("p1.txt"))
            try hotRun(
                child,
                [
                    hot, "pack", source.path, "--id", "p1", "--version", "2", "--repo", catalogue.repository.path,
                    "--deltas", "0",
                ],
                log
            )
            try hotRun(child, [hot, "sign", "--repo", catalogue.repository.path, "--key", key, "--expires", "7d"], log)
            let logged = server.requests().count
            try hotRun(child, sync(catalogue), log)
            let requests = await settledRequests(server, after: logged)
            catalogues[index].changedBytes = requests.reduce(0) { $0 + $1.bodyBytesSent }
            catalogues[index].changedPackageBytes = requests.filter { $0.path.contains("/packages/") }
                .reduce(0) { $0 + $1.bodyBytesSent }
            catalogues[index].changedRequests = requests.filter { !$0.path.contains("/packages/") }
                .map { "\($0.path.split(separator: "/").suffix(2).joined(separator: "/")) \($0.bodyBytesSent)" }
        }

        // The publisher: hot pack of one more package, hot release of it (a policy change) and
        // hot sign, into an empty repository and into each catalogue, `runs` times each,
        // round-robin. hot sign is compared with the first catalogue's: an empty repository
        // has nothing to sign.
        note("hot pack, hot release and hot sign of one more package, \(runs) times per repository")
        var emptyPacks: [Double] = []
        var emptyReleases: [Double] = []
        for run in 1...runs {
            let source = work.appendingPathComponent("src/extra\(run)")
            try FileManager.default.createDirectory(at: source, withIntermediateDirectories: true)
            try Data("extra \(run)\n".utf8).write(to: source.appendingPathComponent("extra.txt"))
            let empty = work.appendingPathComponent("repo-empty-\(run)")
            let pack = { (repository: URL) in
                [
                    hot, "pack", source.path, "--id", "extra\(run)", "--version", "1", "--repo", repository.path,
                    "--deltas", "0",
                ]
            }
            let release = { (repository: URL) in
                [hot, "release", "extra\(run)", "1", "--repo", repository.path, "--rollout", "50"]
            }
            let sign = { (repository: URL) in
                [hot, "sign", "--repo", repository.path, "--key", key, "--expires", "7d"]
            }
            emptyPacks.append(try hotRun(child, pack(empty), log).seconds)
            for index in catalogues.indices {
                catalogues[index].packs.append(try hotRun(child, pack(catalogues[index].repository), log).seconds)
            }
            emptyReleases.append(try hotRun(child, release(empty), log).seconds)
            for index in catalogues.indices {
                catalogues[index].releases.append(
                    try hotRun(child, release(catalogues[index].repository), log).seconds
                )
            }
            for index in catalogues.indices {
                catalogues[index].signs.append(try hotRun(child, sign(catalogues[index].repository), log).seconds)
            }
        }

        let reference = catalogues[0]
        let referenceTime = median(reference.checks.map(\.seconds))
        let referenceRSS = Double(reference.checks.map(\.peakRSS).max() ?? 1)
        var table = Table([
            ("packages", .right), ("manifest", .right), ("bytes per check", .right), ("time", .right),
            ("× \(reference.count)", .right), ("peak RSS", .right), ("× \(reference.count)", .right),
            ("root written", .left), ("one changed: bytes beyond the package", .right),
            ("hot pack of one more", .right), ("× empty", .right), ("hot release", .right), ("× empty", .right),
            ("hot sign", .right), ("× \(reference.count)", .right),
        ])
        let emptyPack = median(emptyPacks)
        let emptyRelease = median(emptyReleases)
        let referenceSign = median(reference.signs)
        for catalogue in catalogues {
            let time = median(catalogue.checks.map(\.seconds))
            let rss = catalogue.checks.map(\.peakRSS).max() ?? 0
            let beyond = catalogue.changedBytes - catalogue.changedPackageBytes
            table.add([
                "\(catalogue.count)", "\(catalogue.manifestBytes) B",
                "\(Int64(median(catalogue.bytes.map(Double.init)))) B", format(time),
                String(format: "%.2f×", time / referenceTime), String(format: "%.1f MiB", Double(rss) / 1_048_576),
                String(format: "%.2f×", Double(rss) / referenceRSS),
                catalogue.rootChanged == 0
                    ? "no (\(runs) of \(runs) untouched)" : "YES, \(catalogue.rootChanged) of \(runs)",
                "\(beyond) B (\(String(format: "%.0f%%", 100 * Double(beyond) / Double(max(1, catalogue.manifestBytes)))) of the manifest)",
                format(median(catalogue.packs)),
                String(format: "%.2f×", median(catalogue.packs) / max(emptyPack, 1e-9)),
                format(median(catalogue.releases)),
                String(format: "%.2f×", median(catalogue.releases) / max(emptyRelease, 1e-9)),
                format(median(catalogue.signs)),
                String(format: "%.2f×", median(catalogue.signs) / max(referenceSign, 1e-9)),
            ])
        }
        print(
            "the check at every launch: hot sync with nothing changed, \(runs) checks per size, round-robin; bytes are nginx's body bytes"
        )
        print(table.render(markdown: markdown))
        print(
            "into an empty repository (median of \(runs)): hot pack \(format(emptyPack)), hot release \(format(emptyRelease))"
        )
        for catalogue in catalogues {
            print(
                "\(catalogue.count) packages, one changed, what was served beside the package: "
                    + catalogue.changedRequests.joined(separator: ", ")
            )
        }
    }

    /// Runs a `hot` command; a failure stops the benchmark.
    @discardableResult
    private func hotRun(_ child: ChildProcess, _ arguments: [String], _ log: String) throws -> ChildOutcome {
        let outcome = try child.run(arguments, errorLog: log)
        guard outcome.succeeded else {
            throw HotUpdateError(
                .internalInconsistency,
                "\(arguments.dropFirst().prefix(1).joined()) failed: \(outcome.errorOutput)"
            )
        }
        return outcome
    }

    /// The requests logged after the first `count`, once nginx has logged them all (a line is
    /// written when a request ends, a moment after the client read its last byte).
    private func settledRequests(_ server: NginxServer, after count: Int) async -> [NginxServer.Request] {
        var seen = -1
        let deadline = ContinuousClock.now.advanced(by: .seconds(5))
        while ContinuousClock.now < deadline {
            let now = server.requests().count
            if now == seen { break }
            seen = now
            try? await Task.sleep(for: .milliseconds(100))
        }
        return Array(server.requests().dropFirst(count))
    }

    /// Every file and directory under `root`: size, modification time and, for files, SHA-256.
    private func fingerprint(_ root: URL) throws -> [String: String] {
        var result: [String: String] = [:]
        let verifier = CryptoVerifier()
        let enumerator = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil)
        while let url = enumerator?.nextObject() as? URL {
            var info = stat()
            guard lstat(url.path, &info) == 0 else { continue }
            let modified = "\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
            let isFile = (info.st_mode & S_IFMT) == S_IFREG
            let digest = isFile ? try verifier.digest(ofFile: url, using: .sha256).hex : "dir"
            result[url.path] = "\(info.st_size) \(modified) \(digest)"
        }
        return result
    }

    private func size(of url: URL) throws -> Int64 {
        (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.int64Value ?? 0
    }

    private func format(_ seconds: Double) -> String {
        seconds < 1 ? String(format: "%.0f ms", seconds * 1000) : String(format: "%.2f s", seconds)
    }

    private func note(_ message: String) {
        FileHandle.standardError.write(Data("hot-bench: \(message)\n".utf8))
    }
}
