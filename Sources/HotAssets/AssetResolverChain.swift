import Foundation
import HotCore
import Logging

/// Asks resolvers in order and returns the first answer.
///
/// Put the installed packages first (newest first) and the bundle last, so a package
/// overrides the bundle and a file a package lacks still comes from the bundle. The usual
/// chain is made by ``make(updater:bundle:scales:extensionOrder:rebuildingIndex:)`` (every
/// package an updater installed, then the bundle) or
/// ``make(packages:bundle:scales:extensionOrder:logger:)`` (packages given by the app).
///
/// Consecutive ``DirectoryAssetResolver``s (and chains of them) are merged when the chain
/// is made into one index that keeps, for every name, the first resolver's answer: a name
/// costs one lookup however many packages the chain holds, and the answers are the same as
/// asking each resolver in turn. Other resolvers are asked in their place.
///
/// ```swift
/// let chain = AssetResolverChain([imagesPackage, bundle])
/// chain.resolve("icons/home")?.origin   // .package(id: "images", version: "3") or .bundle
/// ```
public struct AssetResolverChain: AssetResolver {
    /// The resolvers, asked in this order.
    public let resolvers: [any AssetResolver]

    /// The resolvers as they are asked: merged indexes and the others.
    private let segments: [Segment]
    /// The one merged index when the chain holds only directory resolvers (the usual
    /// chain): resolved without walking `segments`.
    private let sole: [String: ResolvedAsset]?
    /// The store's name index followed by nothing or by merged directory resolvers (the
    /// bundle): the chain an app makes from a store with an index, resolved without
    /// walking `segments` or calling through an existential.
    private let indexed: IndexedPath?

    /// A class, so that asking it retains one reference: a struct of references copied out
    /// of the optional would retain each of them for every name asked.
    private final class IndexedPath: Sendable {
        let index: StoreIndexResolver.Storage
        let fallback: [String: ResolvedAsset]?

        init(index: StoreIndexResolver, fallback: [String: ResolvedAsset]?) {
            self.index = index.storage
            self.fallback = fallback
        }

        func resolve(_ name: String) -> ResolvedAsset? {
            if let asset = index.resolve(name) { return asset }
            guard let fallback else { return nil }
            if let asset = fallback[name] { return asset }
            guard let normalised = AssetName.normalise(name), normalised != name else { return nil }
            return fallback[normalised]
        }
    }

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
            } else if let chain = resolver as? AssetResolverChain {
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
        if let first = segments.first, case .other(let resolver) = first,
            let index = resolver as? StoreIndexResolver
        {
            if segments.count == 1 {
                indexed = IndexedPath(index: index, fallback: nil)
            } else if segments.count == 2, case .merged(let fallback) = segments[1] {
                indexed = IndexedPath(index: index, fallback: fallback)
            } else {
                indexed = nil
            }
        } else {
            indexed = nil
        }
    }

    /// Returns the first resolver's answer for `name`, or nil when none has one.
    public func resolve(_ name: String) -> ResolvedAsset? {
        if let indexed { return indexed.resolve(name) }
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

// MARK: - The usual chain: installed packages, then the app bundle

extension AssetResolverChain {
    /// Indexes each package directory and the bundle, and chains them into one merged
    /// index. A package whose `InstalledPackage.files` are given is indexed from them without
    /// reading its tree.
    ///
    /// ```swift
    /// let resolver = try AssetResolverChain.make(
    ///     packages: [InstalledPackage(id: "images", version: "3", directory: imagesDir)],
    ///     bundle: Bundle.main.resourceURL)
    /// ```
    ///
    /// - Parameters:
    ///   - packages: Installed packages in the order they should win: newest or most
    ///     specific first. Each resolves with origin `ResolvedAsset.Origin.package(id:version:)`.
    ///   - bundle: The bundled resources, asked last with origin `ResolvedAsset.Origin.bundle`; nil for none.
    ///   - scales: Which scale variants to prefer.
    ///   - extensionOrder: Extensions preferred for names given without one.
    ///   - logger: Where a package that cannot be indexed is reported.
    /// - Returns: The chain. A package whose directory is missing or cannot be listed is
    ///   left out with a logged reason: its names fall through to the next package and the
    ///   bundle. One bad package never costs the app its resolver.
    /// - Throws: `HotUpdateError.Code.notFound` or `HotUpdateError.Code.fileSystem` when
    ///   the bundle directory is missing or cannot be listed.
    public static func make(
        packages: [InstalledPackage],
        bundle: URL?,
        scales: ScalePreference = .standard,
        extensionOrder: [String] = DirectoryAssetResolver.defaultExtensionOrder,
        logger: Logger = Logger(label: "HotAssets", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws -> AssetResolverChain {
        // Packages are indexed in parallel, one result slot each.
        let results = IndexSlots(count: packages.count)
        DispatchQueue.concurrentPerform(iterations: packages.count) { position in
            let package = packages[position]
            let origin = ResolvedAsset.Origin.package(id: package.id, version: package.version)
            results.set(
                position,
                Result {
                    guard FileManager.default.fileExists(atPath: package.directory.path) else {
                        throw HotUpdateError(
                            .notFound,
                            "the installed tree is missing",
                            packageID: package.id,
                            subject: package.directory.path
                        )
                    }
                    if let files = package.files {
                        return DirectoryAssetResolver(
                            directory: package.directory,
                            origin: origin,
                            files: files,
                            scales: scales,
                            extensionOrder: extensionOrder
                        )
                    }
                    return try DirectoryAssetResolver(
                        directory: package.directory,
                        origin: origin,
                        scales: scales,
                        extensionOrder: extensionOrder
                    )
                }
            )
        }
        var resolvers: [any AssetResolver] = []
        for (package, result) in zip(packages, results.results()) {
            switch result {
            case .success(let resolver):
                resolvers.append(resolver)
            case .failure(let error):
                logger.warning(
                    "not resolving from a package that cannot be indexed: \(error)",
                    metadata: ["package": "\(package.id)", "version": "\(package.version)"]
                )
            }
        }
        return AssetResolverChain(
            try resolvers + bundleResolver(bundle, scales: scales, extensionOrder: extensionOrder)
        )
    }

    /// The bundle's resolver, the chain's last, or none without a bundle.
    private static func bundleResolver(
        _ bundle: URL?,
        scales: ScalePreference,
        extensionOrder: [String]
    ) throws -> [any AssetResolver] {
        guard let bundle else { return [] }
        return [
            try DirectoryAssetResolver(
                directory: bundle,
                origin: .bundle,
                scales: scales,
                extensionOrder: extensionOrder
            )
        ]
    }

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
    /// - Returns: The chain. Packages are left out, each with a reason logged on the
    ///   updater's logger, when they are not healthy (`PackageState.fileMissing`,
    ///   `PackageState.digestMismatch`), their tree is gone, or their file list is missing
    ///   or unreadable: names then fall through to the next package and the bundle. When the
    ///   store itself cannot be read, the chain holds the bundle alone.
    /// - Throws: Only the bundle's errors, as in ``make(packages:bundle:scales:extensionOrder:logger:)``.
    ///
    /// When the store keeps a name index for its current snapshot (a ``NameIndexWriter`` among
    /// the updater's commit hooks writes one in every commit) and `scales` and
    /// `extensionOrder` are the defaults it was worked out with, the packages
    /// resolve through the index, mapped and queried in place: the chain is ready in time that
    /// does not grow with the number of files. Otherwise, the chain is built from the file
    /// lists, and a missing or damaged index is logged (and rebuilt, with `rebuildingIndex`).
    ///
    /// - Parameter rebuildingIndex: Whether a missing or damaged name index is rebuilt in the
    ///   background (under the store's exclusive lock); false for read-only use.
    public static func make(
        updater: Updater,
        bundle: URL?,
        scales: ScalePreference = .standard,
        extensionOrder: [String] = DirectoryAssetResolver.defaultExtensionOrder,
        rebuildingIndex: Bool = true
    ) async throws -> AssetResolverChain {
        try await make(
            updater: updater,
            bundle: bundle,
            scales: scales,
            extensionOrder: extensionOrder,
            rebuildingIndex: rebuildingIndex,
            checkingPresence: true
        )
    }

    /// The chain ``make(updater:bundle:scales:extensionOrder:rebuildingIndex:)`` makes, with
    /// the check of each answer's file turned off when the store's name index answers: for
    /// the benchmark that measures what the check costs, never for an app (an answer could
    /// then name a file that is gone).
    @_spi(Benchmarks)
    public static func makeWithoutPresenceCheck(updater: Updater, bundle: URL?) async throws -> AssetResolverChain {
        try await make(
            updater: updater,
            bundle: bundle,
            scales: .standard,
            extensionOrder: DirectoryAssetResolver.defaultExtensionOrder,
            rebuildingIndex: false,
            checkingPresence: false
        )
    }

    private static func make(
        updater: Updater,
        bundle: URL?,
        scales: ScalePreference,
        extensionOrder: [String],
        rebuildingIndex: Bool,
        checkingPresence: Bool
    ) async throws -> AssetResolverChain {
        let logger = updater.configuration.logger
        if scales.scales == NameIndexFormat.defaultScales, extensionOrder == NameIndexFormat.defaultExtensionOrder,
            let store = await IndexedStore.open(updater, rebuilding: rebuildingIndex)
        {
            let index: [any AssetResolver] = [
                StoreIndexResolver(
                    index: store.index,
                    root: store.root,
                    damage: store.damage,
                    checkingPresence: checkingPresence
                )
            ]
            return AssetResolverChain(
                try index + bundleResolver(bundle, scales: scales, extensionOrder: extensionOrder)
            )
        }
        var packages: [InstalledPackage] = []
        let installed: [InstalledPackage]
        do {
            installed = try await updater.installedPackages()
        } catch {
            logger.error("the store cannot be read; resolving from the bundle only: \(error)")
            installed = []
        }
        for package in installed {
            let metadata: Logger.Metadata = ["package": "\(package.id)", "version": "\(package.version)"]
            guard package.state.servesAssets else {
                logger.warning("not resolving from a damaged package (\(package.state))", metadata: metadata)
                continue
            }
            switch ContainedDirectory.check(tree: package.directory, root: updater.layout.root) {
            case .real:
                break
            case .missing:
                // Marked for the next sync to heal: the check at launch looks inside no
                // package's directory, so the reader that finds it gone says so.
                logger.warning("not resolving from a package whose tree is gone", metadata: metadata)
                LossMarker.record(package.id, layout: updater.layout)
                continue
            case .foreign(let component):
                // A link in place of a directory of the tree, perhaps out of the store: nothing is
                // served through it, and the next sync heals the package.
                logger.error(
                    "not resolving from a package whose tree is not a directory inside the store",
                    metadata: metadata.merging(["component": "\(component)"]) { $1 }
                )
                LossMarker.record(package.id, layout: updater.layout)
                continue
            }
            do {
                var listed = package
                let files = try await updater.fileList(of: package).files.map(\.path)
                // The lists are what was installed; a file gone since is left out, so its names
                // fall through to the next package and the bundle, and the package is marked
                // for the next sync to heal (a stat per file, on this path only: the name index
                // checks each answer once instead).
                let tree = package.directory.path
                let present = try await FileSystem.offload { () -> [String] in
                    ContainedDirectory.regularFiles(files, under: tree)
                }
                if present.count < files.count {
                    logger.error(
                        "installed files are gone: answering the next candidate, and the next sync heals the package",
                        metadata: metadata.merging(["missing": "\(files.count - present.count)"]) { $1 }
                    )
                    LossMarker.record(package.id, layout: updater.layout)
                }
                listed.files = present
                packages.append(listed)
            } catch {
                logger.warning(
                    "not resolving from a package whose file list cannot be read: \(error)",
                    metadata: metadata
                )
            }
        }
        return try make(
            packages: packages,
            bundle: bundle,
            scales: scales,
            extensionOrder: extensionOrder,
            logger: logger
        )
    }
}

/// One result per package, written from `concurrentPerform`'s threads (each slot by one
/// thread only) and read after it returns.
private final class IndexSlots: Sendable {
    private let slots: Locked<[Result<DirectoryAssetResolver, any Error>?]>

    init(count: Int) {
        slots = Locked(Array(repeating: nil, count: count))
    }

    func set(_ position: Int, _ result: Result<DirectoryAssetResolver, any Error>) {
        slots.withLock { $0[position] = result }
    }

    /// Each package's result, in order.
    func results() -> [Result<DirectoryAssetResolver, any Error>] {
        slots.value.map { slot in
            slot ?? .failure(HotUpdateError(.internalInconsistency, "a package was not indexed"))
        }
    }
}
