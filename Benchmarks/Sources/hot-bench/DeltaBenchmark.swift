import ArgumentParser
import Foundation
import HotArchive
import HotAssets
import HotCore
import HotManifest
import HotStore
import HotTestServers
import HotTransport
import HotVerify
import Logging

/// `hot-bench delta`: bytes and time of an update fetched as a delta, against the full
/// package and against fetching the changed entries out of the full ZIP with range requests.
struct DeltaBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delta",
        abstract:
            "Measure updates fetched as deltas: 1% and 10% of a 3,000-file package changed, and a 5 MB script with 10% of its lines changed.",
        discussion: """
            Each scenario packs version 1 and version 2 with ZipWriter, writes the delta with DeltaWriter \
            (whole files and zstd patches), serves both from nginx on 127.0.0.1, installs version 1 in a fresh \
            store and times the sync to version 2, as a delta and as the full package (medians). Bytes are \
            counted in nginx's access log. The range column is what fetching the changed entries out of the \
            full ZIP would cost: their local headers and data plus the central directory, counted from the \
            archive itself (a lower bound: response headers of the range requests are not counted).
            """
    )

    @Option(help: "Timed syncs per scenario and method.")
    var runs: Int = 3

    @Option(help: "Scenarios, comma-separated: 1%, 10%, bundle.")
    var scenarios: String = "1%,10%,bundle"

    @Option(help: "The work directory (default: /dev/shm when present, else the temporary directory).")
    var workDir: String?

    @Flag(help: "Print the table as Markdown.")
    var markdown = false

    func run() async throws {
        let base =
            workDir.map { URL(fileURLWithPath: $0) }
            ?? (FileManager.default.fileExists(atPath: "/dev/shm")
                ? URL(fileURLWithPath: "/dev/shm") : FileManager.default.temporaryDirectory)
        let work = base.appendingPathComponent("hot-bench-delta-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        var table = Table([
            ("scenario", .left), ("full package", .right), ("changed files zipped alone", .right),
            ("delta download", .right), ("goal", .left), ("range requests (lower bound)", .right),
            ("sync as delta", .right), ("sync as full", .right),
        ])
        for name in scenarios.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            let scenario = work.appendingPathComponent(name == "1%" ? "one" : name == "10%" ? "ten" : name)
            switch name {
            case "1%":
                try await measure(name: "3,000 files, 30 changed + 1 added + 1 removed", in: scenario, into: &table) {
                    try Self.makeCorpus(changed: 30, in: $0)
                }
            case "10%":
                try await measure(name: "3,000 files, 300 changed + 1 added + 1 removed", in: scenario, into: &table) {
                    try Self.makeCorpus(changed: 300, in: $0)
                }
            case "bundle":
                try await measure(name: "5 MB script, 10% of its lines changed", in: scenario, into: &table) {
                    try Self.makeBundle(in: $0)
                }
            default: throw ValidationError("unknown scenario '\(name)' (use 1%, 10%, bundle)")
            }
        }
        print(table.render(markdown: markdown))
    }

    /// What a scenario produced: both trees and the paths of version 2 that differ from version 1.
    struct Trees {
        var v1: URL
        var v2: URL
        var changed: [String]
        /// The goal line: a function of the full package, the changed files zipped alone and the delta download.
        var goal: (_ full: Int64, _ alone: Int64, _ downloaded: Int64) -> (String, Bool)
    }

    /// The 200 MB / 3,000-file corpus, and a copy of it with `changed` files changed (text
    /// files get 10% of their lines rewritten, images new bytes), one file added, one removed.
    static func makeCorpus(changed: Int, in work: URL) throws -> Trees {
        let v1 = work.appendingPathComponent("v1", isDirectory: true)
        let v2 = work.appendingPathComponent("v2", isDirectory: true)
        let corpus = try Corpus.generate(.large, at: v1)
        try FileManager.default.copyItem(at: v1, to: v2)
        var random = SeededRandom(seed: 42)
        let step = corpus.files.count / changed
        var paths: [String] = []
        for index in stride(from: 0, to: corpus.files.count, by: step).prefix(changed) {
            let file = corpus.files[index]
            let url = v2.appendingPathComponent(file.path)
            let data = try Data(contentsOf: url)
            try FileManager.default.removeItem(at: url)
            if file.path.hasSuffix(".png") {
                var bytes = [UInt8](repeating: 0, count: data.count)
                bytes.withUnsafeMutableBytes { random.fill($0) }
                try Data(bytes).write(to: url)
            } else {
                try changeLines(of: data, random: &random).write(to: url)
            }
            if try Data(contentsOf: url) != data { paths.append(file.path) }
        }
        let removed = corpus.files[step / 2].path
        try FileManager.default.removeItem(at: v2.appendingPathComponent(removed))
        var added = [UInt8]()
        TextMaker.script(into: &added, size: 50_000, random: &random)
        try Data(added).write(to: v2.appendingPathComponent("added.js"))
        paths.append("added.js")
        return Trees(v1: v1, v2: v2, changed: paths) { _, alone, downloaded in
            let goal = Double(alone) * 1.05 + 256 * 1024
            return (
                String(format: "≤ 1.05 × alone + 256 KiB = %@", format(bytes: Int64(goal))), Double(downloaded) <= goal
            )
        }
    }

    /// A 5 MB script in a package of its own, and the same with one line in ten rewritten.
    static func makeBundle(in work: URL) throws -> Trees {
        let v1 = work.appendingPathComponent("v1", isDirectory: true)
        let v2 = work.appendingPathComponent("v2", isDirectory: true)
        try FileManager.default.createDirectory(at: v1, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: v2, withIntermediateDirectories: true)
        var random = SeededRandom(seed: 7)
        var bytes = [UInt8]()
        TextMaker.script(into: &bytes, size: 5 << 20, random: &random)
        try Data(bytes).write(to: v1.appendingPathComponent("bundle.js"))
        try changeLines(of: Data(bytes), random: &random).write(to: v2.appendingPathComponent("bundle.js"))
        return Trees(v1: v1, v2: v2, changed: ["bundle.js"]) { full, _, downloaded in
            (
                String(format: "≤ 15%% of the package = %@", format(bytes: full * 15 / 100)),
                downloaded * 100 <= full * 15
            )
        }
    }

    /// `data` with one line in ten replaced by a new random line; a file of fewer than ten
    /// lines (the JSON files are one line) gets a tenth of its size rewritten in the middle.
    static func changeLines(of data: Data, random: inout SeededRandom) -> Data {
        if data.count(where: { $0 == UInt8(ascii: "\n") }) < 10 {
            var bytes = [UInt8](data)
            var fresh = [UInt8]()
            TextMaker.script(into: &fresh, size: max(1, bytes.count / 10), random: &random)
            let start = bytes.count / 2
            bytes.replaceSubrange(start..<min(bytes.count, start + fresh.count), with: fresh)
            return Data(bytes)
        }
        var out = [UInt8]()
        out.reserveCapacity(data.count)
        for (index, line) in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            if index > 0 { out.append(UInt8(ascii: "\n")) }
            if index % 10 == 5 {
                var fresh = [UInt8]()
                TextMaker.script(into: &fresh, size: max(1, line.count), random: &random)
                out += fresh.filter { $0 != UInt8(ascii: "\n") }
            } else {
                out += line
            }
        }
        return Data(out)
    }

    private func measure(
        name: String,
        in work: URL,
        into table: inout Table,
        make: (URL) throws -> Trees
    )
        async throws
    {
        note("\(name): generating")
        let trees = try make(work)
        let repository = work.appendingPathComponent("repo", isDirectory: true)
        let packages = repository.appendingPathComponent("packages", isDirectory: true)
        try FileManager.default.createDirectory(at: packages, withIntermediateDirectories: true)
        let verifier = CryptoVerifier()
        var entries: [ManifestDocument.Entry] = []
        for (version, tree) in [("1", trees.v1), ("2", trees.v2)] {
            let archive = packages.appendingPathComponent("web-\(version).zip")
            let summary = try ZipWriter.write(directory: tree, to: archive)
            entries.append(
                ManifestDocument.Entry(
                    id: "web",
                    version: version,
                    url: "packages/web-\(version).zip",
                    size: summary.archiveBytes,
                    sha256: try verifier.digest(ofFile: archive, using: .sha256).hex
                )
            )
        }
        note("\(name): writing the delta")
        let deltaURL = packages.appendingPathComponent("web-1-to-2.delta")
        let clock = ContinuousClock()
        let started = clock.now
        let summary = try DeltaWriter.write(
            packageID: "web",
            base: DeltaWriter.Side(version: "1", sha256: entries[0].sha256, directory: trees.v1),
            target: DeltaWriter.Side(version: "2", sha256: entries[1].sha256, directory: trees.v2),
            to: deltaURL,
            verifier: verifier
        )
        let writing = (clock.now - started)
        note(
            "\(name): delta \(format(bytes: summary.archiveBytes)) in \(writing): \(summary.wholeFiles) whole, "
                + "\(summary.patchedFiles) patched, \(summary.reusedFiles) reused, \(summary.removedPaths) removed"
        )
        entries[1].deltas = [
            DeltaEntry(
                from: "1",
                fromSHA256: entries[0].sha256,
                url: "packages/web-1-to-2.delta",
                size: summary.archiveBytes,
                sha256: try verifier.digest(ofFile: deltaURL, using: .sha256).hex
            )
        ]
        try ManifestDocument(packages: [entries[0]]).encoded().write(to: repository.appendingPathComponent("v1.json"))
        try ManifestDocument(packages: [entries[1]]).encoded().write(to: repository.appendingPathComponent("v2.json"))

        // The changed files zipped alone: what the goal is measured against.
        let alone = work.appendingPathComponent("alone", isDirectory: true)
        for path in trees.changed {
            let destination = alone.appendingPathComponent(path)
            try FileManager.default.createDirectory(
                at: destination.deletingLastPathComponent(),
                withIntermediateDirectories: true
            )
            try FileManager.default.copyItem(at: trees.v2.appendingPathComponent(path), to: destination)
        }
        let aloneBytes = try ZipWriter.write(directory: alone, to: work.appendingPathComponent("alone.zip"))
            .archiveBytes
        let range = try RangeEstimate.bytes(
            of: packages.appendingPathComponent("web-2.zip"),
            entries: Set(trees.changed)
        )

        let server = try await NginxServer.start(root: repository)
        var deltaSeconds: [Double] = []
        var fullSeconds: [Double] = []
        var downloaded: Int64 = 0
        for run in 0..<runs {
            for usesDeltas in [true, false] {
                let root = work.appendingPathComponent("store-\(run)-\(usesDeltas)", isDirectory: true)
                let updater = makeUpdater(root: root, usesDeltas: usesDeltas)
                try await updater.sync(from: source(server, "v1.json")).throwIfFailed()
                let before = server.requests().count
                let start = clock.now
                let report = try await updater.sync(from: source(server, "v2.json"))
                let seconds = (clock.now - start)
                try report.throwIfFailed()
                if usesDeltas {
                    guard report.packages.first?.delta?.fallback == nil, report.packages.first?.delta != nil else {
                        throw HotUpdateError(.internalInconsistency, "the sync did not use the delta: \(report)")
                    }
                    deltaSeconds.append(
                        Double(seconds.components.seconds) + Double(seconds.components.attoseconds) / 1e18
                    )
                    if run == 0 {
                        downloaded = server.requests().dropFirst(before).reduce(0) { $0 + $1.bodyBytesSent }
                    }
                } else {
                    fullSeconds.append(
                        Double(seconds.components.seconds) + Double(seconds.components.attoseconds) / 1e18
                    )
                }
                try? FileManager.default.removeItem(at: root)
            }
        }
        await server.stop()
        let (goal, met) = trees.goal(entries[1].size, aloneBytes, downloaded)
        table.add([
            name, format(bytes: entries[1].size), format(bytes: aloneBytes),
            format(bytes: downloaded) + String(format: " (%.1f%%)", Double(downloaded) * 100 / Double(entries[1].size)),
            goal + (met ? ": met" : ": NOT met"),
            format(bytes: range.bytes) + " in \(range.requests) ranges",
            String(format: "%.2f s", median(deltaSeconds)), String(format: "%.2f s", median(fullSeconds)),
        ])
        try? FileManager.default.removeItem(at: work)
    }

    private func source(_ server: NginxServer, _ name: String) -> StaticManifestSource {
        StaticManifestSource(
            url: server.baseURL.appendingPathComponent(name),
            transport: CurlTransport(),
            logger: Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
        )
    }

    private func makeUpdater(root: URL, usesDeltas: Bool) -> Updater {
        var configuration = UpdaterConfiguration(
            root: root,
            transport: CurlTransport(),
            unarchiver: ZipUnarchiver(),
            verifier: CryptoVerifier(),
            store: FileMetadataStore(root: root),
            logger: Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        configuration.usesDeltas = usesDeltas
        configuration.patcher = ZstdPatcher()
        configuration.commitHooks = [NameIndexWriter()]
        return Updater(configuration: configuration)
    }

    private func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1
            ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    private func note(_ message: String) {
        FileHandle.standardError.write(Data("hot-bench delta: \(message)\n".utf8))
    }
}

private func format(bytes: Int64) -> String {
    bytes >= 1 << 20
        ? String(format: "%.2f MB", Double(bytes) / 1_048_576) : String(format: "%.1f KB", Double(bytes) / 1024)
}

/// What fetching some entries out of a ZIP with range requests costs: the central directory
/// (to find them; a signed file list with offsets would replace it) plus each entry's local
/// header and data, one range per run of adjacent entries.
enum RangeEstimate {
    static func bytes(of archive: URL, entries wanted: Set<String>) throws -> (bytes: Int64, requests: Int) {
        let data = try Data(contentsOf: archive)
        func u16(_ at: Int) -> Int { Int(data[at]) | Int(data[at + 1]) << 8 }
        func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
        guard
            let end = stride(from: data.count - 22, through: max(0, data.count - 65_557), by: -1)
                .first(where: { u32($0) == 0x0605_4b50 })
        else { throw HotUpdateError(.notAnArchive, "no end of central directory", subject: archive.path) }
        let directorySize = u32(end + 12)
        var cursor = u32(end + 16)
        var spans: [(Int, Int)] = []
        while cursor < end, u32(cursor) == 0x0201_4b50 {
            let compressed = u32(cursor + 20)
            let nameLength = u16(cursor + 28)
            let extraLength = u16(cursor + 30)
            let commentLength = u16(cursor + 32)
            let offset = u32(cursor + 42)
            let name = String(decoding: data[(cursor + 46)..<(cursor + 46 + nameLength)], as: UTF8.self)
            if wanted.contains(name) {
                let local = 30 + u16(offset + 26) + u16(offset + 28)
                spans.append((offset, offset + local + compressed))
            }
            cursor += 46 + nameLength + extraLength + commentLength
        }
        spans.sort { $0.0 < $1.0 }
        var requests = 0
        var last = -1
        var total = Int64(directorySize) + 22
        for (start, stop) in spans {
            if start != last { requests += 1 }
            total += Int64(stop - start)
            last = stop
        }
        return (total, requests + 1)
    }
}
