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
    /// The tree's regular files, relative to ``directory``, when known (the store's file
    /// list, `Updater.fileList(of:)`): a resolver is then built from them without reading the
    /// tree. Nil, as ``Updater/installedPackages()`` returns it: the tree is walked.
    public var files: [String]?

    /// Creates a value.
    ///
    /// - Parameters:
    ///   - id: The package id.
    ///   - version: The active version.
    ///   - directory: The installed tree.
    ///   - state: Where the package stands; ``PackageState/installed`` unless said otherwise.
    ///   - installedAt: When the active version was installed; `Date.distantPast` when not known.
    ///   - files: The tree's regular files relative to `directory`, or nil to have the tree
    ///     walked by whoever needs them.
    public init(
        id: String,
        version: String,
        directory: URL,
        state: PackageState = .installed,
        installedAt: Date = .distantPast,
        files: [String]? = nil
    ) {
        self.id = id
        self.version = version
        self.directory = directory
        self.state = state
        self.installedAt = installedAt
        self.files = files
    }
}
