import Foundation

/// A resolved asset: a local file and where it came from.
///
/// A plain value: its URL and its origin, compared and hashed by both.
public struct ResolvedAsset: Sendable, Hashable, CustomStringConvertible {
    /// The file.
    public var url: URL
    /// Where it came from.
    public var origin: ResolvedAsset.Origin

    /// Creates a resolved asset.
    public init(url: URL, origin: ResolvedAsset.Origin) {
        self.url = url
        self.origin = origin
    }

    /// The URL and origin.
    public var description: String {
        "ResolvedAsset(url: \(url), origin: \(origin))"
    }
}

/// Finds the local file for an asset name.
///
/// Resolution is synchronous and does no network I/O: an app asks on its main thread
/// while it draws. Resolvers chain: the installed packages first, the bundle last.
///
/// Implementations: `DirectoryAssetResolver`, `AssetResolverChain` (in `HotAssets`).
///
/// ```swift
/// if let asset = resolver.resolve("sub/sample") { load(asset.url) }
/// ```
public protocol AssetResolver: Sendable {
    /// Returns the file for `name`, or nil when this resolver has none.
    func resolve(_ name: String) -> ResolvedAsset?
}

extension ResolvedAsset {
    /// Where a resolved asset came from.
    public enum Origin: Sendable, Hashable {
        /// An installed package.
        case package(id: String, version: String)
        /// The copy bundled with the app.
        case bundle
    }
}
