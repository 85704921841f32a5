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

/// `hot-bench install`: an install through the engine (`hot-bench sync-one`: CurlTransport,
/// ZipUnarchiver, the store) against the shell pipeline `curl -o f && openssl sha256 f &&
/// bsdtar -xf f`, both fetching from nginx on 127.0.0.1, round-robin, on tmpfs and on disk.
/// Each is a child process whose wall time and peak RSS are read from `wait4`. The first
/// install of each file system is compared byte for byte with the corpus.
struct InstallBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "install",
        abstract: "Measure an install through the engine against curl + openssl + bsdtar."
    )

    @Option(help: "The corpus: small (20 MB / 300 files) or large (200 MB / 3,000 files).")
    var size = "large"

    @Option(
        help: ArgumentHelp(
            "Instead of the corpus, one file of this many GB (10^9 bytes) of incompressible bytes.",
            discussion: "Packed stored, as hot pack stores media deflate does not shrink. Mind the space: the "
                + "work directory holds the file and its package, and each file system briefly two copies."
        )
    )
    var largeFileGb: Double?

    @Option(help: "Timed runs of each (the median is reported).")
    var runs = 5

    @Option(help: "The on-disk work directory (default: the system's temporary directory).")
    var workDir: String?

    @Flag(help: "Skip tmpfs (/dev/shm).")
    var noTmpfs = false

    @Flag(help: "Skip the disk.")
    var noDisk = false

    @Flag(help: "Print the table as Markdown.")
    var markdown = false

    func run() async throws {
        guard let bench = Bundle.main.executablePath,
            let spec = CorpusSpec.all.first(where: { $0.name == size })
        else {
            throw ValidationError("--size is small or large, and hot-bench must know its own path")
        }
        let launcher = URL(fileURLWithPath: bench).deletingLastPathComponent().appendingPathComponent("hot-bench-spawn")
            .path
        let child = ChildProcess(launcher: FileManager.default.isExecutableFile(atPath: launcher) ? launcher : nil)
        let diskParent = workDir ?? FileManager.default.temporaryDirectory.path
        var targets: [(name: String, parent: String)] = []
        if !noTmpfs { targets.append(("tmpfs", "/dev/shm")) }
        if !noDisk { targets.append(("disk", diskParent)) }

        // The corpus and its package live on disk; nginx serves them from the page cache.
        let work = URL(fileURLWithPath: diskParent).appendingPathComponent("hot-bench-install-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let corpus: Corpus
        var packing = ZipWriter.Options(fileHasher: { try CryptoVerifier().makeHasher(for: .sha256) })  // as hot pack
        if let largeFileGb {
            note(String(format: "generating one file of %.2f GB", largeFileGb))
            corpus = try Self.largeFile(bytes: Int64(largeFileGb * 1e9), at: work.appendingPathComponent("corpus"))
            packing.compressionLevel = 0  // incompressible: deflate would store it anyway, after a long try
        } else {
            note("generating the \(spec.name) corpus")
            corpus = try Corpus.generate(spec, at: work.appendingPathComponent("corpus"))
        }
        let repository = work.appendingPathComponent("repo")
        try FileManager.default.createDirectory(at: repository, withIntermediateDirectories: true)
        let archive = repository.appendingPathComponent("p.zip")
        note("packing")
        let summary = try ZipWriter.write(directory: corpus.root, to: archive, options: packing)
        let sha256 = try CryptoVerifier().digest(ofFile: archive, using: .sha256).hex
        let server = try await NginxServer.start(root: repository)
        let url = server.baseURL.appendingPathComponent("p.zip").absoluteString

        var table = Table([
            ("file system", .left), ("what", .left), ("median", .right), ("fastest", .right), ("peak RSS", .right),
            ("goal", .left),
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
                let root = scratch.appendingPathComponent("store-\(run)")
                sync()
                let synced = try child.run(
                    [
                        bench, "sync-one", "--root", root.path, "--url", url, "--size", String(summary.archiveBytes),
                        "--sha256", sha256, "--unpacked-size", String(summary.uncompressedBytes),
                    ],
                    errorLog: log
                )
                guard synced.succeeded else {
                    throw HotUpdateError(.internalInconsistency, "the sync failed: \(synced.errorOutput)")
                }
                if run == 0 {
                    let installed = root.appendingPathComponent("packages/p")
                    guard
                        let version = ((try? FileManager.default.contentsOfDirectory(atPath: installed.path)) ?? [])
                            .first
                    else {
                        throw HotUpdateError(.internalInconsistency, "nothing installed")
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
                    engine.append(synced)
                }
                try? FileManager.default.removeItem(at: out)
                try? FileManager.default.removeItem(at: root)
                note("\(target.name) run \(run): pipeline \(format(piped.seconds)), engine \(format(synced.seconds))")
            }
            let pipeMedian = median(pipeline.map(\.seconds))
            let engineMedian = median(engine.map(\.seconds))
            let ratio = engineMedian / pipeMedian
            // The goals: a package of many files at most 0.6× the pipeline on tmpfs; one large file at most 1.0×.
            let goal = largeFileGb == nil ? 0.6 : 1.0
            let verdict =
                target.name == "tmpfs" || largeFileGb != nil
                ? (ratio <= goal ? "met" : "MISSED") : "(tmpfs goal)"
            let rss = engine.map(\.peakRSS).max() ?? 0
            table.add([
                target.name, "curl + openssl sha256 + bsdtar", format(pipeMedian),
                format(pipeline.map(\.seconds).min() ?? 0),
                mebibytes(pipeline.map(\.peakRSS).max() ?? 0), "",
            ])
            table.add([
                target.name, "engine (sync-one)", format(engineMedian), format(engine.map(\.seconds).min() ?? 0),
                mebibytes(rss),
                "\(String(format: "%.2f×", ratio)) the pipeline; ≤ \(String(format: "%.1f", goal))× \(verdict); RSS ≤ 64 MiB \(rss <= 64 << 20 ? "met" : "MISSED")",
            ])
        }
        await server.stop()
        let title = largeFileGb.map { String(format: "one file of %.2f GB", $0) } ?? spec.title
        print(
            "package: \(title), \(summary.fileCount) files, \(summary.uncompressedBytes) bytes unpacked, \(summary.archiveBytes) zipped; \(runs) timed runs after one checked run"
        )
        print(table.render(markdown: markdown))
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
