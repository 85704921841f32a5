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
    /// `CI=true` always, so that a CI build without them fails instead of skipping them;
    /// except in a configuration built without them on purpose, which says so with
    /// `HOT_TESTS_WITHOUT_FAULT_POINTS=1` (the Apple configuration's run in
    /// `scripts/test-traits`): new fault-point tests are then skipped there, by name of the
    /// trait, instead of each needing a place in that script's skip list.
    static var testsRun: Bool {
        let environment = ProcessInfo.processInfo.environment
        if isOn { return true }
        return environment["CI"] == "true" && environment["HOT_TESTS_WITHOUT_FAULT_POINTS"] != "1"
    }

    static let skipReason: Comment = """
        skipped: built without the FaultPoints trait, so HOT_ABORT_AT aborts nothing \
        (swift test --traits defaults,FaultPoints, as scripts/test runs it)
        """
}
