import ArgumentParser
import Foundation
import HotCore

/// `hot-bench`: how fast HotArchive unpacks and packs, next to the tools people already use.
@main
struct HotBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hot-bench",
        abstract: "Measure ZIP extraction and packing: HotArchive against bsdtar, unzip, Python, ZIPFoundation and cp.",
        discussion: """
            Generates two deterministic corpora, packs each with ZipWriter, then extracts the same \
            archive with every tool in turn (round-robin), on tmpfs and on disk, and prints the median \
            and fastest wall time and the peak RSS of each. Run it in release mode, from the repository's root: \
            HOTUPDATE_DEV=1 swift run -c release hot-bench. Its options: hot-bench help measure.
            """,
        subcommands: [
            Measure.self, Extract.self, Pack.self, Idle.self, MakeCorpus.self, StoreBenchmark.self, DeltaBenchmark.self,
            ResumeBenchmark.self, InstallBenchmark.self, SyncOne.self, FirstResolve.self, ZstdBenchmark.self,
            ZstdDecodeChild.self, TLSBenchmark.self, AESBenchmark.self, CheckBenchmark.self, ServeWebBenchmark.self,
        ],
        defaultSubcommand: Measure.self
    )
}

/// The benchmark itself (the default subcommand).
struct Measure: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "measure",
        abstract: "Run the benchmark (the default)."
    )

    @Option(help: "Corpora to use, comma-separated: small (20 MB / 300 files), large (200 MB / 3,000 files).")
    var sizes: String = "small,large"

    @Option(help: "Timed extraction runs per tool (after one untimed run that is checked).")
    var runs: Int = 5

    @Option(help: "Timed packing runs per packer; 0 packs the archive once and prints no packing table.")
    var packRuns: Int = 5

    @Option(help: "The on-disk work directory (default: the system's temporary directory).")
    var workDir: String?

    @Flag(help: "Skip the tmpfs measurements (/dev/shm).")
    var skipTmpfs = false

    @Flag(help: "Skip the on-disk measurements.")
    var skipDisk = false

    @Option(help: "Extractors, comma-separated: \(ExtractionTool.ids.joined(separator: ",")).")
    var tools: String = ExtractionTool.ids.joined(separator: ",")

    @Flag(help: "Print the tables as Markdown.")
    var markdown = false

    func validate() throws {
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
        guard packRuns >= 0 else { throw ValidationError("--pack-runs cannot be negative") }
        _ = try parsedSizes()
        _ = try parsedTools()
        if skipTmpfs && skipDisk {
            throw ValidationError("--skip-tmpfs and --skip-disk together leave nothing to measure")
        }
    }

    func run() async throws {
        let benchmark = try Benchmark(
            sizes: parsedSizes(),
            runs: runs,
            packRuns: packRuns,
            tools: parsedTools(),
            markdown: markdown,
            fileSystems: fileSystems()
        )
        do {
            try benchmark.run()
        } catch let error as HotUpdateError {
            FileHandle.standardError.write(Data("hot-bench: error: \(error.detailedDescription())\n".utf8))
            throw ExitCode(1)
        }
    }

    private func parsedSizes() throws -> [CorpusSpec] {
        let names = sizes.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let specs = try names.map { name in
            guard let spec = CorpusSpec.all.first(where: { $0.name == name }) else {
                throw ValidationError("unknown size '\(name)' (use small, large)")
            }
            return spec
        }
        guard !specs.isEmpty else { throw ValidationError("--sizes names no corpus") }
        return CorpusSpec.all.filter { specs.contains($0) }
    }

    private func parsedTools() throws -> [String] {
        let names = tools.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        for name in names where !ExtractionTool.ids.contains(name) {
            throw ValidationError("unknown tool '\(name)' (use \(ExtractionTool.ids.joined(separator: ", ")))")
        }
        guard !names.isEmpty else { throw ValidationError("--tools names no tool") }
        return ExtractionTool.ids.filter { names.contains($0) }
    }

    private func fileSystems() -> [FileSystemTarget] {
        var targets: [FileSystemTarget] = []
        if !skipTmpfs {
            if FileManager.default.fileExists(atPath: "/dev/shm") {
                targets.append(FileSystemTarget(name: "tmpfs", parent: "/dev/shm", syncs: false))
            } else {
                FileHandle.standardError.write(Data("hot-bench: no /dev/shm here: skipping tmpfs\n".utf8))
            }
        }
        if !skipDisk {
            let parent =
                workDir.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
                ?? FileManager.default.temporaryDirectory.standardizedFileURL.path
            targets.append(FileSystemTarget(name: "disk", parent: parent, syncs: true))
        }
        return targets
    }
}
