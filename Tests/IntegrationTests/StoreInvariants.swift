import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One run of the real `hot` executable that a test can kill: its output goes to a file, and
/// waiting for it happens on a thread of its own (see ``Subprocess``).
final class HotRun: @unchecked Sendable {
    /// How a run ended.
    typealias Ending = ChildProcess.Ending

    private let process: ChildProcess
    /// The file holding the run's standard error; standard output goes beside it (`.out`).
    let log: URL
    /// The arguments, for messages.
    let arguments: [String]

    /// A tool the executable runs under (`faketime -m -f +0`), which starts it as its child:
    /// signals and stops then concern that child.
    private let wrapped: Bool

    /// Starts `hot` (or another built `executable`) with `arguments`, under `wrapper` when
    /// given; `environment` adds to (or, with nil, removes from) the test's environment.
    /// `HOT_ABORT_AT` is never inherited.
    init(
        _ arguments: [String],
        environment: [String: String?] = [:],
        log: URL,
        executable: String = "hot",
        wrapper: [String] = []
    ) throws {
        self.log = log
        self.arguments = arguments
        wrapped = !wrapper.isEmpty
        let command =
            try wrapper.isEmpty
            ? [builtExecutable(executable).path] + arguments
            : wrapper + [builtExecutable(executable).path] + arguments
        var variables = ProcessInfo.processInfo.environment
        variables["HOT_ABORT_AT"] = nil
        variables["HOT_STOP_AT"] = nil
        for (name, value) in environment { variables[name] = value }
        process = try ChildProcess(
            command[0],
            Array(command.dropFirst()),
            environment: variables,
            standardOutput: .file(log.appendingPathExtension("out").path, append: false),
            standardError: .file(log.path, append: false)
        )
    }

    /// Whether the process (or its wrapper) still runs.
    var isRunning: Bool { process.isRunning }

    /// Sends SIGKILL if the process is still running; returns whether it was.
    @discardableResult
    func kill() -> Bool {
        process.kill()
    }

    /// Sends SIGKILL after `delay`, timed on a thread of its own: a task sleeping on the
    /// cooperative pool can wake seconds late while other tests hold its few threads, and a
    /// short run has then finished before the kill it was meant to take.
    func kill(after delay: Duration) {
        let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
        Thread { [self] in
            if seconds > 0 { Thread.sleep(forTimeInterval: seconds) }
            kill()
        }.start()
    }

    /// Sends SIGKILL once `condition` holds, polled every 10 ms on a thread of its own (see
    /// ``kill(after:)``), or once `timeout` has passed; returns whether the process still ran
    /// to be killed.
    func kill(when condition: @escaping @Sendable () -> Bool, timeout: Duration) async -> Bool {
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        return await withCheckedContinuation { continuation in
            Thread { [self] in
                let deadline = Date().addingTimeInterval(seconds)
                while Date() < deadline, isRunning, !condition() { usleep(10_000) }
                continuation.resume(returning: kill())
            }.start()
        }
    }

    /// The process id: of the executable, the wrapper's child when it runs under one (0
    /// while the wrapper has not started it).
    var processIdentifier: Int32 {
        let own = process.pid
        guard wrapped else { return own }
        let children = try? String(contentsOfFile: "/proc/\(own)/task/\(own)/children", encoding: .utf8)
        return children?.split(separator: " ").first.flatMap { Int32($0) } ?? 0
    }

    /// Sends `signal` (SIGCONT, SIGKILL) to the process, running or stopped.
    func signal(_ signal: Int32) {
        let target = processIdentifier
        if target > 0 { _ = sendSignal(target, signal) }
    }

    /// Whether the process is stopped (`SIGSTOP`): state `T` in `/proc/PID/stat`.
    var isStopped: Bool {
        let target = processIdentifier
        guard target > 0, let stat = try? String(contentsOfFile: "/proc/\(target)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: close)...].split(separator: " ").first == "T"
    }

    /// Waits until the process stops itself; throws when it ends instead, or after a minute
    /// (a guard against a hang, not a measure).
    func waitUntilStopped() async throws {
        for _ in 0..<6000 {
            if isStopped { return }
            guard process.isRunning else {
                throw HotUpdateError(.internalInconsistency, "\(arguments) ended before stopping: \(output)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw HotUpdateError(.timedOut, "\(arguments) did not stop: \(output)")
    }

    /// Waits for the end of the run.
    func wait() async -> Ending { await process.exit() }

    /// What the run printed on standard output.
    var standardOutput: String { (try? String(contentsOf: log.appendingPathExtension("out"), encoding: .utf8)) ?? "" }

    /// What the run printed on standard error.
    var standardError: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    /// Standard output, then standard error.
    var output: String { standardOutput + standardError }

    /// The `hot: error:` lines of standard error, or its end when there are none: what a
    /// failure report needs.
    var failure: String { Self.failure(in: standardError) }

    /// The `hot: error:` lines of `text`, or its end when there are none.
    static func failure(in text: String) -> String {
        let lines = text.split(separator: "\n").filter { $0.hasPrefix("hot: error:") }
        return lines.isEmpty ? String(text.suffix(600)) : lines.joined(separator: " | ")
    }

    /// Runs `hot` to its end.
    static func run(
        _ arguments: [String],
        environment: [String: String?] = [:],
        log: URL
    ) async throws
        -> (Ending, String)
    {
        let run = try HotRun(arguments, environment: environment, log: log)
        let ending = await run.wait()
        return (ending, run.output)
    }
}

/// The size of the file at `path`, 0 when there is none.
func fileSize(_ path: String) -> Int {
    var info = stat()
    return stat(path, &info) == 0 ? Int(info.st_size) : 0
}

/// `kill(2)`, outside ``HotRun``, whose own `kill()` hides it.
private func sendSignal(_ pid: pid_t, _ signal: Int32) -> Int32 { kill(pid, signal) }

/// What a store root holds, read the way a user of the files sees them, and every way it
/// breaks the store's invariants.
struct StoreInspection {
    /// A package as `hot status --json` reports it.
    struct Package: Decodable, Sendable {
        var id: String
        var version: String?
        var state: String
        var path: String?
        var previousVersions: [String]?
    }

    private struct StatusDocument: Decodable {
        var packages: [Package]
    }

    /// The store file's view of one version (only what the checks need).
    private struct StoredVersion: Decodable {
        var version: String
        var path: String
    }

    private struct StoredRecord: Decodable {
        var active: StoredVersion?
        var previous: [StoredVersion]
    }

    private struct StoredSnapshot: Decodable {
        var packages: [String: StoredRecord]
    }

    /// Runs `hot status [--check] --json` and decodes it; throws with the output when it fails.
    /// A root that does not exist (a run killed before it made one) holds no package.
    static func status(root: URL, check: Bool, log: URL) async throws -> [String: Package] {
        guard FileManager.default.fileExists(atPath: root.path) else { return [:] }
        let run = try HotRun(["status", "--root", root.path, "--json"] + (check ? ["--check"] : []), log: log)
        let ending = await run.wait()
        // --check exits 1 when it finds damage, which the caller's invariants then judge.
        guard ending == .exited(0) || (check && ending == .exited(1)) else {
            throw HotUpdateError(
                .internalInconsistency,
                "hot status\(check ? " --check" : "") ended with \(ending): \(run.output)"
            )
        }
        let document = try JSONDecoder().decode(StatusDocument.self, from: Data(run.standardOutput.utf8))
        return Dictionary(document.packages.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The versions the store file names (active and previous), as relative paths → version.
    static func namedVersions(root: URL) throws -> [String: String] {
        let url = root.appendingPathComponent("store.json")
        guard FileManager.default.fileExists(atPath: url.path) else { return [:] }
        let snapshot = try JSONDecoder().decode(StoredSnapshot.self, from: Data(contentsOf: url))
        var named: [String: String] = [:]
        for record in snapshot.packages.values {
            for version in [record.active].compactMap({ $0 }) + record.previous {
                named[version.path] = version.version
            }
        }
        return named
    }

    /// Everything left behind that no record names or that nothing links: staging entries,
    /// objects with one link, trees and file lists the store file does not name, temporary
    /// files beside the store file. Empty when the store is clean.
    static func leftovers(root: URL) throws -> [String] {
        var found: [String] = []
        let fileManager = FileManager.default
        let named = try namedVersions(root: root)
        for name in FileSystem.contents(of: root.appendingPathComponent("staging")) {
            found.append("staging/\(name) is left")
        }
        let objects = root.appendingPathComponent("objects")
        for fanout in FileSystem.contents(of: objects).sorted() {
            let directory = objects.appendingPathComponent(fanout)
            for name in FileSystem.contents(of: directory).sorted() {
                var info = stat()
                let path = directory.appendingPathComponent(name).path
                if lstat(path, &info) == 0, info.st_nlink <= 1 {
                    found.append("objects/\(fanout)/\(name) is linked by no tree")
                }
            }
        }
        let packages = root.appendingPathComponent("packages")
        for id in FileSystem.contents(of: packages).sorted() {
            for version in FileSystem.contents(of: packages.appendingPathComponent(id)).sorted()
            where named["packages/\(id)/\(version)"] == nil {
                found.append("packages/\(id)/\(version) is a tree the store does not name")
            }
        }
        let lists = root.appendingPathComponent("filelists")
        for id in FileSystem.contents(of: lists).sorted() {
            for name in FileSystem.contents(of: lists.appendingPathComponent(id)).sorted() {
                let version = name.hasSuffix(".files") ? String(name.dropLast(".files".count)) : name
                if named["packages/\(id)/\(version)"] == nil {
                    found.append("filelists/\(id)/\(name) is a file list the store does not name")
                }
            }
        }
        for name in FileSystem.contents(of: root).sorted() where name.hasPrefix(".") {
            found.append("\(name) is a temporary file left beside the store file")
        }
        for (path, version) in named.sorted(by: { $0.key < $1.key }) {
            if !fileManager.fileExists(atPath: root.appendingPathComponent(path).path) {
                found.append("\(path) (version \(version)) is named by the store but missing")
            }
            let parts = path.split(separator: "/")
            if parts.count == 3,
                !fileManager.fileExists(atPath: lists.appendingPathComponent("\(parts[1])/\(parts[2]).files").path)
            {
                found.append("the file list of \(path) is missing")
            }
        }
        return found
    }

    /// The regular files of a tree (relative path → bytes), or nil when it does not exist.
    static func tree(_ directory: URL) throws -> [String: Data]? {
        guard FileSystem.isDirectory(directory) else { return nil }
        return try readTree(directory)
    }
}

/// A small seeded generator (SplitMix64), so a run of random kills can be repeated.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// An integer from the environment, or `fallback`.
func environmentInteger(_ name: String, default fallback: Int) -> Int {
    ProcessInfo.processInfo.environment[name].flatMap { Int($0) } ?? fallback
}
