import Foundation
import HotCore

/// Resolves names through the store's name index, queried in place: what
/// ``AssetResolverChain/make(updater:bundle:scales:extensionOrder:rebuildingIndex:)`` chains
/// before the bundle when the store has an index for its current snapshot. Answers as the
/// chain built from the file lists does (the index was worked out with the same rules).
///
/// Opening costs O(packages): one origin and one directory prefix per package, and one
/// empty answer slot per file. Each answer is made once (its URL) and kept in its file's
/// slot, so a name asked again costs a lookup, one atomic load, with no lock, and a copy of
/// the kept asset.
///
/// When a lookup finds a block of the index damaged, the damage is reported (logged, and the
/// index rebuilt for the next reader when allowed), and every name whose lookup reads a
/// damaged block is answered from the package trees (``TreeNames``), as the index would
/// have answered it; blocks that passed their checksum go on answering.
///
/// Everything it holds is in one object, so that a copy of the resolver, and a call
/// through it, retains one reference at most.
struct StoreIndexResolver: AssetResolver {
    let storage: Storage

    /// - Parameter checkingPresence: Whether each answer's file is checked once, when the
    ///   answer is made (one `stat`); off only to measure what that check costs.
    init(index: NameIndex, root: URL, damage: IndexDamage, checkingPresence: Bool = true) {
        storage = Storage(index: index, root: root, damage: damage, checkingPresence: checkingPresence)
    }

    /// The index queried.
    var index: NameIndex { storage.index }

    func resolve(_ name: String) -> ResolvedAsset? {
        storage.resolve(name)
    }

    final class Storage: Sendable {
        let index: NameIndex
        /// The index's file count.
        private let fileCount: Int
        /// `<root>/<version path>/` of each package of the index.
        private let prefixes: [String]
        private let origins: [ResolvedAsset.Origin]
        private let answers: any AnswerSlots
        private let damage: IndexDamage
        /// The answers once the index is found damaged.
        private let trees: TreeNames

        /// The store root, where a package found missing a file is marked for healing.
        private let root: URL
        /// Whether an answer's file is checked when the answer is made.
        private let checkingPresence: Bool

        init(index: NameIndex, root: URL, damage: IndexDamage, checkingPresence: Bool) {
            self.index = index
            self.root = root
            self.checkingPresence = checkingPresence
            fileCount = index.fileCount
            self.damage = damage
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
            trees = TreeNames(
                packages: Array(zip(prefixes, origins)),
                scales: index.scales,
                extensionOrder: index.extensionOrder
            )
        }

        /// A name asked again: the index's file for it, and the answer kept for that file.
        /// Anything else (a first answer, a name to normalise, none, damage) takes
        /// `resolveFirst`.
        func resolve(_ name: String) -> ResolvedAsset? {
            if case .file(let number) = index.find(name), number < fileCount, let kept = answers.kept(number) {
                return kept.asset
            }
            return resolveFirst(name)
        }

        /// `resolve` for every case but a kept answer, out of line so that the path of a name
        /// asked again stays short.
        @inline(never)
        private func resolveFirst(_ name: String) -> ResolvedAsset? {
            var found = index.find(name)
            if case .none = found {
                guard let normalised = AssetName.normalise(name), normalised != name else { return nil }
                found = index.find(normalised)
            }
            switch found {
            case .file(let number):
                guard number < fileCount, !prefixes.isEmpty else { return nil }
                // A kept answer was made from blocks already checked.
                if let kept = answers.kept(number) { return kept.asset }
                do throws(HotUpdateError) {
                    let made = try answer(number)
                    // An answer is checked once, when it is made: a file that is gone is not
                    // kept, and the name is answered as if the package lacked that file
                    // (another scale, another package, then the next resolver: the bundle).
                    var present = true
                    if checkingPresence { present = try isContainedFile(number) }
                    guard present else {
                        let file = try index.file(number)
                        let package = min(file.package, prefixes.count - 1)
                        if case .package(let id, _) = origins[package] {
                            damage.reportLoss(package: package, id: id, path: file.path, root: root)
                        }
                        return trees.resolve(name)
                    }
                    return answers.keep(made, for: number).asset
                } catch {
                    damage.report(error)
                    return trees.resolve(name)
                }
            case .none:
                return nil
            case .damaged:
                damage.report(index.damageError())
                return trees.resolve(name)
            }
        }

        /// Whether file `number` is a regular file reached through real directories of its tree
        /// only: a folder replaced by a link (perhaps out of the store) serves nothing.
        private func isContainedFile(_ number: Int) throws(HotUpdateError) -> Bool {
            let file = try index.file(number)
            let prefix = prefixes[min(file.package, prefixes.count - 1)]
            var folders = ContainedDirectory.Folders(tree: prefix)
            return folders.holdsReal(file.path) && FileSystem.isRegularFile(atPath: prefix + file.path)
        }

        /// The answer for file `number`, made.
        private func answer(_ number: Int) throws(HotUpdateError) -> KeptAnswer {
            let file = try index.file(number)
            let package = min(file.package, prefixes.count - 1)
            return KeptAnswer(
                url: URL(fileURLWithPath: prefixes[package] + file.path, isDirectory: false),
                origin: origins[package]
            )
        }
    }
}
