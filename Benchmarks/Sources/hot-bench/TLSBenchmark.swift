import ArgumentParser
import Foundation
import HotCore
import HotTestServers

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hot-bench tls`: what HTTPS costs an install. `hot pack` makes a repository of the corpus;
/// two nginx servers on 127.0.0.1 serve it, one over plain HTTP and one over HTTPS under a
/// private CA's certificate; `hot sync --transport curl` installs it from each in turn
/// (round-robin, a fresh store on tmpfs each time), and the medians' ratio is compared with
/// the goal: TLS at most 10% slower. nginx's access log tells how many connections each sync
/// opened: the manifest and the package share one when handles are reused.
struct TLSBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tls",
        abstract: "Measure hot sync over HTTPS against plain HTTP, same corpus, same run."
    )

    @Option(help: "The corpus: small (20 MB / 300 files) or large (200 MB / 3,000 files).")
    var size = "large"

    @Option(help: "Timed runs of each (the median is reported), after one checked run of each.")
    var runs = 5

    @Option(help: "The `hot` executable; beside hot-bench, the repository's release build, or on PATH when omitted.")
    var hot: String?

    @Option(help: "The directory the stores are written in (tmpfs by default).")
    var storeDir = "/dev/shm"

    @Option(help: "The on-disk work directory for the corpus and the repository.")
    var workDir: String?

    @Flag(help: "Print the table as Markdown.")
    var markdown = false

    /// The goal: TLS costs at most this much more than plain HTTP.
    static let goal = 1.10

    func run() async throws {
        guard let spec = CorpusSpec.all.first(where: { $0.name == size }) else {
            throw ValidationError("--size is small or large")
        }
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
        guard let hot = hotExecutable() else {
            throw ValidationError("no hot executable: build it (swift build -c release --product hot) or pass --hot")
        }
        let bench = Bundle.main.executablePath ?? "hot-bench"
        let launcher = URL(fileURLWithPath: bench).deletingLastPathComponent().appendingPathComponent("hot-bench-spawn")
            .path
        let child = ChildProcess(launcher: FileManager.default.isExecutableFile(atPath: launcher) ? launcher : nil)

        let work = URL(fileURLWithPath: workDir ?? FileManager.default.temporaryDirectory.path)
            .appendingPathComponent("hot-bench-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let stores = URL(fileURLWithPath: storeDir).appendingPathComponent("hot-bench-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: stores, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: stores) }
        let log = work.appendingPathComponent("stderr.log").path

        note("generating the \(spec.name) corpus")
        let corpus = try Corpus.generate(spec, at: work.appendingPathComponent("corpus"))
        let repository = work.appendingPathComponent("repo")
        note("hot pack")
        let packed = try child.run(
            [hot, "pack", corpus.root.path, "--id", "p", "--version", "1", "--repo", repository.path],
            errorLog: log
        )
        guard packed.succeeded else {
            throw HotUpdateError(.internalInconsistency, "hot pack failed: \(packed.errorOutput)")
        }

        let authority = try TestCertificateAuthority.make(name: "hot-bench CA")
        defer { authority.remove() }
        let certificate = try authority.issue("server", hosts: ["127.0.0.1"])
        let plain = try await NginxServer.start(root: repository)
        let secure = try await NginxServer.start(root: repository, options: .init(tls: .init(certificate)))
        let servers: [(name: String, server: NginxServer, extra: [String])] = [
            ("http", plain, []),
            ("https", secure, ["--ca-file", authority.certificate.path]),
        ]

        var outcomes: [String: [ChildOutcome]] = [:]
        var connections: [String: Set<Int>] = [:]
        for run in 0...runs {
            for (name, server, extra) in servers {
                let root = stores.appendingPathComponent("\(name)-\(run)")
                let before = server.requests().count
                sync()
                let outcome = try child.run(
                    [
                        hot, "sync", "--manifest",
                        server.baseURL.appendingPathComponent("manifest.json").absoluteString,
                        "--root", root.path, "--allow-unsigned", "--quiet", "--transport", "curl",
                    ] + extra,
                    errorLog: log
                )
                guard outcome.succeeded else {
                    throw HotUpdateError(.internalInconsistency, "hot sync over \(name) failed: \(outcome.errorOutput)")
                }
                if run == 0 {
                    try check(root: root, corpus: corpus, name: name)
                    // nginx logs a request when it ends, a moment after the client has read it.
                    for _ in 0..<100 where server.requests().count < before + 2 {
                        try await Task.sleep(for: .milliseconds(20))
                    }
                    let sync = server.requests().dropFirst(before)
                    connections[name] = Set(sync.map(\.connection))
                    note("\(name): \(sync.count) request(s) on \(connections[name]?.count ?? 0) connection(s)")
                } else {
                    outcomes[name, default: []].append(outcome)
                }
                try? FileManager.default.removeItem(at: root)
                note("\(name) run \(run): \(format(outcome.seconds))")
            }
        }
        await plain.stop()
        await secure.stop()

        let plainMedian = median(outcomes["http", default: []].map(\.seconds))
        let secureMedian = median(outcomes["https", default: []].map(\.seconds))
        let ratio = secureMedian / plainMedian
        let goal = Goal(
            statement: "hot sync over HTTPS ≤ \(String(format: "%.2f", Self.goal))× plain HTTP",
            measured: String(format: "%.3f×", ratio),
            met: ratio <= Self.goal
        )
        var table = Table([
            ("transport", .left), ("median", .right), ("fastest", .right), ("peak RSS", .right),
            ("connections per sync", .right), ("× http", .right),
        ])
        for name in ["http", "https"] {
            let samples = outcomes[name, default: []]
            table.add([
                "hot sync, \(name)", format(median(samples.map(\.seconds))), format(samples.map(\.seconds).min() ?? 0),
                String(format: "%.1f MiB", Double(samples.map(\.peakRSS).max() ?? 0) / 1_048_576),
                String(connections[name]?.count ?? 0),
                String(format: "%.3f", median(samples.map(\.seconds)) / plainMedian),
            ])
        }
        print(
            "package: \(spec.title), packed by hot pack; stores on \(storeDir); \(runs) timed runs after one checked run"
        )
        print(table.render(markdown: markdown))
        print("goal: \(goal.statement): \(goal.measured) \(goal.verdict)")
    }

    /// The first install of each server is compared byte for byte with the corpus.
    private func check(root: URL, corpus: Corpus, name: String) throws {
        let installed = root.appendingPathComponent("packages/p")
        guard let version = ((try? FileManager.default.contentsOfDirectory(atPath: installed.path)) ?? []).first else {
            throw HotUpdateError(.internalInconsistency, "nothing installed over \(name)")
        }
        if let problem = TreeCheck.compare(installed.appendingPathComponent(version).path, with: corpus, check: .bytes)
        {
            throw HotUpdateError(.internalInconsistency, "the install over \(name) differs from the corpus: \(problem)")
        }
    }

    /// `--hot`, else `hot` beside hot-bench, else the repository's release build, else `PATH`'s.
    private func hotExecutable() -> String? {
        let fileManager = FileManager.default
        if let hot { return fileManager.isExecutableFile(atPath: hot) ? hot : nil }
        var candidates: [String] = []
        if let executable = Bundle.main.executablePath {
            candidates.append(
                URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent("hot").path
            )
        }
        candidates.append(fileManager.currentDirectoryPath + "/.build/release/hot")
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            candidates.append("\(directory)/hot")
        }
        return candidates.first { fileManager.isExecutableFile(atPath: $0) }
    }

    private func format(_ seconds: Double) -> String {
        seconds < 1 ? String(format: "%.0f ms", seconds * 1000) : String(format: "%.3f s", seconds)
    }

    private func note(_ message: String) {
        FileHandle.standardError.write(Data("hot-bench: \(message)\n".utf8))
    }
}
