import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import HotVerify
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The Console package's directory, and the repository's above it.
let consoleDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()
let repositoryDirectory = consoleDirectory.deletingLastPathComponent()

/// An executable built beside these tests (hot-server), or by the library's own build
/// (`hot`, `LaunchGuard`: `swift build` at the repository's root, which scripts/test runs first).
func executable(_ name: String) throws -> String {
    var directory = Bundle.main.bundleURL
    if directory.pathExtension == "xctest" { directory.deleteLastPathComponent() }
    let candidates = [
        directory, Bundle.main.bundleURL.deletingLastPathComponent(),
        repositoryDirectory.appendingPathComponent(".build/debug"),
    ]
    for candidate in candidates {
        let url = candidate.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: url.path) { return url.path }
    }
    Issue.record("\(name) is not built: run `swift build` at the repository's root and in Console/")
    throw HotUpdateError(.notFound, "\(name) not found")
}

/// `hot-server` as every test here runs it: a copy alone in a folder of its own, with a `PATH`
/// of the system's folders only, so that no `hot` executable is beside it or on its path: each
/// change it makes, it makes in its own process through HotPublish.
enum LoneServer {
    private static let prepared = Result { () throws -> Prepared in
        let folder = try ScratchDirectory.make("hot-server-lone")
        let copy = folder.appendingPathComponent("hot-server")
        try FileManager.default.copyItem(atPath: try executable("hot-server"), toPath: copy.path)
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
        return Prepared(path: copy.path, environment: environment)
    }

    struct Prepared: Sendable {
        var path: String
        var environment: [String: String]
    }

    /// The copy's path and its environment, checked to have no `hot` beside it or on `PATH`.
    static func get() throws -> Prepared {
        let lone = try prepared.get()
        let beside = URL(fileURLWithPath: lone.path).deletingLastPathComponent().appendingPathComponent("hot")
        let onPath = lone.environment["PATH", default: ""].split(separator: ":").map { "\($0)/hot" }
        for candidate in [beside.path] + onPath where FileManager.default.fileExists(atPath: candidate) {
            throw HotUpdateError(.internalInconsistency, "\(candidate) exists: the server could lean on it")
        }
        return lone
    }

    /// Starts the server with `arguments`.
    static func start(
        _ arguments: [String],
        standardOutput: ChildProcess.Stream = .pipe,
        standardError: ChildProcess.Stream = .pipe
    ) throws -> ChildProcess {
        let lone = try get()
        return try ChildProcess(
            lone.path,
            arguments,
            environment: lone.environment,
            standardOutput: standardOutput,
            standardError: standardError
        )
    }

    /// Runs the server with `arguments` to its end (within two minutes).
    static func run(_ arguments: [String]) async throws -> Subprocess.Output {
        let child = try start(arguments)
        guard let output = child.standardOutput, let errors = child.standardError else {
            throw HotUpdateError(.internalInconsistency, "hot-server's output is not piped")
        }
        let out = ChildProcess.drain(output)
        let err = ChildProcess.drain(errors)
        guard let ending = await child.exit(within: .seconds(120)) else {
            child.kill()
            throw HotUpdateError(.timedOut, "hot-server \(arguments.first ?? "") did not end within 120 s")
        }
        return Subprocess.Output(ending: ending, standardOutput: out.wait(), standardError: err.wait())
    }

    /// ``run(_:)``, throwing with its standard error when it exits non-zero.
    @discardableResult
    static func check(_ arguments: [String]) async throws -> Subprocess.Output {
        let output = try await run(arguments)
        guard output.status == 0 else {
            throw HotUpdateError(
                .internalInconsistency,
                "hot-server \(arguments.joined(separator: " ")) exited \(output.status): \(output.stderr)"
            )
        }
        return output
    }
}

/// A scratch directory removed by the system's temporary cleanup.
func scratch(_ label: String) throws -> URL { try ScratchDirectory.make("hot-server-\(label)") }

/// Runs `hot` and fails on a non-zero exit.
@discardableResult
func hot(_ arguments: [String]) async throws -> String {
    try await Subprocess.check(try executable("hot"), arguments).stdout
}

/// A signing key pair made by `hot keygen`, and a repository made by `hot pack`.
struct PublishedApp {
    let directory: URL
    let repo: URL
    let privateKey: URL
    let publicKey: URL
    /// The rollout role's key, which the release key delegates rollout steps to.
    let rolloutKey: URL

    static func make() async throws -> PublishedApp {
        let directory = try scratch("published")
        let app = PublishedApp(
            directory: directory,
            repo: directory.appendingPathComponent("repo"),
            privateKey: directory.appendingPathComponent("release.pem"),
            publicKey: directory.appendingPathComponent("release.pub"),
            rolloutKey: directory.appendingPathComponent("rollout.pem")
        )
        try await hot(["keygen", "--private", app.privateKey.path, "--public", app.publicKey.path])
        try await hot([
            "keygen", "--private", app.rolloutKey.path, "--public",
            app.rolloutKey.deletingPathExtension().path + ".pub",
        ])
        return app
    }

    /// Packs and releases `version` of `id` (crashing at launch when `crashes`) and signs.
    func publish(version: String, crashes: Bool = false, id: String = "app") async throws {
        let tree = directory.appendingPathComponent("\(id)-\(version)")
        try FileManager.default.createDirectory(at: tree, withIntermediateDirectories: true)
        try Data("print(\(version))".utf8).write(to: tree.appendingPathComponent("main.js"))
        if crashes { try Data().write(to: tree.appendingPathComponent("crash")) }
        try await hot(["pack", tree.path, "--id", id, "--version", version, "--repo", repo.path])
        try await hot([
            "sign", "--repo", repo.path, "--key", privateKey.path, "--expires", "30d",
            "--rollout-key", rolloutKey.deletingPathExtension().path + ".pub",
        ])
    }

    /// The current release of `app` in the signed manifest, a rollout step applied.
    func currentRelease() throws -> String? {
        try package("app")?.current
    }

    /// A package as the signed manifest says now, a rollout step applied.
    func package(_ id: String) throws -> SignedManifestBody.Package? {
        let data = try Data(contentsOf: repo.appendingPathComponent("manifest.json"))
        let body = try SignedEnvelope.parse(data).effectiveBody(verifier: CryptoVerifier())
        return body.package(id)
    }

    /// `hot-server rollout advance` with the release key, steps taken at once.
    func advance(database: String) async throws -> String {
        try await LoneServer.check([
            "rollout", "advance", "--repo", repo.path, "--db", database, "--key", privateKey.path, "--min-step-seconds",
            "0",
        ]).stdout
    }
}

/// `hot-server` running as a process of its own until ``stop()``.
final class ServerProcess: @unchecked Sendable {
    let process: ChildProcess
    let url: URL
    /// The first lines it printed (the console's token among them).
    let lines: [String]

    static func start(_ arguments: [String]) async throws -> ServerProcess {
        let process = try LoneServer.start(
            arguments + ["--listen", "127.0.0.1:0"],
            standardOutput: .pipe,
            standardError: .inherit
        )
        guard let reader = process.standardOutput else {
            throw HotUpdateError(.internalInconsistency, "hot-server's output is not a pipe")
        }
        let found: (URL?, [String]) = await withCheckedContinuation { continuation in
            Thread {
                var lines: [String] = []
                while let line = ChildProcess.readLine(reader) {
                    lines.append(line)
                    if line.hasPrefix("listening on ") {
                        continuation.resume(
                            returning: (URL(string: String(line.dropFirst("listening on ".count))), lines)
                        )
                        // Keep draining so the server never blocks on a full pipe.
                        while !reader.availableData.isEmpty {}
                        return
                    }
                }
                continuation.resume(returning: (nil, lines))
            }.start()
        }
        guard let url = found.0 else {
            let ending = await process.exit()
            throw HotUpdateError(
                .internalInconsistency,
                "hot-server ended (\(ending)) before listening: \(found.1)"
            )
        }
        return ServerProcess(process: process, url: url, lines: found.1)
    }

    private init(process: ChildProcess, url: URL, lines: [String]) {
        self.process = process
        self.url = url
        self.lines = lines
    }

    func stop() {
        process.signal(SIGTERM)
        process.waitUntilExit()
    }
}

/// Posts `body` to `url` with curl; returns the status.
func post(_ body: Data, to url: URL, type: String = "application/json") async throws -> Int {
    let file = try scratch("body").appendingPathComponent("body")
    try body.write(to: file)
    let output = try await Subprocess.check(
        "curl",
        [
            "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-H", "Content-Type: \(type)", "--data-binary",
            "@\(file.path)", url.absoluteString,
        ]
    )
    return Int(output.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
}

/// `hot-server report --json` decoded.
func report(_ database: String) async throws -> [[String: Any]] {
    let output = try await Subprocess.check(try executable("hot-server"), ["report", "--db", database, "--json"])
    let document = try JSONSerialization.jsonObject(with: output.standardOutput) as? [String: Any]
    return document?["versions"] as? [[String: Any]] ?? []
}

/// The entry of `version` of `package` in a report.
func entry(_ versions: [[String: Any]], _ package: String, _ version: String) -> [String: Any]? {
    versions.first { $0["package"] as? String == package && $0["version"] as? String == version }
}

/// One device: LaunchGuard with its own store.
struct Device {
    let store: URL
    let manifest: URL
    let trust: URL
    let telemetry: URL

    /// One launch: its ending and the version it ran.
    func launch() async throws -> (ending: ChildProcess.Ending, running: String, output: String) {
        let output = try await Subprocess.run(
            try executable("LaunchGuard"),
            [
                "--manifest", manifest.absoluteString, "--root", store.path, "--trust", trust.path, "--telemetry",
                telemetry.absoluteString,
            ]
        )
        let running =
            output.stdout.split(separator: "\n").first { $0.hasPrefix("running ") }
            .map { String($0.dropFirst("running ".count)) } ?? ""
        return (output.ending, running, output.stdout + output.stderr)
    }
}

/// A batch as the reporter posts it, from `client`, with `events` (each a JSON object).
func batchBody(client: String, events: [String], extra: String = "") -> Data {
    let now = ISO8601DateFormatter().string(from: Date())
    return Data(
        #"{"batch":"\#(UUID().uuidString.lowercased())","client":"\#(client)",\#(extra)"sentAt":"\#(now)","events":[\#(events.joined(separator: ","))]}"#
            .utf8
    )
}

/// An event of `kind` about `version` of `package`, dated now (or `date`).
func event(_ kind: String, _ package: String, _ version: String, date: Date = Date()) -> String {
    #"{"kind":"\#(kind)","date":"\#(ISO8601DateFormatter().string(from: date))","packageID":"\#(package)","version":"\#(version)"}"#
}

/// A new client id.
func newClient() -> String { UUID().uuidString.lowercased() }

/// What a post was answered.
struct Answer {
    var status: Int
    var body: String
    var headers: [String: String]
}

/// Posts `body` to `url` with curl from the source address `source` (any 127.x.y.z is this
/// machine's loopback, each /24 a network of its own to the collector), with `headers`;
/// `type` nil sends no `Content-Type` at all.
func send(
    _ body: Data,
    to url: URL,
    from source: String = "127.0.0.1",
    type: String? = "application/json",
    headers: [String: String] = [:]
) async throws -> Answer {
    let directory = try scratch("send")
    let file = directory.appendingPathComponent("body")
    let dump = directory.appendingPathComponent("headers")
    let output = directory.appendingPathComponent("output")
    try body.write(to: file)
    var arguments = [
        "-s", "--max-time", "60", "--interface", source, "-o", output.path, "-D", dump.path, "-w", "%{http_code}",
        "-X", "POST", "-H", "Content-Type: \(type ?? "")", "--data-binary", "@\(file.path)",
    ]
    for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
    let result = try await Subprocess.check("curl", arguments + [url.absoluteString])
    var fields: [String: String] = [:]
    for line in (try? String(contentsOf: dump, encoding: .utf8))?.split(separator: "\r\n") ?? [] {
        guard let colon = line.firstIndex(of: ":") else { continue }
        fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return Answer(
        status: Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0,
        body: (try? String(contentsOf: output, encoding: .utf8)) ?? "",
        headers: fields
    )
}

/// Posts every body of `bodies` to `url` from `source`, twenty at a time, with one curl.
func sendAll(_ bodies: [Data], to url: URL, from source: String = "127.0.0.1") async throws -> [Int] {
    let directory = try scratch("send-all")
    var config = ""
    for (index, body) in bodies.enumerated() {
        let file = directory.appendingPathComponent("body-\(index)")
        try body.write(to: file)
        if index > 0 { config += "next\n" }
        config += "url = \"\(url.absoluteString)\"\nrequest = \"POST\"\n"
        config += "header = \"Content-Type: application/json\"\ndata-binary = \"@\(file.path)\"\n"
        config += "interface = \"\(source)\"\noutput = \"/dev/null\"\nwrite-out = \"%{http_code}\\n\"\n"
    }
    let configFile = directory.appendingPathComponent("config")
    try Data(config.utf8).write(to: configFile)
    let result = try await Subprocess.check(
        "curl",
        ["-s", "--parallel", "--parallel-max", "20", "--max-time", "60", "-K", configFile.path]
    )
    return result.stdout.split(separator: "\n").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
}

/// `hot-server report --json` decoded, whole.
func fullReport(_ database: String) async throws -> [String: Any] {
    let output = try await Subprocess.check(try executable("hot-server"), ["report", "--db", database, "--json"])
    return try JSONSerialization.jsonObject(with: output.standardOutput) as? [String: Any] ?? [:]
}
