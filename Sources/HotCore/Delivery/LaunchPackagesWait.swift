import Foundation

/// What ``Updater/waitForLaunchPackages(timeout:)`` found when it returned.
public struct LaunchPackagesWait: Sendable, Hashable {
    /// Whether every launch package of the last manifest applied is installed at the version
    /// it offers.
    public var isReady: Bool
    /// The launch packages not installed at the offered version when the wait ended: the app
    /// uses its bundled copies of these.
    public var missing: [String]
    /// Those of ``missing`` whose download failed during the wait.
    public var failed: [String]

    /// Creates a value.
    public init(isReady: Bool, missing: [String], failed: [String] = []) {
        self.isReady = isReady
        self.missing = missing
        self.failed = failed
    }
}
