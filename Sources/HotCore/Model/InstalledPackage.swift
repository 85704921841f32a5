import Foundation

/// An installed package, located under the store root of this launch.
public struct InstalledPackage: Sendable, Hashable {
    /// The package id.
    public var id: String
    /// The active version.
    public var version: String
    /// The installed tree, absolute for this launch (computed from the relative stored path).
    public var directory: URL
    /// Where the package stands.
    public var state: PackageState
    /// When the active version was installed.
    public var installedAt: Date

    /// Creates a value.
    public init(id: String, version: String, directory: URL, state: PackageState, installedAt: Date) {
        self.id = id
        self.version = version
        self.directory = directory
        self.state = state
        self.installedAt = installedAt
    }
}
