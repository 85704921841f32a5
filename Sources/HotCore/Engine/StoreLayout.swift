import Foundation

/// Where things live under a store root.
///
/// ```
/// store.json (or .plist)    the metadata, relative paths only
/// packages/<id>/<version>/  the installed trees
/// staging/<uuid>/           downloads and unpacking in progress; swept at start
/// ```
public struct StoreLayout: Sendable, Hashable {
    /// The store root.
    public let root: URL

    /// Creates a layout for `root`.
    public init(root: URL) {
        self.root = root.standardizedFileURL
    }

    /// `packages/`.
    public var packagesDirectory: URL { root.appendingPathComponent("packages", isDirectory: true) }
    /// `staging/`.
    public var stagingDirectory: URL { root.appendingPathComponent("staging", isDirectory: true) }

    /// The directory of one package's versions.
    public func packageDirectory(id: String) -> URL {
        packagesDirectory.appendingPathComponent(id, isDirectory: true)
    }

    /// The relative path of an installed version's directory.
    public func relativeVersionPath(id: String, directoryName: String) -> String {
        "packages/\(id)/\(directoryName)"
    }

    /// Turns a stored relative path into a URL under the root.
    ///
    /// - Throws: ``HotUpdateError/Code/storeCorrupt`` for a path that is absolute or escapes the root.
    public func url(forRelativePath path: String) throws -> URL {
        let components = path.split(separator: "/", omittingEmptySubsequences: false)
        guard !path.isEmpty, !path.hasPrefix("/"),
            components.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." })
        else {
            throw HotUpdateError(.storeCorrupt, "stored path '\(path)' is not a relative path inside the store")
        }
        return root.appendingPathComponent(path, isDirectory: true)
    }
}
