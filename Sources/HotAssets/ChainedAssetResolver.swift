import Foundation
import HotCore

/// Asks resolvers in order and returns the first answer.
///
/// Put the installed packages first (newest first) and the bundle last, so a package
/// overrides the bundle and a file a package lacks still comes from the bundle.
///
/// ```swift
/// let chain = ChainedAssetResolver([imagesPackage, bundle])
/// chain.resolve("icons/home")?.origin   // .package(id: "images", version: "3") or .bundle
/// ```
public struct ChainedAssetResolver: AssetResolver {
    /// The resolvers, asked in this order.
    public let resolvers: [any AssetResolver]

    /// Creates a chain.
    ///
    /// - Parameter resolvers: The resolvers, first asked first.
    public init(_ resolvers: [any AssetResolver]) {
        self.resolvers = resolvers
    }

    /// Returns the first resolver's answer for `name`, or nil when none has one.
    public func resolve(_ name: String) -> ResolvedAsset? {
        for resolver in resolvers {
            if let asset = resolver.resolve(name) { return asset }
        }
        return nil
    }
}

/// Where an installed package's files are.
public struct InstalledPackageLocation: Sendable, Hashable {
    /// The package id.
    public var id: String
    /// The installed version.
    public var version: String
    /// The package's installed tree.
    public var directory: URL

    /// Creates a location.
    public init(id: String, version: String, directory: URL) {
        self.id = id
        self.version = version
        self.directory = directory
    }
}

/// Builds the usual chain: installed packages, then the app bundle.
public enum AssetResolverChain {
    /// Indexes each package directory and the bundle, and chains them.
    ///
    /// ```swift
    /// let resolver = try AssetResolverChain.make(
    ///     packages: [InstalledPackageLocation(id: "images", version: "3", directory: imagesDir)],
    ///     bundle: Bundle.main.resourceURL)
    /// ```
    ///
    /// - Parameters:
    ///   - packages: Installed packages in the order they should win: newest or most
    ///     specific first. Each resolves with origin ``AssetOrigin/package(id:version:)``.
    ///   - bundle: The bundled resources, asked last with origin ``AssetOrigin/bundle``; nil for none.
    ///   - scales: Which scale variants to prefer.
    ///   - extensionOrder: Extensions preferred for names given without one.
    /// - Returns: The chain.
    /// - Throws: ``HotUpdateError/Code/notFound`` naming the package when one of the
    ///   directories is missing; ``HotUpdateError/Code/fileSystem`` when one cannot be listed.
    public static func make(
        packages: [InstalledPackageLocation], bundle: URL?, scales: ScalePreference = .standard,
        extensionOrder: [String] = DirectoryAssetResolver.defaultExtensionOrder
    ) throws -> ChainedAssetResolver {
        var resolvers: [any AssetResolver] = try packages.map { package in
            try DirectoryAssetResolver(
                directory: package.directory, origin: .package(id: package.id, version: package.version),
                scales: scales, extensionOrder: extensionOrder)
        }
        if let bundle {
            resolvers.append(
                try DirectoryAssetResolver(
                    directory: bundle, origin: .bundle, scales: scales, extensionOrder: extensionOrder))
        }
        return ChainedAssetResolver(resolvers)
    }
}
