import Foundation
import HotCore

/// Resolves names through the store's name index, queried in place: what
/// ``AssetResolverChain/make(updater:bundle:scales:extensionOrder:rebuildingIndex:)`` chains
/// before the bundle when the store has an index for its current snapshot. Answers as the
/// chain built from the file lists does (the index was worked out with the same rules).
///
/// Opening costs O(packages): one origin and one directory prefix per package. Each answer
/// is made once (its URL) and kept, so a name asked again costs a lookup and a dictionary hit.
struct StoreIndexResolver: AssetResolver {
    let index: NameIndex
    /// `<root>/<version path>/` of each package of the index.
    private let prefixes: [String]
    private let origins: [ResolvedAsset.Origin]
    private let answers = AnswerCache()

    init(index: NameIndex, root: URL) {
        self.index = index
        let base = root.path.hasSuffix("/") ? root.path : root.path + "/"
        var prefixes: [String] = []
        var origins: [ResolvedAsset.Origin] = []
        for number in 0..<index.packageCount {
            let package = index.package(number)
            prefixes.append(base + package.path + "/")
            origins.append(.package(id: package.id, version: package.version))
        }
        self.prefixes = prefixes
        self.origins = origins
    }

    func resolve(_ name: String) -> ResolvedAsset? {
        var found = index.lookup(name)
        if found == nil {
            guard let normalised = AssetName.normalise(name), normalised != name else { return nil }
            found = index.lookup(normalised)
        }
        guard let number = found else { return nil }
        if let known = answers.answer(number) { return known }
        let file = index.file(number)
        guard file.package < prefixes.count else { return nil }
        let asset = ResolvedAsset(
            url: URL(fileURLWithPath: prefixes[file.package] + file.path, isDirectory: false),
            origin: origins[file.package])
        answers.keep(asset, for: number)
        return asset
    }
}

/// The answers made so far, by file number; shared by the copies of a resolver.
private final class AnswerCache: @unchecked Sendable {
    private let lock = NSLock()
    private var answers: [Int: ResolvedAsset] = [:]

    func answer(_ number: Int) -> ResolvedAsset? {
        lock.lock()
        defer { lock.unlock() }
        return answers[number]
    }

    func keep(_ asset: ResolvedAsset, for number: Int) {
        lock.lock()
        answers[number] = asset
        lock.unlock()
    }
}
