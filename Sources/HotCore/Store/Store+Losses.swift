import Foundation
import Logging

/// What a sync checks and puts back when something other than the store deleted parts of
/// it: a version's file list, the objects, and the files the commit hooks keep. Each check
/// costs one `stat` when nothing is lost.
extension Store {
    /// Whether the file list of an installed version is on disk (one `stat`; the list
    /// cached in memory does not count).
    package nonisolated func fileListExists(_ version: InstalledVersion) -> Bool {
        guard let url = layout.fileListURL(forVersionPath: version.path) else { return false }
        return FileSystem.isRegularFile(atPath: url.path)
    }

    /// Whether `objects/` is gone (one `stat`): everything deleted it but the store.
    package nonisolated var objectsDirectoryIsGone: Bool {
        !FileSystem.isDirectory(layout.objectsDirectory)
    }

    /// Puts back the objects of every installed version's files that are gone from
    /// `objects/`, from the trees that still hold them (see
    /// ``ObjectStore/restoreMissing(_:tree:verifier:)``: each such file is hashed first),
    /// under the exclusive lock; the snapshot does not change. A version whose tree or file
    /// list is gone is left to its repair.
    ///
    /// - Parameter written: Version paths to leave out: the trees the caller just wrote,
    ///   whose objects were linked moments ago.
    /// - Returns: How many objects were put back.
    /// - Throws: ``HotUpdateError`` when the store cannot be read or an object linked.
    package func restoreLostObjects(skipping written: Set<String> = []) async throws -> Int {
        let objects = self.objects
        let verifier = self.verifier
        let found = try await withExclusiveLockUnchanged { [self] snapshot -> Int in
            var restored = 0
            for record in snapshot.packages.values {
                let versions = [record.active, record.pending].compactMap { $0 } + record.previous
                for version in versions where !written.contains(version.path) {
                    guard let tree = try? self.directory(of: version), FileSystem.isDirectory(tree),
                        let url = self.layout.fileListURL(forVersionPath: version.path),
                        let list = try? FileList.read(from: url)
                    else { continue }
                    restored += try await FileSystem.offload {
                        try objects.restoreMissing(list.files, tree: tree, verifier: verifier)
                    }
                }
            }
            return restored
        }
        return found ?? 0
    }

    /// Writes again what a commit hook keeps for the snapshot committed now when the hook
    /// finds it missing (``StoreCommitHook/isMissing(generation:root:)``, one `stat` per hook):
    /// its ``StoreCommitHook/willCommit(_:)`` runs with the snapshot as both the previous
    /// and the next, under the exclusive lock. The snapshot does not change.
    ///
    /// - Returns: Whether a hook wrote anything again.
    /// - Throws: ``HotUpdateError`` when the store cannot be read.
    package func restoreHookOutputs() async throws -> Bool {
        guard !hooks.isEmpty else { return false }
        let root = layout.root
        let generation = try await read().generation
        guard generation > 0, hooks.contains(where: { $0.isMissing(generation: generation, root: root) }) else {
            return false
        }
        let hooks = self.hooks
        let logger = self.logger
        let wrote = try await withExclusiveLockUnchanged { [self] snapshot -> Bool in
            let missing = hooks.filter { $0.isMissing(generation: snapshot.generation, root: root) }
            guard !missing.isEmpty else { return false }
            let context = StoreCommitContext(previous: snapshot, next: snapshot, root: root, logger: logger) {
                path in try await self.fileList(forVersionPath: path)
            }
            for hook in missing { await hook.willCommit(context) }
            logger.notice(
                "wrote again what the store keeps for its snapshot, found missing",
                metadata: ["generation": "\(snapshot.generation)"]
            )
            return true
        }
        return wrote ?? false
    }
}
