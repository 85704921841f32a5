import ArgumentParser
import Foundation
import HotArchive
import HotAssets
import HotCore
import HotStore
import HotTestServers
import HotTransport
import HotVerify
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hot-bench resume`: downloads killed at random offsets and synced again. Packs one package
/// of incompressible files, serves it with nginx on 127.0.0.1 (each response rate-limited so a
/// kill lands where it was aimed), and runs trials: in each, a fresh store root; a child
/// process syncs the package and is killed with SIGKILL once its partial download reaches a
/// random offset, one to three times at growing offsets; then a sync runs to its end. Every
/// install is compared byte for byte with the source, and nginx's log counts the bytes sent.
struct ResumeBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Kill downloads at random offsets, sync again, and count corrupt installs and bytes sent."
    )

    @Option(help: "The package's size in megabytes (incompressible files of about 1 MB).")
    var megabytes = 32

    @Option(help: "Kills to make in all (each trial makes one to three, then syncs to the end).")
    var kills = 100

    @Option(help: "Each response's rate limit in MB/s, so that a kill lands near its offset.")
    var rate = 40

    @Option(help: "The random generator's seed (the offsets and the number of kills per trial).")
    var seed: UInt64 = 12

    @Option(help: "The work directory (default: the system's temporary directory).")
    var workDir: String?

    @Flag(help: "Print the table as Markdown.")
    var markdown = false

    func validate() throws {
        guard megabytes >= 1, kills >= 1, rate >= 1 else { throw ValidationError("counts must be positive") }
    }

    func run() async throws {
        guard let bench = Bundle.main.executablePath else {
            throw HotUpdateError(.notFound, "cannot tell where the hot-bench executable is")
        }
        let parent =
            workDir.map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? FileManager.default.temporaryDirectory
        let work = parent.appendingPathComponent("hot-bench-resume-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }

        note("packing \(megabytes) MB")
        let source = work.appendingPathComponent("source", isDirectory: true)
        var random = SeededRandom(seed: seed)
        for index in 0..<megabytes {
            var bytes = [UInt8](repeating: 0, count: 1 << 20)
            for offset in stride(from: 0, to: bytes.count, by: 8) {
                withUnsafeBytes(of: random.next()) { word in
                    for k in 0..<8 { bytes[offset + k] = word[k] }
                }
            }
            let file = source.appendingPathComponent("d\(index % 4)/f\(index).bin")
            try FileManager.default.createDirectory(
                at: file.deletingLastPathComponent(),
                withIntermediateDirectories: true
            )
            try Data(bytes).write(to: file)
        }
        let repository = work.appendingPathComponent("repo", isDirectory: true)
        try FileManager.default.createDirectory(at: repository, withIntermediateDirectories: true)
        let archive = repository.appendingPathComponent("p.zip")
        _ = try ZipWriter.write(directory: source, to: archive, options: ZipWriter.Options())
        let size = try Int64(FileManager.default.attributesOfItem(atPath: archive.path)[.size] as? Int ?? 0)
        let sha256 = try CryptoVerifier().digest(ofFile: archive, using: .sha256).hex
        let expected = try treeDigests(source)

        try FileManager.default.createSymbolicLink(
            atPath: repository.appendingPathComponent("slow").path,
            withDestinationPath: "."
        )
        let server = try await NginxServer.start(
            root: repository,
            options: .init(locations: [.rateLimited(prefix: "/slow/", bytesPerSecond: rate << 20)])
        )
        let url = server.baseURL.appendingPathComponent("slow/p.zip").absoluteString

        var killsMade = 0
        var trials = 0
        var corrupt = 0
        var failedSyncs = 0
        var ratios: [Double] = []
        var killCounts: [Int] = []
        var resumedFrom: [Double] = []
        var stray = 0
        while killsMade < kills {
            trials += 1
            let root = work.appendingPathComponent("store-\(trials)", isDirectory: true)
            let partial = root.appendingPathComponent("partial/\(sha256)")
            let before = server.requests().count
            let count = min(kills - killsMade, 1 + Int(random.next() % 3))
            var offsets = (0..<count).map { _ in Int64(random.next() % UInt64(size)) }.sorted()
            offsets = offsets.map { max(1, $0) }
            for offset in offsets {
                let child = try HotTestServers.ChildProcess(bench, childArguments(root, url, size, sha256))
                let clock = ContinuousClock()
                let deadline = clock.now.advanced(by: .seconds(Double(size) / Double(rate << 20) * 3 + 10))
                while child.isRunning, clock.now < deadline {
                    let kept = (try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int) ?? 0
                    if Int64(kept) >= offset { break }
                    usleep(2_000)
                }
                if child.isRunning {
                    child.kill()
                    killsMade += 1
                    let kept = (try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int) ?? 0
                    resumedFrom.append(Double(kept) / Double(size))
                } else {
                    stray += 1  // it finished before the kill: counts as no kill
                }
                child.waitUntilExit()
            }
            let final = try HotTestServers.ChildProcess(bench, childArguments(root, url, size, sha256))
            if final.waitUntilExit() != .exited(0) {
                failedSyncs += 1
            } else {
                let installed = root.appendingPathComponent("packages/p", isDirectory: true)
                let version = ((try? FileManager.default.contentsOfDirectory(atPath: installed.path)) ?? []).first.map {
                    installed.appendingPathComponent($0)
                }
                if try version.map(treeDigests) != expected { corrupt += 1 }
            }
            let sent = server.requests().dropFirst(before).map(\.bodyBytesSent).reduce(0, +)
            ratios.append(Double(sent) / Double(size))
            killCounts.append(offsets.count)
            try? FileManager.default.removeItem(at: root)
            note(
                "trial \(trials): \(offsets.count) kill(s), \(String(format: "%.3f", ratios.last ?? 0))× the package sent"
            )
        }
        await server.stop()

        var table = Table([("measurement", .left), ("value", .right), ("goal", .left)])
        table.add(["package", "\(size) bytes (\(megabytes) files of 1 MiB, zipped)", ""])
        table.add(["kills (SIGKILL at random offsets)", "\(killsMade) in \(trials) trials", ""])
        table.add(["children that finished before their kill", "\(stray)", ""])
        table.add(["final syncs that failed", "\(failedSyncs)", verdict(failedSyncs == 0, "0")])
        table.add(["corrupt installs", "\(corrupt)", verdict(corrupt == 0, "0")])
        let sorted = ratios.sorted()
        table.add([
            "bytes sent per trial / package, median", String(format: "%.4f×", sorted[sorted.count / 2]), "",
        ])
        let worst = sorted.last ?? 0
        table.add(["bytes sent per trial / package, worst", String(format: "%.4f×", worst), ""])
        let single = zip(ratios, killCounts).filter { $0.1 == 1 }.map(\.0)
        let worstSingle = single.max() ?? 0
        table.add([
            "trials killed once: bytes sent / package, worst of \(single.count)", String(format: "%.4f×", worstSingle),
            verdict(worstSingle <= 1.05, "≤ 1.05×"),
        ])
        let excess = zip(ratios, killCounts).map { ($0.0 - 1) * Double(size) / Double($0.1) }.sorted()
        table.add([
            "bytes lost per kill (sent but not on disk when killed), median / worst",
            String(format: "%.0f KiB / %.0f KiB", excess[excess.count / 2] / 1024, (excess.last ?? 0) / 1024), "",
        ])
        table.add([
            "where the kills landed (fraction of the package kept)",
            resumedFrom.isEmpty ? "" : String(format: "%.2f … %.2f", resumedFrom.min() ?? 0, resumedFrom.max() ?? 0),
            "",
        ])
        print(table.render(markdown: markdown))
        if corrupt > 0 || failedSyncs > 0 { throw ExitCode(1) }
    }

    private func childArguments(_ root: URL, _ url: String, _ size: Int64, _ sha256: String) -> [String] {
        ["sync-one", "--root", root.path, "--url", url, "--size", String(size), "--sha256", sha256]
    }

    /// Every regular file under `directory`, relative path → SHA-256.
    private func treeDigests(_ directory: URL) throws -> [String: String] {
        var result: [String: String] = [:]
        let verifier = CryptoVerifier()
        let base = directory.standardizedFileURL.resolvingSymlinksInPath().path
        let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey])
        while let url = enumerator?.nextObject() as? URL {
            guard try url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile == true else { continue }
            let path = url.standardizedFileURL.resolvingSymlinksInPath().path
            result[String(path.dropFirst(base.count + 1))] = try verifier.digest(ofFile: url, using: .sha256).hex
        }
        return result
    }

    private func verdict(_ met: Bool, _ goal: String) -> String { "\(goal): \(met ? "met" : "MISSED")" }

    private func note(_ message: String) {
        FileHandle.standardError.write(Data("hot-bench: \(message)\n".utf8))
    }
}

/// `hot-bench sync-one`: syncs one package `p` into a store root with CurlTransport and
/// ZipUnarchiver, as an app would; the resume benchmark kills it midway.
struct SyncOne: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-one",
        abstract: "Sync one package (used by the resume benchmark).",
        shouldDisplay: false
    )

    @Option var root: String
    @Option var url: String
    @Option var size: Int64
    @Option var sha256: String
    @Option(help: "The unpacked size the manifest would declare.") var unpackedSize: Int64?
    @Option(help: "CurlTransport's receive buffer in KiB (its default when absent).") var curlBufferKib: Int?

    func run() async throws {
        let root = URL(fileURLWithPath: root, isDirectory: true)
        guard let url = URL(string: url) else { throw ValidationError("not a URL: \(url)") }
        var transport = CurlTransport()
        if let curlBufferKib { transport.options.bufferSize = curlBufferKib << 10 }
        var configuration = UpdaterConfiguration(
            root: root,
            transport: transport,
            unarchiver: ZipUnarchiver(),
            verifier: CryptoVerifier(),
            store: FileMetadataStore(root: root),
            logger: Logger(label: "hot-bench", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        configuration.commitHooks = [NameIndexWriter()]
        let updater = Updater(configuration: configuration)
        var descriptor = try PackageDescriptor(
            id: "p",
            version: "1",
            url: url,
            size: size,
            sha256: Digest(algorithm: .sha256, hex: sha256)
        )
        descriptor.unpackedSize = unpackedSize
        let report = try await updater.apply(Manifest(packages: [descriptor]))
        try report.throwIfFailed()
    }
}
