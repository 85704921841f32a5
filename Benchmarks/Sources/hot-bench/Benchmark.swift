import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A file system to measure on: a parent folder where the scratch tree goes.
struct FileSystemTarget: Sendable {
    /// `tmpfs` or `disk`.
    let name: String
    /// The folder under which the scratch tree is made.
    let parent: String
    /// Whether `sync` runs before each timed run (so the previous run's writeback does not bleed in).
    let syncs: Bool
}

/// The benchmark: corpora, packing, extraction, tables and goals.
final class Benchmark {
    private let sizes: [CorpusSpec]
    private let runs: Int
    private let packRuns: Int
    private let fileSystems: [FileSystemTarget]
    private let report: Report
    private let extractors: [ExtractionTool]
    private let packers: [PackingTool]
    private let missing: [String: String]
    private let cleanup = ScratchRegistry()
    private let child: ChildProcess

    init(
        sizes: [CorpusSpec],
        runs: Int,
        packRuns: Int,
        tools: [String],
        markdown: Bool,
        fileSystems: [FileSystemTarget]
    ) throws {
        self.sizes = sizes
        self.runs = runs
        self.packRuns = packRuns
        self.fileSystems = fileSystems
        self.report = Report(markdown: markdown)
        guard let bench = Bundle.main.executablePath else {
            throw HotUpdateError(.notFound, "cannot tell where the hot-bench executable is")
        }
        let python = Self.pythonInterpreter()
        let folder = URL(fileURLWithPath: bench).deletingLastPathComponent()
        let zipFoundation = folder.appendingPathComponent("hot-bench-zipfoundation").path
        let launcher = folder.appendingPathComponent("hot-bench-spawn").path
        child = ChildProcess(launcher: findExecutable(launcher))
        let known = ExtractionTool.all(bench: bench, python: python ?? "python3", zipFoundation: zipFoundation)
        extractors = known.filter { tools.contains($0.id) }
        packers = PackingTool.all(bench: bench)
        var missing: [String: String] = [:]
        for tool in extractors where findExecutable(tool.program) == nil || (tool.id == "python" && python == nil) {
            missing[tool.id] =
                tool.id == "zipfoundation"
                ? "build it first: HOTUPDATE_DEV=1 swift build -c release --product hot-bench-zipfoundation"
                : "\(tool.program) not found"
        }
        self.missing = missing
    }

    /// Runs everything and prints the report on stdout (progress goes to stderr).
    func run() throws {
        cleanup.installSignalHandlers()
        report.header(
            machine: Machine.description(),
            tools: toolVersions(),
            startup: startupCosts(),
            settings: [
                "corpora: \(sizes.map { "\($0.name) (\($0.title))" }.joined(separator: ", "))",
                "extraction: \(runs) timed runs per tool, round-robin, after one checked warm-up run",
                packRuns > 0
                    ? "packing: \(packRuns) timed runs per packer, round-robin"
                    : "packing: not measured (--pack-runs 0)",
                child.launcher == nil
                    ? "peak RSS: ru_maxrss from wait4, tools spawned directly (hot-bench-spawn is missing), so every "
                        + "reading includes hot-bench's own footprint"
                    : "peak RSS: ru_maxrss from wait4 of each tool, spawned from hot-bench-spawn (a small C launcher)",
                "file systems: "
                    + fileSystems.map {
                        "\($0.name) = \($0.parent) (\(Machine.fileSystemType(of: $0.parent) ?? "unknown"))"
                    }
                    .joined(separator: ", "),
            ]
        )
        var goals: [(String, [Goal])] = []
        for target in fileSystems {
            let scratch = target.parent + "/hot-bench-\(getpid())-\(UUID().uuidString.prefix(8))"
            try makeDirectory(scratch)
            cleanup.add(scratch)
            defer {
                try? FileManager.default.removeItem(atPath: scratch)
                cleanup.remove(scratch)
            }
            for spec in sizes {
                let section = try measure(spec, on: target, scratch: scratch)
                goals.append(("\(target.name), \(spec.name)", section))
            }
        }
        report.summary(goals)
    }

    /// One corpus on one file system: generate, pack, extract, print.
    private func measure(_ spec: CorpusSpec, on target: FileSystemTarget, scratch: String) throws -> [Goal] {
        let base = scratch + "/" + spec.name
        try makeDirectory(base)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let errorLog = base + "/stderr.log"

        progress("[\(target.name) \(spec.name)] generating the corpus")
        var started = monotonicSeconds()
        let corpus = try Corpus.generate(spec, at: URL(fileURLWithPath: base + "/corpus", isDirectory: true))
        progress(
            String(
                format: "  %d files, %.1f MB in %.1f s",
                corpus.files.count,
                Double(corpus.totalBytes) / mebibyte,
                monotonicSeconds() - started
            )
        )

        progress("[\(target.name) \(spec.name)] packing with ZipWriter")
        let archive = base + "/corpus.zip"
        if target.syncs { sync() }
        started = monotonicSeconds()
        let made = try child.run(packers[0].command(corpus.root.path, archive), errorLog: errorLog)
        guard made.succeeded else {
            throw HotUpdateError(
                .fileSystem,
                "ZipWriter could not pack the \(spec.name) corpus: \(made.errorOutput)",
                subject: archive
            )
        }
        var archiveBytes = fileSize(archive)
        progress(
            String(format: "  %.1f MB archive in %.2f s", Double(archiveBytes) / mebibyte, monotonicSeconds() - started)
        )
        var archiveNote = "by ZipWriter (level 6)"
        if let problem = try testArchive(archive, errorLog: errorLog) {
            // A broken archive would fail every extractor: measure on Info-ZIP's instead, and say so.
            let replacement = base + "/corpus-zip.zip"
            let packed =
                findExecutable("zip") == nil
                ? nil
                : try child.run(
                    ["zip", "-r", "-q", replacement, "."],
                    directory: corpus.root.path,
                    errorLog: errorLog
                )
            guard let packed, packed.succeeded, try testArchive(replacement, errorLog: errorLog) == nil else {
                throw HotUpdateError(
                    .corruptArchive,
                    "ZipWriter's archive of the \(spec.name) corpus is broken (\(problem)) "
                        + "and no other could be made",
                    subject: archive
                )
            }
            progress("  ZipWriter's archive fails `unzip -tq`: \(problem); extracting zip -r -q's archive instead")
            unlink(archive)
            guard rename(replacement, archive) == 0 else { throw systemError("renaming", replacement) }
            archiveBytes = fileSize(archive)
            archiveNote = "by zip -r -q, because ZipWriter's failed `unzip -tq`: \(problem)"
        }

        let packing = packRuns > 0 ? try measurePacking(corpus, target: target, base: base, errorLog: errorLog) : nil
        let extraction = try measureExtraction(corpus, archive: archive, target: target, base: base, errorLog: errorLog)

        let heading = "\(target.name) · \(spec.name): \(spec.title)"
        let detail = [
            String(
                format: "corpus: %@ files, %.1f MB, fnv64 %@",
                corpus.files.count.grouped,
                Double(corpus.totalBytes) / mebibyte,
                corpus.fingerprint
            ),
            String(
                format: "archive: %.1f MB, %@, fnv64 %@",
                Double(archiveBytes) / mebibyte,
                archiveNote,
                Fingerprint.ofFile(archive) ?? "unreadable"
            ),
            "file system: \(target.parent) (\(Machine.fileSystemType(of: target.parent) ?? "unknown"))"
                + (target.syncs ? ", sync before each timed run" : ""),
        ]
        let goals = Goal.evaluate(extraction, tools: extractors, fileSystem: target.name, large: spec == .large)
        report.section(
            heading: heading,
            detail: detail,
            extraction: extraction,
            tools: extractors,
            runs: runs,
            packing: packing,
            packers: packers,
            packRuns: packRuns,
            goals: goals
        )
        return goals
    }

    /// Tests every entry's CRC with `unzip -tq` (when unzip is here); nil when the archive is sound.
    private func testArchive(_ archive: String, errorLog: String) throws -> String? {
        guard findExecutable("unzip") != nil else { return nil }
        let outcome = try child.run(["unzip", "-tq", archive], errorLog: errorLog, standardOutput: errorLog + ".test")
        defer { unlink(errorLog + ".test") }
        guard !outcome.succeeded else { return nil }
        let report = (try? String(contentsOfFile: errorLog + ".test", encoding: .utf8)) ?? ""
        let bad = report.split(separator: "\n").filter { $0.contains("bad CRC") }
        return bad.isEmpty
            ? "exit \(outcome.status)"
            : "\(bad.count) entries with a bad CRC, e.g. \(oneLine(String(bad[0])))"
    }

    /// Times every packer, round-robin; reports each one's archive size.
    private func measurePacking(
        _ corpus: Corpus,
        target: FileSystemTarget,
        base: String,
        errorLog: String
    ) throws
        -> [(result: ToolResult, archiveBytes: Int64)]
    {
        var results: [ToolResult] = packers.map { tool in
            findExecutable(tool.program) == nil ? .unavailable("\(tool.program) not found") : .measured(Samples())
        }
        var sizes = [Int64](repeating: 0, count: packers.count)
        for round in 0..<packRuns {
            progress("[\(target.name) \(corpus.spec.name)] packing, round \(round + 1) of \(packRuns)")
            for step in 0..<packers.count {
                let index = (step + round) % packers.count
                guard case .measured(var samples) = results[index] else { continue }
                let tool = packers[index]
                let output = base + "/pack-\(tool.id).zip"
                if target.syncs { sync() }
                let outcome = try child.run(
                    tool.command(corpus.root.path, output),
                    directory: tool.directory(corpus.root.path),
                    errorLog: errorLog
                )
                if outcome.succeeded {
                    samples.add(outcome)
                    results[index] = .measured(samples)
                    sizes[index] = fileSize(output)
                } else {
                    results[index] = .failed("exit \(outcome.status): \(oneLine(outcome.errorOutput))")
                }
                unlink(output)
            }
        }
        return zip(results, sizes).map { ($0, $1) }
    }

    /// One checked warm-up run per extractor, then `runs` timed rounds, each tool once per
    /// round, the starting tool rotating from round to round.
    private func measureExtraction(
        _ corpus: Corpus,
        archive: String,
        target: FileSystemTarget,
        base: String,
        errorLog: String
    ) throws -> [ToolResult] {
        var results: [ToolResult] = extractors.map { tool in
            missing[tool.id].map { .unavailable($0) } ?? .measured(Samples())
        }
        let outputs = base + "/out"
        let workLog = base + "/work.txt"
        try makeDirectory(outputs)
        for round in 0...runs {
            progress(
                round == 0
                    ? "[\(target.name) \(corpus.spec.name)] extraction, checked warm-up"
                    : "[\(target.name) \(corpus.spec.name)] extraction, round \(round) of \(runs)"
            )
            for step in 0..<extractors.count {
                let index = (step + round) % extractors.count
                guard case .measured(var samples) = results[index] else { continue }
                let tool = extractors[index]
                let destination = outputs + "/\(tool.id)-\(round)"
                try makeDirectory(destination)
                if target.syncs { sync() }
                let outcome = try child.run(
                    tool.command(archive, destination, corpus.root.path),
                    errorLog: errorLog,
                    standardOutput: tool.reportsWork ? workLog : nil
                )
                if !outcome.succeeded {
                    results[index] = .failed("exit \(outcome.status): \(oneLine(outcome.errorOutput))")
                } else if round == 0 {
                    if let problem = TreeCheck.compare(destination, with: corpus, check: tool.check) {
                        results[index] = .failed("wrong output: \(problem)")
                    }
                } else {
                    samples.add(outcome, work: tool.reportsWork ? readNanoseconds(workLog).map { $0 / 1e9 } : nil)
                    results[index] = .measured(samples)
                }
                try removeTree(destination)
            }
        }
        return results
    }

    // MARK: - Header facts

    private func toolVersions() -> [String] {
        let scratch = FileManager.default.temporaryDirectory.path
        var lines: [String] = []
        func first(_ arguments: [String], line: Int = 0) -> String? {
            guard findExecutable(arguments[0]) != nil,
                let text = ChildProcess.capture(arguments, scratch: scratch)
            else { return nil }
            let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            return lines.indices.contains(line) ? lines[line] : lines.first
        }
        if let text = first(["bsdtar", "--version"]) { lines.append("bsdtar: \(text)") }
        if let text = first(["unzip", "-v"]) { lines.append("unzip: \(text)") }
        if let text = first(["zip", "-v"], line: 1) { lines.append("zip: \(text)") }
        if let python = extractors.first(where: { $0.id == "python" }), missing["python"] == nil,
            let text = first([python.program, "--version"])
        {
            lines.append("python: \(text) (\(python.program))")
        }
        if let text = first(["cp", "--version"]) { lines.append("cp: \(text)") }
        return lines
    }

    /// Median start-to-exit time of processes that do nothing, the floor under every
    /// child's time (most visible on the small corpus).
    private func startupCosts() -> [String] {
        let scratch = FileManager.default.temporaryDirectory.path
        let errorLog = scratch + "/hot-bench-startup-\(getpid()).log"
        defer { unlink(errorLog) }
        var commands: [(String, [String])] = []
        if let bench = Bundle.main.executablePath { commands.append(("hot-bench", [bench, "idle"])) }
        if let python = extractors.first(where: { $0.id == "python" }), missing["python"] == nil {
            commands.append(("python3", [python.program, "-c", "import zipfile"]))
        }
        if findExecutable("bsdtar") != nil { commands.append(("bsdtar", ["bsdtar", "--version"])) }
        var parts: [String] = []
        for (name, arguments) in commands {
            var samples = Samples()
            for _ in 0..<5 {
                guard let outcome = try? child.run(arguments, errorLog: errorLog), outcome.succeeded else { break }
                samples.add(outcome)
            }
            if !samples.isEmpty {
                parts.append(
                    String(format: "%@ %.1f ms / %.1f MB", name, samples.medianMilliseconds, samples.peakMegabytes)
                )
            }
        }
        return parts
    }

    /// The interpreter a `python3` on `PATH` really runs (a version manager's shim would
    /// otherwise add its own start-up to every timed run).
    private static func pythonInterpreter() -> String? {
        guard findExecutable("python3") != nil else { return nil }
        let scratch = FileManager.default.temporaryDirectory.path
        guard
            let path = ChildProcess.capture(["python3", "-c", "import sys; print(sys.executable)"], scratch: scratch),
            !path.isEmpty, findExecutable(path) != nil
        else { return nil }
        return path
    }
}

// MARK: - Small helpers

/// Sizes are printed in MiB, labelled MB as the corpora's names are.
let mebibyte = 1_048_576.0

private func progress(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

private func oneLine(_ text: String) -> String {
    let line = text.replacingOccurrences(of: "\n", with: " ").trimmingCharacters(in: .whitespaces)
    return line.count > 300 ? String(line.prefix(300)) + "…" : line
}

private func makeDirectory(_ path: String) throws {
    do {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    } catch {
        throw HotUpdateError.wrap(error, as: .fileSystem, "creating '\(path)'")
    }
}

private func removeTree(_ path: String) throws {
    do {
        try FileManager.default.removeItem(atPath: path)
    } catch {
        throw HotUpdateError.wrap(error, as: .fileSystem, "removing '\(path)'")
    }
}

/// The number a child printed on stdout (nanoseconds), or nil.
private func readNanoseconds(_ path: String) -> Double? {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
    return Double(text.trimmingCharacters(in: .whitespacesAndNewlines))
}

private func fileSize(_ path: String) -> Int64 {
    var info = stat()
    return stat(path, &info) == 0 ? Int64(info.st_size) : 0
}

/// The scratch trees to remove if the benchmark is interrupted.
private final class ScratchRegistry: @unchecked Sendable {
    private let lock = NSLock()
    private var paths: Set<String> = []
    private var sources: [any DispatchSourceSignal] = []

    func add(_ path: String) { lock.withLock { _ = paths.insert(path) } }
    func remove(_ path: String) { lock.withLock { _ = paths.remove(path) } }

    /// On SIGINT or SIGTERM: remove the scratch trees, then exit 130.
    func installSignalHandlers() {
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [self] in
                let remaining = lock.withLock { paths }
                for path in remaining { try? FileManager.default.removeItem(atPath: path) }
                FileHandle.standardError.write(Data("hot-bench: interrupted; scratch files removed\n".utf8))
                exit(130)
            }
            source.resume()
            sources.append(source)
        }
    }
}
