import Foundation
import Testing

/// Whether this build has the engine's fault points (the package's `FaultPoints` trait, which
/// `scripts/test` and `scripts/kill-harness` turn on).
enum FaultPointBuild {
    static var isOn: Bool {
        #if FaultPoints
        true
        #else
        false
        #endif
    }

    /// Whether the tests that abort at fault points run: where the build has them, and under
    /// `CI=true` always, so that a CI build without them fails instead of skipping them.
    static var testsRun: Bool {
        isOn || ProcessInfo.processInfo.environment["CI"] == "true"
    }

    static let skipReason: Comment = """
        skipped: built without the FaultPoints trait, so HOT_ABORT_AT aborts nothing \
        (swift test --traits defaults,FaultPoints, as scripts/test runs it)
        """
}
