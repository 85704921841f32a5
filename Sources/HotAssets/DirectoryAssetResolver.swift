import Foundation
import HotCore

/// Resolves asset names to the regular files of one directory tree.
///
/// The tree is read once, when the resolver is created, into a dictionary from every
/// name that can be asked to the best file for it; ``resolve(_:)`` then does no file-system
/// I/O. Files added to the tree later are not seen: make a new resolver (installed
/// package trees never change).
///
/// How a name is resolved (after stripping a leading `/` or `./`; a name with a `..`
/// component resolves to nil):
/// - a name whose file name carries a scale suffix (`sub/sample@3x.png`), or has no
///   extension and exists as a file (`LICENSE`), matches that path exactly; a scale
///   suffix without extension (`sub/sample@3x`) takes that scale with any extension;
/// - a name with an extension (`sub/sample.png`) finds the scale variants in
///   ``ScalePreference`` order: `sub/sample@3x.png`, `sub/sample@2x.png`, then
///   `sub/sample.png` itself (which is found last even when scale 1 is not listed);
/// - a name without an extension (`sub/sample`) finds the scale variants the same way,
///   with any extension: at one scale, extensions are preferred in `extensionOrder`
///   (default `png`, `jpg`, `jpeg`, `webp`, `gif`, `pdf`, compared case-insensitively),
///   then the others alphabetically.
///
/// Only regular files are returned: symbolic links (to files or directories) and other
/// special files are ignored, and no link is followed while walking the tree.
///
/// ```swift
/// let bundle = try DirectoryAssetResolver(directory: Bundle.main.resourceURL!, origin: .bundle)
/// bundle.resolve("images/sample")?.url   // …/images/sample@3x.png
/// ```
public struct DirectoryAssetResolver: AssetResolver {
    /// The extension order used unless another is given.
    public static let defaultExtensionOrder = ["png", "jpg", "jpeg", "webp", "gif", "pdf"]

    /// The directory whose tree is resolved.
    public let directory: URL
    /// The origin every resolved asset reports.
    public let origin: ResolvedAsset.Origin
    /// The scale preference the index was built with.
    public let scales: ScalePreference
    /// How many regular files the tree held when it was indexed.
    public let fileCount: Int

    /// Every name that can be asked (always in normalised form) to its best file.
    let index: [String: ResolvedAsset]

    /// Indexes the tree under `directory`.
    ///
    /// - Parameters:
    ///   - directory: The root of the tree: the app bundle's resources, or an installed package.
    ///   - origin: What resolved assets report: `ResolvedAsset.Origin.bundle` or
    ///     `ResolvedAsset.Origin.package(id:version:)`.
    ///   - scales: Which scale variants to prefer.
    ///   - extensionOrder: Extensions preferred for names given without one, best first.
    /// - Throws: `HotUpdateError.Code.notFound` when `directory` is not a directory (a
    ///   symbolic link to one is accepted as the root); `HotUpdateError.Code.fileSystem`
    ///   when part of the tree cannot be listed.
    public init(
        directory: URL,
        origin: ResolvedAsset.Origin,
        scales: ScalePreference = .standard,
        extensionOrder: [String] = DirectoryAssetResolver.defaultExtensionOrder
    ) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue
        else {
            throw HotUpdateError(
                .notFound,
                "the asset directory does not exist or is not a directory",
                packageID: origin.packageID,
                subject: directory.path
            )
        }
        var builder = IndexBuilder(
            root: directory,
            origin: origin,
            scales: scales,
            extensionRanks: Self.ranks(extensionOrder)
        )
        try builder.walk(directory, relative: "")
        self.directory = directory
        self.origin = origin
        self.scales = scales
        self.fileCount = builder.fileCount
        self.index = builder.index.mapValues(\.asset)
    }

    /// Indexes a tree from the list of its regular files, without reading the tree: the
    /// fast way for an installed package, whose file list the store already keeps (see
    /// ``AssetResolverChain/make(updater:bundle:scales:extensionOrder:rebuildingIndex:)``). Names resolve
    /// exactly as for a resolver that walked the tree.
    ///
    /// The paths are taken to be the tree's regular files, as the store's file lists are:
    /// nothing is checked on disk here, so a path the list names resolves even when the file
    /// has since gone. The chain made from an updater leaves such files out before it gets
    /// here, and marks their package for the next sync to heal. A path with a `..`
    /// component is skipped; leading `/`, `./` and empty components are dropped.
    ///
    /// ```swift
    /// let list = try await updater.fileList(of: package)
    /// let images = DirectoryAssetResolver(
    ///     directory: package.directory, origin: .package(id: package.id, version: package.version),
    ///     files: list.files.map(\.path))
    /// ```
    ///
    /// - Parameters:
    ///   - directory: The root of the tree the paths are relative to.
    ///   - origin: What resolved assets report.
    ///   - files: The tree's regular files, `/`-separated and relative to `directory`.
    ///   - scales: Which scale variants to prefer.
    ///   - extensionOrder: Extensions preferred for names given without one, best first.
    public init(
        directory: URL,
        origin: ResolvedAsset.Origin,
        files: [String],
        scales: ScalePreference = .standard,
        extensionOrder: [String] = DirectoryAssetResolver.defaultExtensionOrder
    ) {
        var builder = IndexBuilder(
            root: directory,
            origin: origin,
            scales: scales,
            extensionRanks: Self.ranks(extensionOrder)
        )
        builder.index.reserveCapacity(files.count * 3)
        // One string append per file: appendingPathComponent re-parses the whole URL.
        let prefix = directory.path.hasSuffix("/") ? directory.path : directory.path + "/"
        for file in files {
            guard let path = AssetName.normalise(file) else { continue }
            // `/` is ASCII: its UTF-8 index is a character boundary.
            let slash = path.utf8.lastIndex(of: UInt8(ascii: "/"))
            let folder = slash.map { String(path[...$0]) } ?? ""
            let fileName = slash.map { String(path[path.utf8.index(after: $0)...]) } ?? path
            builder.add(
                path: path,
                folder: folder,
                fileName: fileName,
                url: URL(fileURLWithPath: prefix + path, isDirectory: false)
            )
        }
        self.directory = directory
        self.origin = origin
        self.scales = scales
        self.fileCount = builder.fileCount
        self.index = builder.index.mapValues(\.asset)
    }

    /// Each extension's place in `order`, lowercased; the first place wins for repeats.
    private static func ranks(_ order: [String]) -> [String: Int] {
        AssetName.extensionRanks(order)
    }

    /// Returns the best file for `name` in this tree, or nil.
    public func resolve(_ name: String) -> ResolvedAsset? {
        if let asset = index[name] { return asset }
        guard let normalised = AssetName.normalise(name), normalised != name else { return nil }
        return index[normalised]
    }
}

extension ResolvedAsset.Origin {
    /// The package id, for messages.
    var packageID: String? {
        if case .package(let id, _) = self { return id }
        return nil
    }
}

/// Walks a tree and keeps, for every name that can be asked, the best file.
private struct IndexBuilder {
    typealias Rank = AssetKeyRank

    struct Entry {
        var rank: Rank
        var asset: ResolvedAsset
    }

    let root: URL
    let origin: ResolvedAsset.Origin
    let scales: ScalePreference
    let extensionRanks: [String: Int]
    var index: [String: Entry] = [:]
    var fileCount = 0

    mutating func walk(_ directory: URL, relative: String) throws {
        var found: [(path: String, folder: String, name: String, url: URL)] = []
        do {
            try DirectoryWalker.walk(directory.path) { item in
                if item.kind == .file {
                    let folder = item.path.dropLast(item.name.count)
                    let prefix = relative.isEmpty ? "" : relative + "/"
                    found.append(
                        (
                            prefix + item.path, prefix + folder, item.name,
                            URL(fileURLWithPath: item.absolute, isDirectory: false)
                        )
                    )
                }
                return item.kind == .directory
            }
        } catch {
            throw HotUpdateError.wrap(
                error,
                as: .fileSystem,
                "cannot list \(directory.path) while indexing assets",
                packageID: origin.packageID
            )
        }
        for file in found { add(path: file.path, folder: file.folder, fileName: file.name, url: file.url) }
    }

    mutating func add(path: String, folder: String, fileName: String, url: URL) {
        fileCount += 1
        let asset = ResolvedAsset(url: url, origin: origin)
        AssetName.forEachKey(
            path: path,
            folder: folder,
            fileName: fileName,
            scales: scales.scales,
            extensionRanks: extensionRanks
        ) { key, rank in
            offer(key, rank, asset)
        }
    }

    private mutating func offer(_ key: String, _ rank: Rank, _ asset: ResolvedAsset) {
        // Through the subscript's modify accessor: the key is hashed once.
        Self.keepBetter(&index[key], Entry(rank: rank, asset: asset))
    }

    private static func keepBetter(_ slot: inout Entry?, _ candidate: Entry) {
        if let current = slot, current.rank <= candidate.rank { return }
        slot = candidate
    }
}
