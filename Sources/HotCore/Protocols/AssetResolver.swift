import Foundation

/// A resolved asset: a local file and where it came from.
///
/// A value type with two shapes inside. One holds its URL and origin. The other, which the
/// store's name index hands out for a file it has answered before, holds a reference to
/// that answer, kept by the resolver: resolving then copies two words and makes no URL,
/// and ``url`` and ``origin`` read the kept answer (the same `URL` every time). The two
/// shapes are equal when their URLs and origins are.
public struct ResolvedAsset: Sendable, Hashable, CustomStringConvertible {
    /// The file.
    public var url: URL {
        get {
            switch answer {
            case .made(let url, _): url
            case .kept(let kept, _): kept._withUnsafeGuaranteedRef { $0.url }
            }
        }
        set { answer = .made(newValue, origin) }
    }

    /// Where it came from.
    public var origin: ResolvedAsset.Origin {
        get {
            switch answer {
            case .made(_, let origin): origin
            case .kept(let kept, _): kept._withUnsafeGuaranteedRef { $0.origin }
            }
        }
        set { answer = .made(url, newValue) }
    }

    @usableFromInline var answer: Answer

    @usableFromInline enum Answer: Sendable {
        case made(URL, ResolvedAsset.Origin)
        /// A kept answer, unretained, and the object that keeps it alive, retained: one
        /// reference counted for the whole answer.
        case kept(Unmanaged<KeptAnswer>, owner: any AnyObject & Sendable)
    }

    /// Creates a resolved asset.
    public init(url: URL, origin: ResolvedAsset.Origin) {
        answer = .made(url, origin)
    }

    /// An asset that reads `kept`, which `owner` keeps alive for as long as it lives.
    /// Inlinable: the resolvers of other modules make one for every name they answer
    /// (measured: about 5% of a resolve at 100,000 names when it was a call).
    @inlinable package init(kept: Unmanaged<KeptAnswer>, owner: any AnyObject & Sendable) {
        answer = .kept(kept, owner: owner)
    }

    /// Whether the two assets name the same file from the same origin, whichever shape each
    /// has (two that read the same kept answer are equal without reading it).
    public static func == (lhs: ResolvedAsset, rhs: ResolvedAsset) -> Bool {
        if case .kept(let left, _) = lhs.answer, case .kept(let right, _) = rhs.answer,
            left.toOpaque() == right.toOpaque()
        {
            return true
        }
        return lhs.url == rhs.url && lhs.origin == rhs.origin
    }

    /// Hashes the URL and origin, which `==` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(url)
        hasher.combine(origin)
    }

    /// The URL and origin, whichever shape holds them.
    public var description: String {
        "ResolvedAsset(url: \(url), origin: \(origin))"
    }
}

/// An answer a resolver made once and keeps, for the ``ResolvedAsset``s that read it.
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
