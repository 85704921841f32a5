import ArgumentParser
import Foundation
import HotArchive
import HotCore
import HotTestServers
import HotVerify

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hot-bench install`: the install as users run it, `hot sync` against a repository made by
/// `hot pack` and `hot sign` (the manifest as the tool writes it), against the shell pipeline
/// `curl -o f && openssl sha256 f && bsdtar -xf f`, all fetching from nginx on 127.0.0.1,
/// round-robin, on tmpfs and on disk. `hot-bench sync-one` (the engine given the archive's
/// SHA-256 alone, no manifest) stays as a breakdown, and `hot sync --timings` gives each
/// phase's time. Each is a child process whose wall time and peak RSS are read from `wait4`.
/// The first install of each file system is compared byte for byte with the corpus.
struct InstallBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "install",
        abstract: "Measure hot sync (and the engine alone) against curl + openssl + bsdtar."
    )

    @Option(help: "The corpus: small (20 MB / 300 files) or large (200 MB / 3,000 files).")
    var size = "large"

    @Option(
        help: ArgumentHelp(
            "Instead of the corpus, one file of this many GB (10^9 bytes) of incompressible bytes.",
            discussion: "hot pack stores it (deflate does not shrink it). Mind the space: the "
                + "work directory holds the file and its package, and each file system briefly two copies."
        )
    )
    var largeFileGb: Double?

    @Option(help: "Timed runs of each (the median is reported).")
    var runs = 5

    @OptionGroup var tools: HotToolOptions

    @Flag(help: "Skip tmpfs (/dev/shm).")
    var noTmpfs = false

    @Flag(help: "Skip the disk.")
    var noDisk = false

    @Flag(help: "Print the table as Markdown.")
    var markdown = false

    /// What `hot sync --timings` writes.
    struct Timings: Decodable {
        struct Package: Decodable {
            var downloadSeconds: Double
            var unpackSeconds: Double
            var adoptSeconds: Double
            var commitSeconds: Double
        }
        var manifestSeconds: Double?
        var packages: [Package]
    }

    func run() async throws {
        guard let bench = Bundle.main.executablePath,
            let spec = CorpusSpec.all.first(where: { $0.name == size })
        else {
            throw ValidationError("--size is small or large, and hot-bench must know its own path")
        }
        let (hot, child) = try tools.tools()
        let diskParent = tools.workParent
        var targets: [(name: String, parent: String)] = []
        if !noTmpfs { targets.append(("tmpfs", "/dev/shm")) }
        if !noDisk { targets.append(("disk", diskParent)) }

        // The corpus and its repository live on disk; nginx serves them from the page cache.
        let work = URL(fileURLWithPath: diskParent).appendingPathComponent("hot-bench-install-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let corpus: Corpus
        if let largeFileGb {
            note(String(format: "generating one file of %.2f GB", largeFileGb))
            corpus = try Self.largeFile(bytes: Int64(largeFileGb * 1e9), at: work.appendingPathComponent("corpus"))
        } else {
            note("generating the \(spec.name) corpus")
            corpus = try Corpus.generate(spec, at: work.appendingPathComponent("corpus"))
        }

        // The repository as a publisher makes it: hot keygen, hot pack, hot sign.
        let repository = work.appendingPathComponent("repo")
        let key = work.appendingPathComponent("release.pem").path
        let publicKey = work.appendingPathComponent("release.pub").path
        let toolLog = work.appendingPathComponent("hot.log").path
        note("hot pack and hot sign")
        for arguments in [
            ["keygen", "--private", key, "--public", publicKey],
            ["pack", corpus.root.path, "--id", "p", "--version", "1", "--repo", repository.path, "--deltas", "0"],
            ["sign", "--repo", repository.path, "--key", key, "--expires", "7d"],
        ] {
            let outcome = try child.run([hot] + arguments, errorLog: toolLog)
            guard outcome.succeeded else {
                throw HotUpdateError(.internalInconsistency, "hot \(arguments[0]) failed: \(outcome.errorOutput)")
            }
        }
        let packages = repository.appendingPathComponent("packages")
        guard
            let archiveName = try FileManager.default.contentsOfDirectory(atPath: packages.path).first(where: {
                $0.hasSuffix(".zip")
            })
        else {
            throw HotUpdateError(.internalInconsistency, "hot pack wrote no package")
        }
        let archive = packages.appendingPathComponent(archiveName)
        let archiveBytes =
            (try FileManager.default.attributesOfItem(atPath: archive.path)[.size] as? NSNumber)?
            .int64Value ?? 0
        let sha256 = try CryptoVerifier().digest(ofFile: archive, using: .sha256).hex
        let unpackedBytes = corpus.files.reduce(Int64(0)) { $0 + $1.size }
        let server = try await NginxServer.start(root: repository)
        let url = server.baseURL.appendingPathComponent("packages/\(archiveName)").absoluteString
        let manifestURL = server.baseURL.appendingPathComponent("manifest.json").absoluteString

        var table = Table([
            ("file system", .left), ("what", .left), ("median", .right), ("fastest", .right), ("peak RSS", .right),
            ("goal", .left),
        ])
        var phaseTable = Table([
            ("file system", .left), ("manifest and trust", .right), ("download and hash", .right),
            ("unpack", .right), ("adopt", .right), ("commit and index", .right), ("the rest (process)", .right),
        ])
        for target in targets {
            let scratch = URL(fileURLWithPath: target.parent).appendingPathComponent(
                "hot-bench-install-\(UUID().uuidString)"
            )
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: scratch) }
            let log = scratch.appendingPathComponent("stderr.log").path
            var pipeline: [ChildOutcome] = []
            var engine: [ChildOutcome] = []
            var synced: [ChildOutcome] = []
            var phases: [Timings] = []
            for run in 0...runs {
                let out = scratch.appendingPathComponent("out-\(run)")
                try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
                let shell =
                    "curl -s -f -o p.zip '\(url)' && openssl sha256 p.zip >/dev/null && mkdir x && bsdtar -xf p.zip -C x"
                sync()
                let piped = try child.run(["/bin/sh", "-c", shell], directory: out.path, errorLog: log)
                guard piped.succeeded else {
                    throw HotUpdateError(.internalInconsistency, "the pipeline failed: \(piped.errorOutput)")
                }
                if run == 0 {
                    if let problem = TreeCheck.compare(
                        out.appendingPathComponent("x").path,
                        with: corpus,
                        check: .listAndSizes
                    ) {
                        throw HotUpdateError(
                            .internalInconsistency,
                            "bsdtar's tree differs from the corpus: \(problem)"
                        )
                    }
                }
                // Each install alone on the file system: a large package fits twice, not four times.
                try? FileManager.default.removeItem(at: out)

                // The engine alone, given the archive's SHA-256 (a breakdown).
                let engineRoot = scratch.appendingPathComponent("engine-\(run)")
                sync()
                let alone = try child.run(
                    [
                        bench, "sync-one", "--root", engineRoot.path, "--url", url, "--size", String(archiveBytes),
                        "--sha256", sha256, "--unpacked-size", String(unpackedBytes),
                    ],
                    errorLog: log
                )
                guard alone.succeeded else {
                    throw HotUpdateError(.internalInconsistency, "sync-one failed: \(alone.errorOutput)")
                }
                try? FileManager.default.removeItem(at: engineRoot)

                // hot sync, as a user runs it: the signed manifest hot pack and hot sign wrote.
                let root = scratch.appendingPathComponent("store-\(run)")
                let timings = scratch.appendingPathComponent("timings-\(run).json")
                sync()
                let user = try child.run(
                    [
                        hot, "sync", "--manifest", manifestURL, "--root", root.path, "--trust", publicKey, "--quiet",
                        "--timings", timings.path,
                    ],
                    errorLog: log
                )
                guard user.succeeded else {
                    throw HotUpdateError(.internalInconsistency, "hot sync failed: \(user.errorOutput)")
                }
                if run == 0 {
                    let installed = root.appendingPathComponent("packages/p")
                    guard
                        let version = ((try? FileManager.default.contentsOfDirectory(atPath: installed.path)) ?? [])
                            .first
                    else {
                        throw HotUpdateError(.internalInconsistency, "hot sync installed nothing")
                    }
                    if let problem = TreeCheck.compare(
                        installed.appendingPathComponent(version).path,
                        with: corpus,
                        check: .bytes
                    ) {
                        throw HotUpdateError(.internalInconsistency, "the install differs from the corpus: \(problem)")
                    }
                } else {
                    pipeline.append(piped)
                    engine.append(alone)
                    synced.append(user)
                    phases.append(try JSONDecoder().decode(Timings.self, from: Data(contentsOf: timings)))
                }
                try? FileManager.default.removeItem(at: root)
                note(
                    "\(target.name) run \(run): pipeline \(format(piped.seconds)), sync-one \(format(alone.seconds)), "
                        + "hot sync \(format(user.seconds))"
                )
            }
            let pipeMedian = median(pipeline.map(\.seconds))
            // The goals: on tmpfs ≤ 0.6×, on disk ≤ 0.8× the pipeline; one large file ≤ 1.0×.
            let goal = largeFileGb != nil ? 1.0 : (target.name == "tmpfs" ? 0.6 : 0.8)
            table.add([
                target.name, "curl + openssl sha256 + bsdtar", format(pipeMedian),
                format(pipeline.map(\.seconds).min() ?? 0), mebibytes(pipeline.map(\.peakRSS).max() ?? 0), "",
            ])
            for (what, outcomes, goalled) in [
                ("hot sync (signed manifest from hot pack + hot sign)", synced, true),
                ("engine alone (sync-one: the SHA-256 given)", engine, false),
            ] {
                let middle = median(outcomes.map(\.seconds))
                let ratio = middle / pipeMedian
                let rss = outcomes.map(\.peakRSS).max() ?? 0
                let verdict =
                    goalled
                    ? "; ≤ \(String(format: "%.1f", goal))× \(ratio <= goal ? "met" : "MISSED"); RSS ≤ 64 MiB \(rss <= 64 << 20 ? "met" : "MISSED")"
                    : ""
                table.add([
                    target.name, what, format(middle), format(outcomes.map(\.seconds).min() ?? 0), mebibytes(rss),
                    "\(String(format: "%.2f×", ratio)) the pipeline\(verdict)",
                ])
            }
            let package = phases.compactMap(\.packages.first)
            let manifestMedian = median(phases.compactMap(\.manifestSeconds))
            let measured =
                manifestMedian + median(package.map(\.downloadSeconds)) + median(package.map(\.unpackSeconds))
                + median(package.map(\.adoptSeconds)) + median(package.map(\.commitSeconds))
            phaseTable.add([
                target.name, format(manifestMedian), format(median(package.map(\.downloadSeconds))),
                format(median(package.map(\.unpackSeconds))), format(median(package.map(\.adoptSeconds))),
                format(median(package.map(\.commitSeconds))),
                format(max(0, median(synced.map(\.seconds)) - measured)),
            ])
        }
        await server.stop()
        let title = largeFileGb.map { String(format: "one file of %.2f GB", $0) } ?? spec.title
        print(
            "package: \(title), \(corpus.files.count) files, \(unpackedBytes) bytes unpacked, \(archiveBytes) zipped by hot pack; \(runs) timed runs after one checked run"
        )
        print(table.render(markdown: markdown))
        print("\nhot sync's phases (medians; the rest is the process: start, loading, the store's first read, exit)")
        print(phaseTable.render(markdown: markdown))
    }

    /// A corpus of one file of `bytes` seeded random bytes, `big.bin`.
    private static func largeFile(bytes: Int64, at root: URL) throws -> Corpus {
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let path = root.appendingPathComponent("big.bin").path
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw HotUpdateError(.fileSystem, "cannot create \(path): errno \(errno)") }
        defer { close(fd) }
        var random = SeededRandom(seed: CorpusSpec.large.seed)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var left = bytes
        while left > 0 {
            let count = Int(min(Int64(buffer.count), left))
            let chunk = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count])
            random.fill(chunk)
            var done = 0
            while done < count {
                let written = write(fd, chunk.baseAddress.map { $0 + done }, count - done)
                guard written > 0 else { throw HotUpdateError(.fileSystem, "cannot write \(path): errno \(errno)") }
                done += written
            }
            left -= Int64(count)
        }
        let spec = CorpusSpec(name: "large-file", megabytes: Int(bytes >> 20), files: 1, seed: CorpusSpec.large.seed)
        return Corpus(spec: spec, root: root, files: [Corpus.File(path: "big.bin", size: bytes)], fingerprint: "")
    }

    private func format(_ seconds: Double) -> String {
        seconds < 1 ? String(format: "%.0f ms", seconds * 1000) : String(format: "%.2f s", seconds)
    }

    private func mebibytes(_ bytes: Int64) -> String { String(format: "%.1f MiB", Double(bytes) / 1_048_576) }

    private func note(_ message: String) {
        FileHandle.standardError.write(Data("hot-bench: \(message)\n".utf8))
    }
}
