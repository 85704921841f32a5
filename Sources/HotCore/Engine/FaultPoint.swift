import Foundation

/// Named points in the engine where a test can make the process die, to check that a crash
/// at that moment leaves a store the next open repairs.
///
/// When the environment variable `HOT_ABORT_AT` names a point, the process calls `abort()`
/// as soon as it reaches that point; the variable is read once, on the first call. When it
/// is unset, ``reached(_:)`` compares one optional with `nil` and returns.
///
/// The points:
/// - `after-adopt`: a staged tree's files are objects in `objects/`; the tree is still in
///   staging.
/// - `after-rename`: a tree was renamed into `packages/`; no record names it yet.
/// - `after-flush`: the group commit's file-system flush is done; the store file is not
///   written yet.
/// - `mid-commit`: inside the metadata store's commit, the new content is written to a
///   temporary file that is not renamed over the store file yet.
///
/// ```sh
/// HOT_ABORT_AT=after-rename hot sync --root store http://127.0.0.1:8080/manifest.json
/// ```
package enum FaultPoint {
    /// The name of the point to abort at, read once from `HOT_ABORT_AT`.
    private static let target: String? = {
        guard let value = ProcessInfo.processInfo.environment["HOT_ABORT_AT"], !value.isEmpty else { return nil }
        return value
    }()

    /// Aborts the process when `HOT_ABORT_AT` names `name`; otherwise does nothing.
    @inline(__always)
    package static func reached(_ name: StaticString) {
        guard let target else { return }
        if target == name.description { abort() }
    }
}
