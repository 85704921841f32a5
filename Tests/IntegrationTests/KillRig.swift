import Foundation
import HotCore
import HotTestServers
import HotTesting
import HotVerify
import Testing

/// A repository of two versions of a package `p` and one package `q` that shares a file with
/// it, served by nginx on 127.0.0.1, and store roots prepared at each starting state, for
/// tests that run the real `hot` and kill it.
///
/// Each manifest is served twice: under `/slow/` with a rate limit, so a download takes long
/// enough to be killed in the middle, and at full speed for the syncs that recover after a
/// kill.
final class KillRig: @unchecked Sendable {
    /// The states a trial starts from.
    enum Start: String, Sendable, CaseIterable {
        /// No store at all.
        case empty
        /// `p` 1 and `q` 1 installed.
        case atVersion1
        /// `p` 2 active with 1 kept, `q` 1.
        case atVersion2
        /// As ``atVersion2``, with a file of `p` 2 gone from its tree and from the objects,
        /// so a repair must download `p` 2 again.
        case damagedVersion2
    }

    /// What the active tree of `p` may be.
    enum Content: String, Sendable, Hashable, CustomStringConvertible {
        case absent, version1, version2, damaged
        var description: String { rawValue }
    }

    /// The operations a trial kills.
    enum Operation: String, Sendable, CaseIterable, CustomTestStringConvertible {
        case install, update, rollback, remove, gc, repair
        var testDescription: String { rawValue }

        var start: Start {
            switch self {
            case .install: .empty
            case .update: .atVersion1
            case .rollback, .remove, .gc: .atVersion2
            case .repair: .damagedVersion2
            }
        }

        /// What `p`'s active tree may be right after a kill: the old or the new content.
        var allowed: Set<Content> {
            switch self {
            case .install: [.absent, .version1]
            case .update: [.version1, .version2]
            case .rollback: [.version2, .version1]
            case .remove: [.version2, .absent]
            case .gc: [.version2]
            case .repair: [.damaged, .version2]
            }
        }

        /// What `p`'s active tree is when the run completes.
        var new: Content {
            switch self {
            case .install, .rollback: .version1
            case .update, .gc, .repair: .version2
            case .remove: .absent
            }
        }

        /// What `p` is once the recovery is done.
        var final: Content {
            switch self {
            case .install, .rollback: .version1
            case .update, .remove, .gc, .repair: .version2
            }
        }

        /// The fault points this operation passes (see `FaultPoint`).
        var faultPoints: [String] {
            switch self {
            case .install, .update, .repair:
                ["after-adopt", "after-rename", "after-flush", "after-index", "mid-commit"]
            case .rollback, .remove, .gc: ["after-index", "mid-commit"]
            }
        }
    }

    static let packageID = "p"
    static let sharedID = "q"

    let repository: Repository
    let server: NginxServer
    let work: URL
    let version1: [String: Data]
    let version2: [String: Data]
    let damaged: [String: Data]
    let shared: [String: Data]
    private var templates: [Start: URL] = [:]
    private var counter = 0

    /// Builds the repository, starts nginx and prepares a store root for every start.
    ///
    /// - Parameter bytesPerSecond: The rate limit under `/slow/`.
    init(bytesPerSecond: Int = 150_000) async throws {
        work = try makeTemporaryDirectory("kill-rig")
        let common = noise(16_000, seed: 7)
        version1 = [
            "a.bin": noise(64_000, seed: 1), "b.bin": noise(64_000, seed: 2), "sub/c.bin": noise(64_000, seed: 3),
            "sub/common.bin": common, "sub/deep/v.txt": Data("one".utf8),
        ]
        version2 = [
            "a.bin": noise(64_000, seed: 1), "b.bin": noise(64_000, seed: 22), "sub/d.bin": noise(64_000, seed: 4),
            "sub/common.bin": common, "sub/deep/v.txt": Data("two".utf8),
        ]
        var damaged = version2
        damaged["sub/d.bin"] = nil
        self.damaged = damaged
        shared = ["common.bin": common, "q.txt": Data("q".utf8)]

        repository = try Repository()
        let sources = work.appendingPathComponent("sources")
        for (name, files) in [("p1", version1), ("p2", version2), ("q1", shared)] {
            try writeTree(files, under: sources.appendingPathComponent(name))
        }
        try repository.publish(sources.appendingPathComponent("q1"), id: Self.sharedID, version: "1")
        try repository.publish(sources.appendingPathComponent("p1"), id: Self.packageID, version: "1")
        try FileManager.default.copyItem(
            at: repository.manifestFile,
            to: repository.directory.appendingPathComponent("m1.json")
        )
        try repository.publish(sources.appendingPathComponent("p2"), id: Self.packageID, version: "2")
        try FileManager.default.copyItem(
            at: repository.manifestFile,
            to: repository.directory.appendingPathComponent("m2.json")
        )
        try FileManager.default.createSymbolicLink(
            atPath: repository.directory.appendingPathComponent("slow").path,
            withDestinationPath: "."
        )
        server = try await NginxServer.start(
            root: repository.directory,
            options: .init(locations: [.rateLimited(prefix: "/slow/", bytesPerSecond: bytesPerSecond)])
        )

        // Each start is reached the way a user reaches it, through the slow manifests so that
        // a repair downloads slowly too.
        let empty = work.appendingPathComponent("template-empty")
        templates[.empty] = empty
        let first = work.appendingPathComponent("template-1")
        try await mustRun(["sync"] + syncArguments(manifest: 1, slow: true, root: first))
        templates[.atVersion1] = first
        let second = work.appendingPathComponent("template-2")
        try copyTree(first, to: second)
        try await mustRun(["sync"] + syncArguments(manifest: 2, slow: true, root: second))
        templates[.atVersion2] = second
        let broken = work.appendingPathComponent("template-damaged")
        try copyTree(second, to: broken)
        let active = broken.appendingPathComponent("packages/\(Self.packageID)/2")
        let digest = try CryptoVerifier().digest(ofFile: active.appendingPathComponent("sub/d.bin"), using: .sha256).hex
        try FileManager.default.removeItem(at: active.appendingPathComponent("sub/d.bin"))
        try FileManager.default.removeItem(
            at: broken.appendingPathComponent("objects/\(digest.prefix(2))/\(digest)")
        )
        templates[.damagedVersion2] = broken
    }

    /// Stops nginx and removes the work directory.
    func stop() async {
        await server.stop()
        try? FileManager.default.removeItem(at: work)
        try? FileManager.default.removeItem(at: repository.directory)
    }

    /// The manifest URL of version `number` (`m1.json`, `m2.json`), slow or at full speed.
    func manifestURL(_ number: Int, slow: Bool) -> String {
        server.baseURL.appendingPathComponent((slow ? "slow/" : "") + "m\(number).json").absoluteString
    }

    func syncArguments(manifest number: Int, slow: Bool, root: URL) -> [String] {
        ["--manifest", manifestURL(number, slow: slow), "--root", root.path, "--allow-unsigned", "--quiet"]
    }

    /// The command a trial of `operation` runs (slowly) on `root`.
    func arguments(for operation: Operation, root: URL) -> [String] {
        switch operation {
        case .install: ["sync"] + syncArguments(manifest: 1, slow: true, root: root)
        case .update: ["sync"] + syncArguments(manifest: 2, slow: true, root: root)
        case .rollback: ["sync"] + syncArguments(manifest: 1, slow: true, root: root)
        case .remove: ["delete", Self.packageID, "--root", root.path]
        case .gc: ["gc", "--keep", "0", "--root", root.path]
        case .repair: ["repair", "--root", root.path]
        }
    }

    /// The commands that bring a root back after a trial of `operation` was killed: the
    /// next sync, preceded by a repair for a repair.
    func recovery(for operation: Operation, root: URL) -> [[String]] {
        let manifest = operation.final == .version1 ? 1 : 2
        let sync = ["sync"] + syncArguments(manifest: manifest, slow: false, root: root)
        return operation == .repair ? [["repair", "--root", root.path], sync] : [sync]
    }

    /// A fresh root holding `start`'s state (hard links inside the root kept), and a
    /// directory for the trial's logs.
    func makeRoot(_ start: Start) throws -> (root: URL, logs: URL) {
        counter += 1
        let trial = work.appendingPathComponent("trial-\(counter)")
        let logs = trial.appendingPathComponent("logs")
        try FileManager.default.createDirectory(at: logs, withIntermediateDirectories: true)
        let root = trial.appendingPathComponent("store")
        if let template = templates[start], FileManager.default.fileExists(atPath: template.path) {
            try copyTree(template, to: root)
        }
        return (root, logs)
    }

    /// Which content `tree` is, or nil for a mix.
    func content(of tree: [String: Data]?) -> Content? {
        guard let tree else { return .absent }
        if tree == version1 { return .version1 }
        if tree == version2 { return .version2 }
        if tree == damaged { return .damaged }
        return nil
    }

    /// `cp -a`, which keeps hard links inside the copied tree (objects and the trees linking them).
    private func copyTree(_ source: URL, to destination: URL) throws {
        guard try ChildProcess("/bin/cp", ["-a", source.path, destination.path]).waitUntilExit() == .exited(0) else {
            throw HotUpdateError(.fileSystem, "cp -a \(source.path) \(destination.path) failed")
        }
    }

    private func mustRun(_ arguments: [String]) async throws {
        let log = work.appendingPathComponent("setup-\(UUID().uuidString).log")
        let (ending, output) = try await HotRun.run(arguments, log: log)
        guard ending == .exited(0) else {
            throw HotUpdateError(
                .internalInconsistency,
                "hot \(arguments.joined(separator: " ")): \(ending): \(output)"
            )
        }
    }
}
