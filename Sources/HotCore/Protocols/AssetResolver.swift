import Foundation

/// A resolved asset: a local file and where it came from.
///
/// A value type of two words: a reference to the answer it reads (its URL and origin), and
/// the object that keeps that answer alive. An asset made with ``init(url:origin:)`` keeps
/// its own answer. One that the store's name index hands out for a file it has answered
/// before reads the answer the resolver keeps, and keeps the resolver's storage: resolving
/// then copies two words, counts one reference and makes no URL, and ``url`` and ``origin``
/// read the kept answer (the same `URL` every time).
///
/// Every stored property has a layout known where the asset is used, so an optional asset
/// is returned in two registers and dropped with one release; a `URL` held inline would
/// make each copy and each drop a call through the type's metadata.
public struct ResolvedAsset: Sendable, Hashable, CustomStringConvertible {
    /// The file.
    public var url: URL {
        get { answer._withUnsafeGuaranteedRef { $0.url } }
        set { self = ResolvedAsset(url: newValue, origin: origin) }
    }

    /// Where it came from.
    public var origin: ResolvedAsset.Origin {
        get { answer._withUnsafeGuaranteedRef { $0.origin } }
        set { self = ResolvedAsset(url: url, origin: newValue) }
    }

    /// The answer read, unretained: `owner` keeps it alive.
    @usableFromInline let answer: Unmanaged<KeptAnswer>
    /// The answer itself, or the object that keeps it (one reference counted for both).
    @usableFromInline let owner: any AnyObject & Sendable

    /// Creates a resolved asset.
    public init(url: URL, origin: ResolvedAsset.Origin) {
        let made = KeptAnswer(url: url, origin: origin)
        answer = Unmanaged.passUnretained(made)
        owner = made
    }

    /// An asset that reads `kept`, which `owner` keeps alive for as long as it lives.
    /// Inlinable: the resolvers of other modules make one for every name they answer
    /// (measured: about 5% of a resolve at 100,000 names when it was a call).
    @inlinable package init(kept: Unmanaged<KeptAnswer>, owner: any AnyObject & Sendable) {
        answer = kept
        self.owner = owner
    }

    /// Whether the two assets name the same file from the same origin, however each was
    /// made (two that read the same answer are equal without reading it).
    public static func == (lhs: ResolvedAsset, rhs: ResolvedAsset) -> Bool {
        lhs.answer.toOpaque() == rhs.answer.toOpaque() || (lhs.url == rhs.url && lhs.origin == rhs.origin)
    }

    /// Hashes the URL and origin, which `==` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(url)
        hasher.combine(origin)
    }

    /// The URL and origin.
    public var description: String {
        "ResolvedAsset(url: \(url), origin: \(origin))"
    }
}

/// An answer, made once: an asset's own, or one a resolver keeps for the ``ResolvedAsset``s
/// that read it.
@usableFromInline package final class KeptAnswer: Sendable {
    package let url: URL
    package let origin: ResolvedAsset.Origin

    package init(url: URL, origin: ResolvedAsset.Origin) {
        self.url = url
        self.origin = origin
    }
}

/// Finds the local file for an asset name.
///
/// Resolution is synchronous and does no network I/O: an app asks on its main thread
/// while it draws. Resolvers chain: the installed packages first, the bundle last.
///
/// Implementations: `DirectoryAssetResolver`, `ChainedAssetResolver`, `AssetResolverChain`
/// (in `HotAssets`).
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
