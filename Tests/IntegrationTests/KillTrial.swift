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

/// One run of an operation that was killed (or aborted at a fault point, or that finished
/// first), and every invariant it broke.
struct KillTrial: Sendable, CustomStringConvertible {
    var operation: KillRig.Operation
    /// `after 312 ms` or `at after-rename:1`.
    var how: String
    var ending: HotRun.Ending
    /// Whether the run died of the kill or the abort (not a run that finished first).
    var died: Bool
    var problems: [String]
    var root: URL

    var description: String {
        "\(operation.rawValue) \(how) (\(ending)): " + problems.joined(separator: "; ")
    }
}

extension KillRig {
    /// Runs `operation` on a fresh root; SIGKILLs it after `delay`, or lets `HOT_ABORT_AT`
    /// abort it at `point`; then checks the store.
    func trial(
        _ operation: Operation,
        killAfter delay: Duration? = nil,
        abortAt point: String? = nil
    ) async throws
        -> KillTrial
    {
        let (root, logs) = try makeRoot(operation.start)
        let run = try HotRun(
            arguments(for: operation, root: root),
            environment: ["HOT_ABORT_AT": point],
            log: logs.appendingPathComponent("run.log")
        )
        if let delay { run.kill(after: delay) }
        let ending = await run.wait()
        let died: Bool
        switch ending {
        case .signalled(let signal): died = signal == SIGKILL || signal == SIGABRT
        case .exited: died = false
        }
        var problems: [String] = []
        if !died, ending != .exited(0) {
            problems.append("the run failed by itself: \(run.failure)")
        }
        problems += await check(after: operation, root: root, logs: logs, finished: !died)
        let how = delay.map { "killed after \($0.milliseconds) ms" } ?? point.map { "aborted at \($0)" } ?? "not killed"
        return KillTrial(operation: operation, how: how, ending: ending, died: died, problems: problems, root: root)
    }

    /// The invariants after a run of `operation` ended, however it ended: the store opens;
    /// `p`'s active tree is the old or the new version, byte for byte; `q` is intact; every
    /// version the store names is whole; `hot status --check` passes; the next sync (after a
    /// repair, for a repair) completes; and afterwards nothing is left that no record names
    /// or nothing links.
    func check(after operation: Operation, root: URL, logs: URL, finished: Bool) async -> [String] {
        var problems: [String] = []
        let log = { (name: String) in logs.appendingPathComponent(name) }

        // The store opens.
        let packages: [String: StoreInspection.Package]
        do {
            packages = try await StoreInspection.status(root: root, check: false, log: log("status.log"))
        } catch {
            return ["the store does not open: \(error)"]
        }

        // The active tree is the old or the new version, never a mix.
        var content: Content?
        do {
            content = try activeContent(packages[Self.packageID], problems: &problems)
            if let content {
                let allowed = finished ? [operation.new] : operation.allowed
                if !allowed.contains(content) {
                    problems.append(
                        "p's active tree is \(content), expected one of \(allowed.map(\.rawValue).sorted())"
                    )
                }
            }
            problems += try sharedProblems(packages, operation: operation)
            problems += try namedVersionProblems(root: root, allowingDamaged: operation == .repair)
            if operation != .repair {  // a repair starts from a tree damaged on purpose
                problems += await NameIndexInvariant.problems(root: root)
            }
        } catch {
            problems.append("cannot read the store's trees: \(error)")
        }

        // `status --check` passes: only a repair's package may still miss the file it had lost.
        do {
            let checked = try await StoreInspection.status(root: root, check: true, log: log("check.log"))
            for package in checked.values.sorted(by: { $0.id < $1.id })
            where ["fileMissing", "digestMismatch"].contains(package.state) {
                if operation == .repair, package.id == Self.packageID, content == .damaged { continue }
                problems.append("status --check finds \(package.id) \(package.version ?? "-") \(package.state)")
            }
        } catch {
            problems.append("status --check fails: \(error)")
        }

        // The next sync completes, and leaves a clean store.
        for (index, arguments) in recovery(for: operation, root: root).enumerated() {
            do {
                let (ending, output) = try await HotRun.run(arguments, log: log("recovery-\(index).log"))
                if ending != .exited(0) {
                    problems.append("the next `hot \(arguments[0])` ends with \(ending): \(HotRun.failure(in: output))")
                }
            } catch {
                problems.append("cannot run the next `hot \(arguments[0])`: \(error)")
            }
        }
        do {
            let after = try await StoreInspection.status(root: root, check: true, log: log("after.log"))
            var ignored: [String] = []
            let final = try activeContent(after[Self.packageID], problems: &ignored)
            if final != operation.final || after[Self.packageID]?.state != "installed" {
                problems.append(
                    "after the next sync p is \(final.map(\.rawValue) ?? "a mix") "
                        + "(\(after[Self.packageID]?.state ?? "no record")), expected \(operation.final) installed"
                )
            }
            problems += try sharedProblems(after, operation: nil)
            problems += try namedVersionProblems(root: root, allowingDamaged: false)
            problems += await NameIndexInvariant.problems(root: root).map { "after the next sync: \($0)" }
            problems += try StoreInspection.leftovers(root: root).map { "after the next sync: \($0)" }
        } catch {
            problems.append("after the next sync: \(error)")
        }
        return problems
    }

    /// What `p`'s active tree holds, nil for a mix (explained in `problems`).
    private func activeContent(_ package: StoreInspection.Package?, problems: inout [String]) throws -> Content? {
        guard let package, let path = package.path else { return .absent }
        guard let tree = try StoreInspection.tree(URL(fileURLWithPath: path)) else {
            problems.append("the store names p \(package.version ?? "-") at \(path) but the tree is missing")
            return nil
        }
        guard let content = content(of: tree) else {
            problems.append("p's active tree (version \(package.version ?? "-")) is a mix: \(describe(tree))")
            return nil
        }
        return content
    }

    /// `q` is installed and whole (an install may not have reached it yet).
    private func sharedProblems(
        _ packages: [String: StoreInspection.Package],
        operation: Operation?
    ) throws
        -> [String]
    {
        guard let package = packages[Self.sharedID], let path = package.path else {
            return operation == .install ? [] : ["q is not installed any more"]
        }
        guard let tree = try StoreInspection.tree(URL(fileURLWithPath: path)) else {
            return ["the store names q at \(path) but the tree is missing"]
        }
        return tree == shared ? [] : ["q's tree is damaged: \(describe(tree))"]
    }

    /// Every version the store file names (active or kept) is whole.
    private func namedVersionProblems(root: URL, allowingDamaged: Bool) throws -> [String] {
        var problems: [String] = []
        for (path, version) in try StoreInspection.namedVersions(root: root).sorted(by: { $0.key < $1.key }) {
            let id = path.split(separator: "/").dropFirst().first.map(String.init) ?? ""
            guard let tree = try StoreInspection.tree(root.appendingPathComponent(path)) else {
                problems.append("the store names \(id) \(version) at \(path) but the tree is missing")
                continue
            }
            let expected: [String: Data]? =
                switch (id, version) {
                case (Self.packageID, "1"): version1
                case (Self.packageID, "2"): version2
                case (Self.sharedID, "1"): shared
                default: nil
                }
            if tree == expected { continue }
            if allowingDamaged, id == Self.packageID, version == "2", tree == damaged { continue }
            problems.append("\(id) \(version) at \(path) is not whole: \(describe(tree))")
        }
        return problems
    }

    /// A tree's files, each marked with the version whose bytes it has.
    private func describe(_ tree: [String: Data]) -> String {
        tree.keys.sorted().map { path in
            let data = tree[path]
            let from = [("1", version1[path]), ("2", version2[path])].filter { $0.1 == data }.map(\.0)
            return "\(path)=\(from.isEmpty ? "?" : from.joined(separator: "/"))"
        }.joined(separator: ",")
    }
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
