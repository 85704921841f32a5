import Foundation
import HotCore

/// Asks resolvers in order and returns the first answer.
///
/// Put the installed packages first (newest first) and the bundle last, so a package
/// overrides the bundle and a file a package lacks still comes from the bundle.
///
/// Consecutive ``DirectoryAssetResolver``s (and chains of them) are merged when the chain
/// is made into one index that keeps, for every name, the first resolver's answer: a name
/// costs one lookup however many packages the chain holds, and the answers are the same as
/// asking each resolver in turn. Other resolvers are asked in their place.
///
/// ```swift
/// let chain = ChainedAssetResolver([imagesPackage, bundle])
/// chain.resolve("icons/home")?.origin   // .package(id: "images", version: "3") or .bundle
/// ```
public struct ChainedAssetResolver: AssetResolver {
    /// The resolvers, asked in this order.
    public let resolvers: [any AssetResolver]

    /// The resolvers as they are asked: merged indexes and the others.
    private let segments: [Segment]
    /// The one merged index when the chain holds only directory resolvers (the usual
    /// chain): resolved without walking `segments`.
    private let sole: [String: ResolvedAsset]?

    private enum Segment: Sendable {
        /// The indexes of consecutive directory resolvers, the first one's entry kept per name.
        case merged([String: ResolvedAsset])
        case other(any AssetResolver)
    }

    /// Creates a chain, merging the indexes of consecutive directory resolvers.
    ///
    /// - Parameter resolvers: The resolvers, first asked first.
    public init(_ resolvers: [any AssetResolver]) {
        self.resolvers = resolvers
        var segments: [Segment] = []
        func append(_ index: [String: ResolvedAsset]) {
            guard case .merged(var merged)? = segments.last else {
                segments.append(.merged(index))
                return
            }
            segments.removeLast()
            if merged.isEmpty {
                merged = index
            } else {
                merged.reserveCapacity(merged.count + index.count)
                merged.merge(index) { earlier, _ in earlier }
            }
            segments.append(.merged(merged))
        }
        for resolver in resolvers {
            if let directory = resolver as? DirectoryAssetResolver {
                append(directory.index)
            } else if let chain = resolver as? ChainedAssetResolver {
                for segment in chain.segments {
                    if case .merged(let index) = segment { append(index) } else { segments.append(segment) }
                }
            } else {
                segments.append(.other(resolver))
            }
        }
        self.segments = segments
        if segments.count == 1, case .merged(let index) = segments[0] {
            sole = index
        } else {
            sole = nil
        }
    }

    /// Returns the first resolver's answer for `name`, or nil when none has one.
    public func resolve(_ name: String) -> ResolvedAsset? {
        if let sole {
            if let asset = sole[name] { return asset }
            guard let normalised = AssetName.normalise(name), normalised != name else { return nil }
            return sole[normalised]
        }
        // Index keys are normalised names, so a name that needs normalising is looked up
        // once more in its normalised form (a directory resolver does the same).
        var normalised: String??
        for segment in segments {
            switch segment {
            case .merged(let index):
                if let asset = index[name] { return asset }
                if normalised == nil { normalised = .some(AssetName.normalise(name)) }
                if let key = normalised ?? nil, key != name, let asset = index[key] { return asset }
            case .other(let resolver):
                if let asset = resolver.resolve(name) { return asset }
            }
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
    /// The tree's regular files, relative to ``directory``, when known (the store's file
    /// list): a resolver is then built from them without reading the tree. Nil: the tree is walked.
    public var files: [String]?

    /// Creates a location.
    ///
    /// - Parameters:
    ///   - id: The package id.
    ///   - version: The installed version.
    ///   - directory: The package's installed tree.
    ///   - files: The tree's regular files relative to `directory` (`Updater.fileList(of:)`),
    ///     or nil to have the tree walked.
    public init(id: String, version: String, directory: URL, files: [String]? = nil) {
        self.id = id
        self.version = version
        self.directory = directory
        self.files = files
    }
}

/// Builds the usual chain: installed packages, then the app bundle.
public enum AssetResolverChain {
    /// Indexes each package directory and the bundle, and chains them into one merged
    /// index (see ``ChainedAssetResolver``). A package whose ``InstalledPackageLocation/files``
    /// are given is indexed from them without reading its tree.
    ///
    /// ```swift
    /// let resolver = try AssetResolverChain.make(
    ///     packages: [InstalledPackageLocation(id: "images", version: "3", directory: imagesDir)],
    ///     bundle: Bundle.main.resourceURL)
    /// ```
    ///
    /// - Parameters:
    ///   - packages: Installed packages in the order they should win: newest or most
    ///     specific first. Each resolves with origin `ResolvedAsset.Origin.package(id:version:)`.
    ///   - bundle: The bundled resources, asked last with origin `ResolvedAsset.Origin.bundle`; nil for none.
    ///   - scales: Which scale variants to prefer.
    ///   - extensionOrder: Extensions preferred for names given without one.
    /// - Returns: The chain.
    /// - Throws: `HotUpdateError.Code.notFound` naming the package when one of the
    ///   directories is missing; `HotUpdateError.Code.fileSystem` when one cannot be listed.
    public static func make(
        packages: [InstalledPackageLocation], bundle: URL?, scales: ScalePreference = .standard,
        extensionOrder: [String] = DirectoryAssetResolver.defaultExtensionOrder
    ) throws -> ChainedAssetResolver {
        // Packages are indexed in parallel, one result slot each.
        let results = IndexSlots(count: packages.count)
        DispatchQueue.concurrentPerform(iterations: packages.count) { position in
            let package = packages[position]
            let origin = ResolvedAsset.Origin.package(id: package.id, version: package.version)
            results.set(
                position,
                Result {
                    if let files = package.files {
                        return DirectoryAssetResolver(
                            directory: package.directory, origin: origin, files: files, scales: scales,
                            extensionOrder: extensionOrder)
                    }
                    return try DirectoryAssetResolver(
                        directory: package.directory, origin: origin, scales: scales, extensionOrder: extensionOrder)
                })
        }
        var resolvers: [any AssetResolver] = try results.values()
        if let bundle {
            resolvers.append(
                try DirectoryAssetResolver(
                    directory: bundle, origin: .bundle, scales: scales, extensionOrder: extensionOrder))
        }
        return ChainedAssetResolver(resolvers)
    }
}

extension AssetResolverChain {
    /// The chain an app draws from: every package `updater` has installed and not
    /// disabled, most recently installed first, each indexed from the file list the store
    /// keeps (no tree is walked), then the bundle.
    ///
    /// ```swift
    /// let resolver = try await AssetResolverChain.make(updater: updater, bundle: Bundle.main.resourceURL)
    /// let sample = resolver.resolve("sub/sample")   // sub/sample@3x.png from the newest package
    /// ```
    ///
    /// - Parameters:
    ///   - updater: The updater whose installed packages are chained.
    ///   - bundle: The bundled resources, asked last; nil for none.
    ///   - scales: Which scale variants to prefer.
    ///   - extensionOrder: Extensions preferred for names given without one.
    /// - Returns: The chain.
    /// - Throws: `HotUpdateError` from the metadata store or a file list that cannot be
    ///   read (`HotUpdateError.Code.notFound`, `HotUpdateError.Code.storeCorrupt`, naming
    ///   the package); the bundle's errors as in ``make(packages:bundle:scales:extensionOrder:)``.
    public static func make(
        updater: Updater, bundle: URL?, scales: ScalePreference = .standard,
        extensionOrder: [String] = DirectoryAssetResolver.defaultExtensionOrder
    ) async throws -> ChainedAssetResolver {
        var packages: [InstalledPackageLocation] = []
        for package in try await updater.installedPackages() {
            let list = try await updater.fileList(of: package)
            packages.append(
                InstalledPackageLocation(
                    id: package.id, version: package.version, directory: package.directory,
                    files: list.files.map(\.path)))
        }
        return try make(packages: packages, bundle: bundle, scales: scales, extensionOrder: extensionOrder)
    }
}

/// One result per package, written from `concurrentPerform`'s threads (each slot by one
/// thread only) and read after it returns.
private final class IndexSlots: @unchecked Sendable {
    private let lock = NSLock()
    private var slots: [Result<DirectoryAssetResolver, any Error>?]

    init(count: Int) {
        slots = Array(repeating: nil, count: count)
    }

    func set(_ position: Int, _ result: Result<DirectoryAssetResolver, any Error>) {
        lock.withLock { slots[position] = result }
    }

    /// The resolvers in order; the first package's error, in order, when one failed.
    func values() throws -> [any AssetResolver] {
        try lock.withLock { slots }.map { slot in
            guard let slot else {
                throw HotUpdateError(.internalInconsistency, "a package was not indexed")
            }
            return try slot.get()
        }
    }
}
