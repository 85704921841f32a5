import Foundation
import HotCore
import Logging

/// What the resolvers reading the store's name index do when a lookup finds a block of it
/// damaged (its checksum is checked the first time a lookup reads it): the damage is logged
/// once and, when the caller allowed it, the index is rebuilt in the background for the next
/// reader; names whose lookup reads a damaged block are answered from the package trees
/// meanwhile.
final class IndexDamage: Sendable {
    private let logger: Logger
    private let rebuild: (@Sendable () -> Void)?
    private let reported = Locked(false)

    /// - Parameters:
    ///   - logger: Where the damage is reported.
    ///   - rebuild: Starts a rebuild of the index; nil for read-only callers.
    init(logger: Logger, rebuild: (@Sendable () -> Void)?) {
        self.logger = logger
        self.rebuild = rebuild
    }

    /// The updater's logger, and a rebuild through the updater when `rebuilding`.
    convenience init(updater: Updater, rebuilding: Bool) {
        let logger = updater.configuration.logger
        guard rebuilding else {
            self.init(logger: logger, rebuild: nil)
            return
        }
        let rebuild: @Sendable () -> Void = {
            Task {
                do {
                    try await updater.rebuildNameIndex()
                } catch {
                    logger.warning("cannot rebuild the name index: \(error)")
                }
            }
        }
        self.init(logger: logger, rebuild: rebuild)
    }

    /// The packages whose loss was reported, by number in the index.
    private let lost = Locked<Set<Int>>([])

    /// Reports that file `path` of package `number` (`id`) is gone: logged once per package,
    /// and the package marked for healing by the next sync (``LossMarker``).
    func reportLoss(package number: Int, id: String, path: String, root: URL) {
        guard lost.withLock({ $0.insert(number).inserted }) else { return }
        logger.error(
            "an installed file is gone: answering the next candidate, and the next sync heals the package",
            metadata: ["package": "\(id)", "path": "\(path)"]
        )
        LossMarker.record(id, layout: StoreLayout(root: root))
    }

    /// Logs `error` and starts the rebuild, the first time only.
    func report(_ error: HotUpdateError) {
        let first = reported.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        logger.warning("resolving through the package trees: \(error)")
        rebuild?()
    }
}

/// Answers a name as the store's name index would, from the package trees: for each
/// package in the index's order, the files of the name's folder are listed and the one
/// ranked best for the name wins (the rules the index was worked out with). What a resolver
/// falls back to when the index is found damaged after it was opened: a few directory
/// listings per name, and nothing built beforehand.
struct TreeNames: Sendable {
    /// Each package's directory (`<root>/<version path>/`, with the slash) and origin, in
    /// the order they win names.
    let packages: [(prefix: String, origin: ResolvedAsset.Origin)]
    let scales: [Int]
    let extensionRanks: [String: Int]

    init(packages: [(prefix: String, origin: ResolvedAsset.Origin)], scales: [Int], extensionOrder: [String]) {
        self.packages = packages
        self.scales = scales
        extensionRanks = AssetName.extensionRanks(extensionOrder)
    }

    func resolve(_ name: String) -> ResolvedAsset? {
        guard let key = AssetName.normalise(name) else { return nil }
        let (folder, fileName) = AssetName.split(key)
        // Every file answering `key` lies in its folder and starts with the name's stem.
        let stem = String(AssetName.parts(of: fileName[...]).stem)
        for package in packages {
            // The folder is listed only when it is a real directory of the tree, not a link.
            var folders = ContainedDirectory.Folders(tree: package.prefix)
            guard folders.holdsReal(folder + stem),
                let entries = try? FileManager.default.contentsOfDirectory(atPath: package.prefix + folder)
            else {
                continue
            }
            var best: AssetKeyRank?
            for entry in entries where entry.utf8.starts(with: stem.utf8) {
                let path = folder + entry
                guard FileSystem.isRegularFile(atPath: package.prefix + path),
                    let normalised = AssetName.normalise(path)
                else {
                    continue
                }
                let (entryFolder, entryName) = AssetName.split(normalised)
                AssetName.forEachKey(
                    path: normalised,
                    folder: entryFolder,
                    fileName: entryName,
                    scales: scales,
                    extensionRanks: extensionRanks
                ) { offered, rank in
                    guard offered == key else { return }
                    if let current = best, current <= rank { return }
                    best = rank
                }
            }
            if let best {
                return ResolvedAsset(
                    url: URL(fileURLWithPath: package.prefix + best.path, isDirectory: false),
                    origin: package.origin
                )
            }
        }
        return nil
    }
}
