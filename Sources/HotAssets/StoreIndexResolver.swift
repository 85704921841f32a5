import Foundation
import HotCore

/// Resolves names through the store's name index, queried in place: what
/// ``AssetResolverChain/make(updater:bundle:scales:extensionOrder:rebuildingIndex:)`` chains
/// before the bundle when the store has an index for its current snapshot. Answers as the
/// chain built from the file lists does (the index was worked out with the same rules).
///
/// Opening costs O(packages): one origin and one directory prefix per package, and one
/// empty answer slot per file. Each answer is made once (its URL) and kept in its file's
/// slot, so a name asked again costs a lookup and one atomic load, with no lock.
///
/// Everything it holds is in one object, so that a copy of the resolver, and a call
/// through it, retains one reference at most: on the path of a name asked again, the only
/// reference counted is the answer's own.
struct StoreIndexResolver: AssetResolver {
    let storage: Storage

    init(index: NameIndex, root: URL) {
        storage = Storage(index: index, root: root)
    }

    /// The index queried.
    var index: NameIndex { storage.index }

    func resolve(_ name: String) -> ResolvedAsset? {
        storage.resolve(name)
    }

    final class Storage: Sendable {
        let index: NameIndex
        /// `<root>/<version path>/` of each package of the index.
        private let prefixes: [String]
        private let origins: [ResolvedAsset.Origin]
        private let answers: any AnswerSlots

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
            answers = makeAnswerSlots(count: index.fileCount)
        }

        func resolve(_ name: String) -> ResolvedAsset? {
            var found = index.lookup(name)
            if found == nil {
                guard let normalised = AssetName.normalise(name), normalised != name else { return nil }
                found = index.lookup(normalised)
            }
            guard let number = found, number < index.fileCount, !prefixes.isEmpty else { return nil }
            return answers.answer(number) { answer(number) }
        }

        /// The answer for file `number`, made.
        private func answer(_ number: Int) -> ResolvedAsset {
            let file = index.file(number)
            let package = min(file.package, prefixes.count - 1)
            return ResolvedAsset(
                url: URL(fileURLWithPath: prefixes[package] + file.path, isDirectory: false),
                origin: origins[package]
            )
        }
    }
}
