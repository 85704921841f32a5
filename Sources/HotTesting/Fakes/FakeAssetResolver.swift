import Foundation
import HotCore

/// An `AssetResolver` answering from a fixed table, for tests of code that resolves assets.
///
/// ```swift
/// let resolver = FakeAssetResolver(["logo": ResolvedAsset(url: logoURL, origin: .bundle)])
/// ```
public struct FakeAssetResolver: AssetResolver {
    /// The table.
    public let assets: [String: ResolvedAsset]

    /// Creates a resolver answering from `assets`.
    public init(_ assets: [String: ResolvedAsset]) {
        self.assets = assets
    }

    public func resolve(_ name: String) -> ResolvedAsset? { assets[name] }
}
