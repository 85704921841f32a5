import ArgumentParser
import CBenchZstd
import Foundation
import HotArchive
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hot-bench zstd`: HotArchive's zstd decoder against libzstd, in throughput and peak memory.
struct ZstdBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "zstd",
        abstract:
            "Measure ZstdDecoder and ZstdPatcher against libzstd: a 100 MB file at -3 and -19, a patch on a 64 MiB base.",
        discussion: """
            Generates a deterministic mixed file (text, JSON, JavaScript-like lines, binary tables, random \
            bytes, zero runs), compresses it with the zstd tool at -3 and -19, and decodes each frame with \
            ZstdDecoder (sink API) and libzstd (ZSTD_decompressStream), each in a child process of its own. \
            Then makes a --patch-from patch turning a 64 MiB base into a copy with about 10% changed, and \
            applies it with ZstdPatcher and with libzstd (ZSTD_DCtx_refPrefix, one call). Prints the median \
            throughput of the decoding call, the ratio ours / libzstd and each child's peak RSS.
            """
    )

    @Option(help: "Timed runs per engine and case (after one checked, untimed run).")
    var runs: Int = 5

    @Option(help: "Size of the mixed file, in MiB.")
    var megabytes: Int = 100

    @Option(help: "Size of the patch's base, in MiB.")
    var baseMegabytes: Int = 64

    @Option(help: "Levels to compress the mixed file at, comma-separated.")
    var levels: String = "3,19"

    @Option(help: "The work directory (default: /dev/shm when present, else the temporary directory).")
    var workDir: String?

    @Flag(help: "Print the tables as Markdown.")
    var markdown = false

    func validate() throws {
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
        guard megabytes >= 1, baseMegabytes >= 1 else { throw ValidationError("sizes must be at least 1 MiB") }
        _ = try parsedLevels()
    }

    private func parsedLevels() throws -> [Int] {
        try levels.split(separator: ",").map {
            guard let level = Int($0.trimmingCharacters(in: .whitespaces)), (1...19).contains(level) else {
                throw ValidationError("levels are 1 to 19: '\($0)'")
            }
            return level
        }
    }

    /// One case: a compressed input, what it must decode to, and how each engine is run on it.
    struct Case {
        var label: String
        var frames: String
        var prefix: String?
        var decodedBytes: Int
        var digest: UInt64
        /// The frame's window, from its header.
        var windowBytes: Int
        /// What the memory goal allows beyond the start-up floor.
        var allowance: (bytes: Int, statement: String)
    }

    func run() async throws {
        guard let bench = Bundle.main.executablePath else {
            throw HotUpdateError(.notFound, "cannot tell where the hot-bench executable is")
        }
        let folder = URL(fileURLWithPath: bench).deletingLastPathComponent()
        let child = ChildProcess(launcher: findExecutable(folder.appendingPathComponent("hot-bench-spawn").path))
        guard findExecutable("zstd") != nil else {
            throw HotUpdateError(.notFound, "the zstd tool is not installed (apt-get install zstd)")
        }
        let parent =
            workDir
            ?? (FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory())
        let work = URL(fileURLWithPath: parent).appendingPathComponent("hot-bench-zstd-\(getpid())").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }

        var cases: [Case] = []

        note("generating \(megabytes) MiB of mixed content")
        let mixed = ZstdCorpus.mixed(size: megabytes << 20, seed: 0x2022)
        let mixedPath = work + "/mixed.bin"
        try mixed.write(to: URL(fileURLWithPath: mixedPath))
        let mixedDigest = fnv64(mixed)
        for level in try parsedLevels() {
            let frames = work + "/mixed-\(level).zst"
            let started = monotonicSeconds()
            try tool(["zstd", "-q", "-f", "-T0", "-\(level)", mixedPath, "-o", frames], work: work)
            let window = try windowSize(of: frames)
            let compressed = try fileSize(frames)
            note(
                String(
                    format: "zstd -%d: %.1f MiB in %.1f s, window %d KiB",
                    level,
                    Double(compressed) / mebibyte,
                    monotonicSeconds() - started,
                    window >> 10
                )
            )
            cases.append(
                Case(
                    label:
                        "decode \(megabytes) MiB mixed, zstd -\(level) (\(format(bytes: compressed)), window \(format(bytes: window)))",
                    frames: frames,
                    prefix: nil,
                    decodedBytes: mixed.count,
                    digest: mixedDigest,
                    windowBytes: window,
                    allowance: (
                        compressed + 2 * window + (16 << 20), "input + 2 × window + 16 MiB"
                    )
                )
            )
        }

        note("generating a \(baseMegabytes) MiB base and a copy with about 10% changed")
        let base = ZstdCorpus.mixed(size: baseMegabytes << 20, seed: 0x64)
        let target = ZstdCorpus.changed(base, seed: 0x10)
        let basePath = work + "/base.bin"
        let targetPath = work + "/target.bin"
        let patchPath = work + "/patch.zst"
        try base.write(to: URL(fileURLWithPath: basePath))
        try target.write(to: URL(fileURLWithPath: targetPath))
        let patchStarted = monotonicSeconds()
        try tool(["zstd", "-q", "-f", "-19", "--patch-from=" + basePath, targetPath, "-o", patchPath], work: work)
        let patchBytes = try fileSize(patchPath)
        let patchWindow = try windowSize(of: patchPath)
        note(
            String(
                format: "patch: %.2f MiB in %.1f s (zstd -19 --patch-from), window %d MiB",
                Double(patchBytes) / mebibyte,
                monotonicSeconds() - patchStarted,
                patchWindow >> 20
            )
        )
        cases.append(
            Case(
                label: "apply a patch to a \(baseMegabytes) MiB base (\(format(bytes: patchBytes)), ~10% changed)",
                frames: patchPath,
                prefix: basePath,
                decodedBytes: target.count,
                digest: fnv64(target),
                windowBytes: patchWindow,
                allowance: (
                    base.count + target.count + patchBytes + (16 << 20), "base + target + patch + 16 MiB"
                )
            )
        )

        // Start-up alone: the floor under every child's peak RSS.
        var idle = Samples()
        for _ in 0..<3 {
            idle.add(try child.run([bench, "idle"], errorLog: work + "/idle.err"))
        }

        var table = Table([
            ("case", .left), ("engine", .left), ("MB/s (median)", .right), ("min–max MB/s", .right),
            ("ours / libzstd", .right), ("peak RSS MB", .right),
        ])
        var goals: [Goal] = []
        for item in cases {
            var results: [String: (samples: Samples, speeds: [Double])] = [:]
            for engine in ["ours", "libzstd"] {
                results[engine] = (Samples(), [])
            }
            // One checked run each, then rounds in which the engine that goes first alternates.
            for engine in ["ours", "libzstd"] {
                let (outcome, line) = try decodeChild(
                    child,
                    bench: bench,
                    engine: engine,
                    item: item,
                    verify: true,
                    work: work
                )
                let fields = line.split(separator: " ")
                guard outcome.succeeded, fields.count == 3, Int(fields[1]) == item.decodedBytes,
                    UInt64(fields[2], radix: 16) == item.digest
                else {
                    throw HotUpdateError(
                        .internalInconsistency,
                        "\(engine) decoded '\(item.label)' wrongly: \(line) \(outcome.errorOutput)"
                    )
                }
            }
            for round in 0..<runs {
                let order = round % 2 == 0 ? ["ours", "libzstd"] : ["libzstd", "ours"]
                for engine in order {
                    let (outcome, line) = try decodeChild(
                        child,
                        bench: bench,
                        engine: engine,
                        item: item,
                        verify: false,
                        work: work
                    )
                    guard outcome.succeeded, let nanoseconds = line.split(separator: " ").first.flatMap({ Double($0) })
                    else {
                        throw HotUpdateError(.internalInconsistency, "\(engine) failed: \(outcome.errorOutput)")
                    }
                    let seconds = nanoseconds / 1e9
                    results[engine]?.samples.add(outcome, work: seconds)
                    results[engine]?.speeds.append(Double(item.decodedBytes) / 1e6 / seconds)
                }
            }
            let speed = { (engine: String) -> Double in median(results[engine]?.speeds ?? []) }
            let ratio = speed("ours") / speed("libzstd")
            for engine in ["ours", "libzstd"] {
                guard let result = results[engine] else { continue }
                table.add([
                    item.label,
                    engine == "ours"
                        ? (item.prefix == nil ? "ZstdDecoder" : "ZstdPatcher") : "libzstd \(libzstdVersion)",
                    String(format: "%.0f", speed(engine)),
                    String(format: "%.0f–%.0f", result.speeds.min() ?? 0, result.speeds.max() ?? 0),
                    engine == "ours" ? String(format: "%.2f×", ratio) : "1.00×",
                    String(format: "%.1f", result.samples.peakMegabytes),
                ])
            }
            goals.append(
                Goal(
                    statement: "\(item.label): ours ≥ 0.50× libzstd's speed",
                    measured: String(format: "%.2f×", ratio),
                    met: ratio >= 0.5
                )
            )
            let floor = Double(idle.peakRSS.max() ?? 0)
            let ours = Double(results["ours"]?.samples.peakRSS.max() ?? 0)
            let used = ours - floor
            goals.append(
                Goal(
                    statement: "\(item.label): ours' peak RSS − start-up ≤ \(item.allowance.statement)",
                    measured: String(
                        format: "%.1f MB ≤ %.1f MB",
                        used / mebibyte,
                        Double(item.allowance.bytes) / mebibyte
                    ),
                    met: used <= Double(item.allowance.bytes)
                )
            )
        }

        printReport(
            lines: Machine.description() + [
                "libzstd \(libzstdVersion) (the system library), zstd tool for compressing",
                String(
                    format:
                        "%d timed runs per engine and case, each a child process; MB/s = decoded bytes / the decoding call's time (10^6 bytes)",
                    runs
                ),
                String(
                    format: "start-up alone (hot-bench idle): peak RSS %.1f MB, the floor under every row",
                    idle.peakMegabytes
                ),
                "ours: ZstdDecoder().decode(_:output:) with a sink that drops the pieces; ZstdPatcher.applied(patch:base:expectedSize:)",
                "libzstd: ZSTD_decompressStream into a ZSTD_DStreamOutSize buffer; ZSTD_DCtx_refPrefix + ZSTD_decompressDCtx",
            ],
            table: table,
            goals: goals
        )
    }

    private func printReport(lines: [String], table: Table, goals: [Goal]) {
        var text =
            markdown ? "## hot-bench zstd: ZstdDecoder and ZstdPatcher against libzstd\n\n" : "== hot-bench zstd ==\n\n"
        for line in lines { text += (markdown ? "- " : "  ") + line + "\n" }
        text += "\n" + table.render(markdown: markdown) + "\n\nGoals (evaluated, not asserted):\n\n"
        for goal in goals {
            let verdict =
                markdown ? "**\(goal.verdict)**" : goal.verdict.padding(toLength: 6, withPad: " ", startingAt: 0)
            text += (markdown ? "- " : "  ") + "\(verdict) \(goal.statement): \(goal.measured)\n"
        }
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    private func decodeChild(
        _ child: ChildProcess,
        bench: String,
        engine: String,
        item: Case,
        verify: Bool,
        work: String
    ) throws -> (ChildOutcome, String) {
        var arguments = [bench, "zstd-decode", "--engine", engine, "--frames", item.frames]
        if let prefix = item.prefix { arguments += ["--prefix", prefix, "--expected-size", "\(item.decodedBytes)"] }
        if verify { arguments.append("--verify") }
        let output = work + "/child.out"
        let outcome = try child.run(arguments, errorLog: work + "/child.err", standardOutput: output)
        let line = (try? String(contentsOfFile: output, encoding: .utf8))?.trimmingCharacters(
            in: .whitespacesAndNewlines
        )
        return (outcome, line ?? "")
    }

    private func tool(_ arguments: [String], work: String) throws {
        let outcome = try ChildProcess.spawn(arguments, errorLog: work + "/tool.err")
        guard outcome.succeeded else {
            throw HotUpdateError(
                .internalInconsistency,
                "\(arguments.joined(separator: " ")) failed: \(outcome.errorOutput)"
            )
        }
    }

    private func fileSize(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
    }

    /// The window the first frame of `path` declares, as libzstd reads its header.
    private func windowSize(of path: String) throws -> Int {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        var header = ZSTD_frameHeader()
        let code = data.withUnsafeBytes { ZSTD_getFrameHeader(&header, $0.baseAddress, $0.count) }
        guard code == 0 else { throw HotUpdateError(.corruptArchive, "cannot read the frame header of \(path)") }
        return Int(header.windowSize)
    }

    private var libzstdVersion: String { String(cString: ZSTD_versionString()) }

    private func note(_ message: String) {
        FileHandle.standardError.write(Data("hot-bench zstd: \(message)\n".utf8))
    }
}

private func format(bytes: Int) -> String {
    bytes >= 1 << 20
        ? String(format: "%.1f MiB", Double(bytes) / mebibyte) : String(format: "%d KiB", bytes >> 10)
}

/// FNV-1a, 64 bits, a byte at a time, so that the pieces a sink receives hash as the whole
/// does (a fingerprint for the checked runs, never timed).
func fnv64(_ bytes: UnsafeRawBufferPointer, into seed: UInt64 = 0xCBF2_9CE4_8422_2325) -> UInt64 {
    var hash = seed
    for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
    return hash
}

func fnv64(_ data: Data) -> UInt64 { data.withUnsafeBytes { fnv64($0) } }

/// The benchmark's inputs: the same bytes on every run and machine.
enum ZstdCorpus {
    static let words = [
        "update", "bundle", "asset", "manifest", "package", "script", "resource", "version", "signature",
        "install", "patch", "delta", "window", "frame", "block", "literal", "sequence", "offset", "match",
        "the", "a", "of", "to", "and", "in", "is", "for", "with", "on", "that", "function", "return",
    ]

    /// `size` bytes in pieces of 4–256 KiB: English-like text, JSON records and JavaScript-like
    /// lines (together about half), binary tables of counters, random bytes (like already
    /// compressed images), zero runs.
    static func mixed(size: Int, seed: UInt64) -> Data {
        var random = SeededRandom(seed: seed)
        var out = Data(capacity: size + (1 << 20))
        while out.count < size {
            let piece = random.int(in: 4_096...(256 * 1_024))
            switch random.int(in: 0...9) {
            case 0, 1: out.append(text(piece, &random))
            case 2, 3: out.append(json(piece, &random))
            case 4: out.append(javaScript(piece, &random))
            case 5, 6:
                var table = [UInt32](repeating: 0, count: piece / 4)
                var counter = UInt32(random.int(in: 0...(1 << 20)))
                for index in table.indices {
                    counter &+= UInt32(index % 3 == 0 ? random.int(in: 1...9) : 0)
                    table[index] = index % 3 == 2 ? UInt32(random.int(in: 0...300)) : counter
                }
                table.withUnsafeBytes { out.append(contentsOf: $0) }
            case 7, 8:
                var bytes = [UInt8](repeating: 0, count: piece)
                bytes.withUnsafeMutableBytes { random.fill($0) }
                out.append(contentsOf: bytes)
            default:
                out.append(Data(count: piece))
            }
        }
        return out.prefix(size)
    }

    static func text(_ count: Int, _ random: inout SeededRandom) -> Data {
        var text = ""
        text.reserveCapacity(count + 32)
        while text.utf8.count < count {
            text += random.pick(words)
            text += random.int(in: 0...11) == 0 ? ".\n" : " "
        }
        return Data(text.utf8)
    }

    static func json(_ count: Int, _ random: inout SeededRandom) -> Data {
        var text = ""
        text.reserveCapacity(count + 128)
        while text.utf8.count < count {
            let id = random.int(in: 0...999_999)
            text +=
                "{\"id\":\(id),\"name\":\"\(random.pick(words))-\(id % 97)\",\"size\":\(random.int(in: 0...16_777_215)),"
            text += "\"tags\":[\"\(random.pick(words))\",\"\(random.pick(words))\"],\"ok\":\(id % 2 == 0)}\n"
        }
        return Data(text.utf8)
    }

    static func javaScript(_ count: Int, _ random: inout SeededRandom) -> Data {
        var text = ""
        text.reserveCapacity(count + 128)
        while text.utf8.count < count {
            let name = random.pick(words)
            text +=
                "export function \(name)\(random.int(in: 0...499))(value) { return value * \(random.int(in: 0...99)) + "
            text += "\"\(random.pick(words))\"; }\n"
        }
        return Data(text.utf8)
    }

    /// `base` with about 10% changed: in every 64 KiB, a run of about 6.5 KiB is replaced by new
    /// content of the same kind's size, and every 4 MiB a few bytes are inserted and as many removed
    /// further on, so the size stays the base's.
    static func changed(_ base: Data, seed: UInt64) -> Data {
        var random = SeededRandom(seed: seed)
        var bytes = [UInt8](base)
        var offset = random.int(in: 0...65_535)
        while offset + 6_656 <= bytes.count {
            let fresh = random.int(in: 0...1) == 0 ? text(6_656, &random) : json(6_656, &random)
            bytes.replaceSubrange(offset..<(offset + 6_656), with: fresh.prefix(6_656))
            offset += 65_536
        }
        var at = 1 << 20
        while at + (2 << 20) < bytes.count {
            let length = random.int(in: 1...200)
            bytes.insert(contentsOf: [UInt8](text(length, &random).prefix(length)), at: at)
            let cut = at + (1 << 20)
            bytes.removeSubrange(cut..<(cut + length))
            at += 4 << 20
        }
        return Data(bytes)
    }
}

/// `hot-bench zstd-decode`: one decoding in this process, for `hot-bench zstd` to time and read the
/// peak RSS of. Prints "<nanoseconds of the decoding call> <decoded bytes> <fnv64 hex or ->".
struct ZstdDecodeChild: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "zstd-decode",
        abstract: "Decode one zstd input with ZstdDecoder/ZstdPatcher or libzstd (used by hot-bench zstd).",
        shouldDisplay: false
    )

    enum Engine: String, ExpressibleByArgument { case ours, libzstd }

    @Option var engine: Engine
    @Option var frames: String
    @Option(help: "A raw-content prefix (a patch's base): the input is a patch, applied in one call.")
    var prefix: String?
    @Option var expectedSize: Int64?
    @Flag(help: "Fingerprint the output (untimed runs).") var verify = false

    func run() async throws {
        do {
            let input = try Data(contentsOf: URL(fileURLWithPath: frames))
            var digest: UInt64 = 0xCBF2_9CE4_8422_2325
            var total = 0
            let start: Double
            if let prefix {
                let base = try Data(contentsOf: URL(fileURLWithPath: prefix), options: .alwaysMapped)
                let size = expectedSize ?? 0
                start = monotonicSeconds()
                let result: Data
                switch engine {
                case .ours: result = try ZstdPatcher().applied(patch: input, base: base, expectedSize: size)
                case .libzstd: result = try libzstdPatch(input, base: base, expectedSize: Int(size))
                }
                let elapsed = monotonicSeconds() - start
                total = result.count
                if verify { digest = fnv64(result) }
                print("\(Int64(elapsed * 1e9)) \(total) \(verify ? String(digest, radix: 16) : "-")")
                return
            }
            start = monotonicSeconds()
            let verifying = verify
            try input.withUnsafeBytes { bytes in
                let sink: (UnsafeRawBufferPointer) -> Void = { piece in
                    total += piece.count
                    if verifying { digest = fnv64(piece, into: digest) }
                }
                switch engine {
                case .ours: try ZstdDecoder().decode(bytes, output: sink)
                case .libzstd: try libzstdStream(bytes, output: sink)
                }
            }
            let elapsed = monotonicSeconds() - start
            print("\(Int64(elapsed * 1e9)) \(total) \(verify ? String(digest, radix: 16) : "-")")
        } catch let error as HotUpdateError {
            FileHandle.standardError.write(Data("hot-bench zstd-decode: \(error.detailedDescription())\n".utf8))
            throw ExitCode(1)
        }
    }

    /// Every frame through ZSTD_decompressStream, `ZSTD_DStreamOutSize()` bytes at a time.
    private func libzstdStream(
        _ input: UnsafeRawBufferPointer,
        output: (UnsafeRawBufferPointer) -> Void
    ) throws {
        guard let context = ZSTD_createDCtx() else { throw HotUpdateError(.internalInconsistency, "ZSTD_createDCtx") }
        defer { ZSTD_freeDCtx(context) }
        try check(ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, 27))
        let capacity = ZSTD_DStreamOutSize()
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        defer { buffer.deallocate() }
        var source = ZSTD_inBuffer(src: input.baseAddress, size: input.count, pos: 0)
        var remaining = 1
        while source.pos < source.size || remaining != 0 {
            var target = ZSTD_outBuffer(dst: buffer, size: capacity, pos: 0)
            remaining = try check(ZSTD_decompressStream(context, &target, &source))
            output(UnsafeRawBufferPointer(start: buffer, count: target.pos))
            if source.pos == source.size && target.pos == 0 && remaining != 0 {
                throw HotUpdateError(.corruptArchive, "libzstd: the input ends inside a frame")
            }
        }
    }

    /// The patch decoded against `base` in one call, as ZstdPatcher does.
    private func libzstdPatch(_ patch: Data, base: Data, expectedSize: Int) throws -> Data {
        guard let context = ZSTD_createDCtx() else { throw HotUpdateError(.internalInconsistency, "ZSTD_createDCtx") }
        defer { ZSTD_freeDCtx(context) }
        try check(ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, 27))
        var result = Data(count: expectedSize)
        let written = try base.withUnsafeBytes { baseBytes in
            try check(ZSTD_DCtx_refPrefix(context, baseBytes.baseAddress, baseBytes.count))
            return try patch.withUnsafeBytes { patchBytes in
                try result.withUnsafeMutableBytes { out in
                    try check(
                        ZSTD_decompressDCtx(
                            context,
                            out.baseAddress,
                            out.count,
                            patchBytes.baseAddress,
                            patchBytes.count
                        )
                    )
                }
            }
        }
        guard written == expectedSize else {
            throw HotUpdateError(.corruptArchive, "libzstd: \(written) bytes, expected \(expectedSize)")
        }
        return result
    }

    @discardableResult
    private func check(_ code: Int) throws -> Int {
        if ZSTD_isError(code) != 0 {
            throw HotUpdateError(.corruptArchive, "libzstd: \(String(cString: ZSTD_getErrorName(code)))")
        }
        return code
    }
}
