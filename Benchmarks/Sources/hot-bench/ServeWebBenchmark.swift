import ArgumentParser
import Foundation
import HotCore
import HotTestServers

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hot-bench serve-web`: the web responder's cost per request, as `hot serve-web` answers it,
/// next to nginx serving the same installed tree. A module with a 1 KB file is packed with
/// `hot pack` and installed with `hot sync`; nginx serves the installed version's directory,
/// `hot serve-web` the store. One client connection to each, kept alive, asks for the 1 KB
/// file again and again (round-robin, a batch at a time), and the medians of the batches'
/// time per request are compared: the goal is the responder at most 1.5× nginx.
struct ServeWebBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve-web",
        abstract: "Measure hot serve-web against nginx for a 1 KB file of an installed module."
    )

    @Option(help: "Requests per batch, on one connection (at most 999: nginx closes a connection after 1,000).")
    var requests = 900

    @Option(help: "Timed batches per server (the median is reported), after one checked batch of each.")
    var runs = 15

    @Option(help: "The `hot` executable; beside hot-bench, the repository's release build, or on PATH when omitted.")
    var hot: String?

    @Flag(help: "Print the table as Markdown.")
    var markdown = false

    /// The goal: the responder takes at most this much of nginx's time per request.
    static let goal = 1.5

    func run() async throws {
        guard (1...999).contains(requests), runs >= 1 else {
            throw ValidationError("--requests takes 1 to 999, --runs at least 1")
        }
        guard let hot = locateHot(hot) else {
            throw ValidationError("no hot executable: build it (swift build -c release --product hot) or pass --hot")
        }
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("hot-bench-serve-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }

        let source = work.appendingPathComponent("module")
        try FileManager.default.createDirectory(
            at: source.appendingPathComponent("assets"),
            withIntermediateDirectories: true
        )
        let small = Data((0..<1_024).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        try small.write(to: source.appendingPathComponent("assets/small-1k.js"))
        try Data("<!doctype html><script src=assets/small-1k.js></script>".utf8).write(
            to: source.appendingPathComponent("index.html")
        )
        let repository = work.appendingPathComponent("repo")
        let store = work.appendingPathComponent("store")
        try await Subprocess.check(
            hot,
            ["pack", source.path, "--id", "web", "--version", "1", "--repo", repository.path]
        )
        try await Subprocess.check(
            hot,
            [
                "sync", "--manifest", repository.appendingPathComponent("manifest.json").absoluteString, "--root",
                store.path,
                "--allow-unsigned", "--quiet",
            ]
        )
        let status = try await Subprocess.check(hot, ["status", "--root", store.path, "--json"])
        struct Status: Decodable {
            struct Package: Decodable {
                var id: String
                var path: String?
            }
            var packages: [Package]
        }
        guard let installed = try JSONDecoder().decode(Status.self, from: Data(status.stdout.utf8)).packages.first?.path
        else { throw HotUpdateError(.internalInconsistency, "hot status names no installed package") }

        // The store keeps a version's directories to its owner (0700); nginx's workers read
        // them as another user.
        try await Subprocess.check("chmod", ["-R", "a+rX", installed])
        let nginx = try await NginxServer.start(root: URL(fileURLWithPath: installed, isDirectory: true))
        defer { Task { await nginx.stop() } }
        let preview = try HotTestServers.ChildProcess(
            hot,
            ["serve-web", "--root", store.path, "--module", "web=https://m.example.com/home/", "--port", "0"],
            standardOutput: .pipe
        )
        defer {
            preview.signal(SIGTERM)
            preview.waitUntilExit()
        }
        let line = preview.standardOutput.flatMap(HotTestServers.ChildProcess.readLine) ?? ""
        guard let start = line.range(of: "http://127.0.0.1:"), let end = line[start.upperBound...].firstIndex(of: "/"),
            let servePort = Int(line[start.upperBound..<end]), let nginxPort = nginx.baseURL.port
        else { throw HotUpdateError(.internalInconsistency, "hot serve-web did not start: \(line)") }

        let targets: [(name: String, port: Int, path: String)] = [
            ("nginx", nginxPort, "/assets/small-1k.js"),
            ("hot serve-web", servePort, "/home/assets/small-1k.js"),
        ]
        for target in targets {
            let client = try KeepAliveClient(port: target.port, path: target.path)
            let first = try client.get()
            guard first == small else {
                throw HotUpdateError(
                    .internalInconsistency,
                    "\(target.name) did not answer the file's bytes: \(first.count) bytes, "
                        + String(decoding: first.prefix(120), as: UTF8.self)
                )
            }
        }
        // A batch per connection, opened and used once before it is timed (nginx closes a
        // connection after 1,000 requests).
        var perRequest: [[Double]] = Array(repeating: [], count: targets.count)
        for run in 0...runs {
            for (index, target) in targets.enumerated() {
                let client = try KeepAliveClient(port: target.port, path: target.path)
                _ = try client.get()
                let clock = ContinuousClock()
                let begin = clock.now
                for _ in 0..<requests { _ = try client.get() }
                let elapsed = clock.now - begin
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                if run > 0 { perRequest[index].append(seconds / Double(requests)) }
            }
        }
        let medians = perRequest.map(median)
        let ratio = medians[1] / medians[0]
        var table = Table([
            ("server", .left), ("median per request", .right), ("fastest batch", .right), ("× nginx", .right),
        ])
        for (index, target) in targets.enumerated() {
            table.add([
                target.name, String(format: "%.1f µs", medians[index] * 1e6),
                String(format: "%.1f µs", (perRequest[index].min() ?? 0) * 1e6),
                String(format: "%.2f×", medians[index] / medians[0]),
            ])
        }
        print(
            "1 KB file of an installed module, \(requests) requests per batch on one kept-alive connection, \(runs) batches"
        )
        print(table.render(markdown: markdown))
        let goal = Goal(
            statement: "hot serve-web ≤ \(String(format: "%.1f", Self.goal))× nginx per request for a 1 KB file",
            measured: String(format: "%.2f×", ratio),
            met: ratio <= Self.goal
        )
        print("goal: \(goal.statement): \(goal.measured), \(goal.verdict)")
    }
}

/// One HTTP/1.1 connection kept alive, asking for one path again and again.
final class KeepAliveClient {
    private let descriptor: Int32
    private let request: [UInt8]
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)

    init(port: Int, path: String) throws {
        descriptor = try Loopback.connect(port: port)
        request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\r\n".utf8)
    }

    deinit { close(descriptor) }

    /// Sends the request and reads one response; returns its body.
    func get() throws -> Data {
        guard request.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) == request.count else {
            throw HotUpdateError(.transportFailed, "the request was not sent")
        }
        var received: [UInt8] = []
        var headEnd: Int?
        var length = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { throw HotUpdateError(.transportFailed, "the connection closed") }
            received.append(contentsOf: buffer[0..<count])
            if headEnd == nil, let end = Self.headEnd(received) {
                headEnd = end
                let head = String(decoding: received[0..<end], as: UTF8.self).lowercased()
                guard let range = head.range(of: "content-length:") else {
                    throw HotUpdateError(.transportFailed, "no Content-Length")
                }
                // "\r\n" is one Character: the value ends where that line break is found.
                let rest = head[range.upperBound...]
                let value = rest.range(of: "\r\n").map { rest[..<$0.lowerBound] } ?? rest
                length = Int(value.trimmingCharacters(in: .whitespaces)) ?? 0
            }
            if let headEnd, received.count >= headEnd + 4 + length {
                return Data(received[(headEnd + 4)..<(headEnd + 4 + length)])
            }
        }
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }
}
