import Foundation

/// Named points in the engine where a test can make the process die, to check that a crash
/// at that moment leaves a store the next open repairs.
///
/// Only in builds with the package's `FaultPoints` trait (`scripts/test` and
/// `scripts/kill-harness` turn it on): elsewhere ``reached(_:)`` is empty, and neither the
/// library nor `hot` holds the variable's name.
///
/// When the environment variable `HOT_ABORT_AT` names a point, the process calls `abort()`
/// as soon as it reaches that point; `HOT_ABORT_AT=name:N` aborts the N-th time it is reached
/// (a sync commits more than once). The variable is read once, on the first call. When it is
/// unset, ``reached(_:)`` compares one optional with `nil` and returns.
///
/// `HOT_STOP_AT` works the same way but stops the process (`SIGSTOP`) instead, as a debugger
/// or the system suspending an app would: the test then sees what other processes do while
/// it holds what it holds at that point (the store lock, at `after-flush`), and continues or
/// kills it.
///
/// The points:
/// - `after-adopt`: a staged tree's files are objects in `objects/`; the tree is still in
///   staging.
/// - `after-rename`: a tree was renamed into `packages/`; no record names it yet.
/// - `after-flush`: the group commit's file-system flush is done; the store file is not
///   written yet.
/// - `after-index`: reached by HotAssets' name index writer (a ``StoreCommitHook``): the
///   index of the generation being committed is written and fsynced; the store file is not
///   written yet.
/// - `mid-commit`: inside the metadata store's commit, the new content is written to a
///   temporary file that is not renamed over the store file yet.
/// - `mid-release`: freeing the objects of deleted or discarded trees, before each object is
///   looked at (a version's deletion reaches it once per distinct file).
/// - `before-fallback`: a delta was refused; the full package's download is about to start.
/// - `mid-settled`: recording the manifest a sync left nothing to do for (`settled.json`),
///   the new record is written to a temporary file that is not renamed over it yet.
///
/// ```sh
/// HOT_ABORT_AT=after-rename hot sync --root store --manifest http://127.0.0.1:8080/manifest.json
/// HOT_ABORT_AT=mid-commit:2 hot sync --root store --manifest http://127.0.0.1:8080/manifest.json
/// ```
package enum FaultPoint {
    #if FaultPoints
    /// The point to abort (or stop) at and how many times it is passed first.
    private struct Target {
        var name: String
        var occurrence: Int
        var stops: Bool
    }

    /// `HOT_ABORT_AT`, else `HOT_STOP_AT`, read once; nil when both are unset or empty.
    private static let target: Target? = {
        let environment = ProcessInfo.processInfo.environment
        for (variable, stops) in [("HOT_ABORT_AT", false), ("HOT_STOP_AT", true)] {
            guard let value = environment[variable], !value.isEmpty else { continue }
            if let colon = value.lastIndex(of: ":"), let count = Int(value[value.index(after: colon)...]), count >= 1 {
                return Target(name: String(value[..<colon]), occurrence: count, stops: stops)
            }
            return Target(name: value, occurrence: 1, stops: stops)
        }
        return nil
    }()

    /// How many times the target point was reached so far.
    private static let passes = Counter()

    /// Aborts the process when `HOT_ABORT_AT` names `name` (and this is the occurrence it
    /// names), or stops it when `HOT_STOP_AT` does; otherwise does nothing.
    @inline(__always)
    package static func reached(_ name: StaticString) {
        guard let target else { return }
        guard target.name == name.description else { return }
        guard passes.increment() == target.occurrence else { return }
        if target.stops { _ = raise(SIGSTOP) } else { abort() }
    }

    private final class Counter: Sendable {
        private let value = Locked(0)

        func increment() -> Int {
            value.withLock { value in
                value += 1
                return value
            }
        }
    }
    #else
    /// Does nothing: this build has no fault points (the `FaultPoints` trait is off).
    @inline(__always)
    package static func reached(_ name: StaticString) {}
    #endif
}
