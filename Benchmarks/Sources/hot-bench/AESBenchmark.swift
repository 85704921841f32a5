import ArgumentParser
import Foundation
import HotArchive
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hot-bench aes`: unpacking a package encrypted with WinZip AES-256 against the same package
/// unencrypted, in the same run, with ZipUnarchiver (`hot-bench extract --backend zip`), as a
/// ratio with the goal AES-256 ≤ 1.3× plain.
///
/// Both archives are `ZipWriter`'s (level 6) of the same corpus, read warm from the page cache
/// and unpacked into tmpfs (or the disk with `--disk`), round-robin, one checked warm-up each.
/// Besides the benchmark's large corpus (200 MB in 3,000 files), the same 200 MB in fewer,
/// larger files shows the two costs AES adds apart: a key derivation per file (PBKDF2, 1000
/// rounds of HMAC-SHA1, fixed by the format) and AES-CTR plus HMAC-SHA1 per byte.
struct AESBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "aes",
        abstract: "Measure unpacking a WinZip AES-256 package against the same package unencrypted."
    )

    @Option(help: "File counts of 200 MB corpora to measure, comma-separated (3000 is the large corpus).")
    var files = "3000,200"

    @Option(help: "Timed runs of each (the median is reported).")
    var runs = 5

    @Option(
        help:
            "The on-disk work directory, which holds the corpus and the archives (default: the system's temporary directory)."
    )
    var workDir: String?

    @Flag(help: "Unpack onto the disk work directory instead of tmpfs (/dev/shm).")
    var disk = false

    @Flag(help: "Print the table as Markdown.")
    var markdown = false

    static let password = "hot-bench aes"
    static let goal = 1.3

    func run() async throws {
        guard let bench = Bundle.main.executablePath else { throw ValidationError("hot-bench must know its own path") }
        let counts = files.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !counts.isEmpty, counts.allSatisfy({ $0 > 0 }), runs >= 1 else {
            throw ValidationError("--files lists positive counts and --runs is at least 1")
        }
        let launcher = URL(fileURLWithPath: bench).deletingLastPathComponent().appendingPathComponent("hot-bench-spawn")
            .path
        let child = ChildProcess(launcher: FileManager.default.isExecutableFile(atPath: launcher) ? launcher : nil)
        let diskParent = workDir ?? FileManager.default.temporaryDirectory.path
        let outputParent = disk || !FileManager.default.fileExists(atPath: "/dev/shm") ? diskParent : "/dev/shm"
        let work = URL(fileURLWithPath: diskParent).appendingPathComponent("hot-bench-aes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }

        var table = Table([
            ("package", .left), ("plain median", .right), ("AES-256 median", .right), ("AES-256 fastest", .right),
            ("× plain", .right), ("AES-256 MB/s", .right), ("in-process", .right), ("peak RSS", .right),
            ("goal", .left),
        ])
        var goals: [Goal] = []
        for count in counts {
            let spec =
                count == CorpusSpec.large.files
                ? CorpusSpec.large
                : CorpusSpec(
                    name: "large-\(count)",
                    megabytes: CorpusSpec.large.megabytes,
                    files: count,
                    seed: CorpusSpec.large.seed
                )
            note("generating \(spec.title)")
            let corpus = try Corpus.generate(spec, at: work.appendingPathComponent("corpus-\(count)"))
            let plain = work.appendingPathComponent("plain-\(count).zip")
            let encrypted = work.appendingPathComponent("aes256-\(count).zip")
            note("packing plain and AES-256")
            let summary = try ZipWriter.write(directory: corpus.root, to: plain)
            let aesSummary = try ZipWriter.write(
                directory: corpus.root,
                to: encrypted,
                options: ZipWriter.Options(encryption: .init(.aes256, password: Self.password))
            )
            let scratch = URL(fileURLWithPath: outputParent).appendingPathComponent(
                "hot-bench-aes-\(UUID().uuidString)"
            )
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: scratch) }
            let log = scratch.appendingPathComponent("stderr.log").path
            let workLog = scratch.appendingPathComponent("work.txt").path
            var samples = [Samples(), Samples()]
            for round in 0...runs {
                for step in 0..<2 {
                    // Alternate which goes first, so neither always follows the other.
                    let which = (step + round) % 2
                    let out = scratch.appendingPathComponent("out-\(which)-\(round)")
                    var arguments = [bench, "extract", "--backend", "zip"]
                    if which == 1 { arguments += ["--password", Self.password] }
                    arguments += [(which == 1 ? encrypted : plain).path, out.path]
                    if disk { sync() }
                    let outcome = try child.run(arguments, errorLog: log, standardOutput: workLog)
                    guard outcome.succeeded else {
                        throw HotUpdateError(.internalInconsistency, "extraction failed: \(outcome.errorOutput)")
                    }
                    if round == 0 {
                        if let problem = TreeCheck.compare(out.path, with: corpus, check: .bytes) {
                            throw HotUpdateError(
                                .internalInconsistency,
                                "the output differs from the corpus: \(problem)"
                            )
                        }
                    } else {
                        let text = try? String(contentsOfFile: workLog, encoding: .utf8)
                        samples[which].add(
                            outcome,
                            work: text.flatMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
                                .map { $0 / 1e9 }
                        )
                    }
                    try? FileManager.default.removeItem(at: out)
                }
                note("\(spec.title) round \(round) done")
            }
            let plainMedian = samples[0].medianMilliseconds
            let aesMedian = samples[1].medianMilliseconds
            let ratio = aesMedian / plainMedian
            let megabytes = Double(summary.uncompressedBytes) / 1_048_576
            let goal = Goal(
                statement: "AES-256 ≤ \(String(format: "%.2f", Self.goal))× plain (\(spec.title))",
                measured: String(format: "%.2f×", ratio),
                met: ratio <= Self.goal
            )
            goals.append(goal)
            let inProcess = [samples[0].medianWorkMilliseconds, samples[1].medianWorkMilliseconds].map {
                $0.map { String(format: "%.0f", $0) } ?? "–"
            }
            table.add([
                "\(spec.title): plain \(Int(summary.archiveBytes).grouped) B, AES \(Int(aesSummary.archiveBytes).grouped) B",
                String(format: "%.0f ms", plainMedian), String(format: "%.0f ms", aesMedian),
                String(format: "%.0f ms", samples[1].minimumMilliseconds), String(format: "%.2f×", ratio),
                String(format: "%.0f", megabytes / (aesMedian / 1000)), "\(inProcess[0]) / \(inProcess[1]) ms",
                String(format: "%.1f MB", samples[1].peakMegabytes), goal.verdict,
            ])
        }
        print(
            "WinZip AES-256 against plain, ZipUnarchiver, \(runs) timed runs each after one checked run, unpacked onto "
                + (outputParent == "/dev/shm" ? "tmpfs" : "disk")
        )
        print(table.render(markdown: markdown))
        for goal in goals { print("goal: \(goal.statement): \(goal.measured), \(goal.verdict)") }
    }

    private func note(_ message: String) {
        FileHandle.standardError.write(Data("hot-bench: \(message)\n".utf8))
    }
}
