import Foundation
import Logging

/// Removes what an interrupted step left under a store root, and frees the objects only that
/// linked. Runs only under the exclusive store lock: then no live process is between moving a
/// tree into `packages/` and recording it, so a tree no record names is garbage, and no live
/// process is deleting a version, so a ``DeletedVersion`` in staging was left by one that died.
///
/// Two passes. The staging pass reads `staging/` alone and is cheap enough for every
/// transaction: ``stagingLeftovers()`` finds what no live process is working on, and
/// ``finish(_:)`` finishes the deletions a killed process left (from their file lists: the
/// objects those versions linked, not every object) and removes the rest. ``sweepTrees(_:)``
/// removes the installed trees and file lists no record names: the first transaction of a
/// process runs it, and any transaction whose staging pass found a killed process's work.
/// Objects that may have lost their last tree and that no file list names are left to a walk
/// of `objects/`, which the outcome asks for (``Outcome/needsObjectSweep``).
struct StoreSweeper {
    let layout: StoreLayout
    let logger: Logger

    /// What a pass did.
    struct Outcome: Sendable {
        /// The objects freed from the file lists of deleted versions.
        var freed = ObjectStore.Freed()
        /// Whether a process died amid a change: then trees and file lists no record names
        /// may be left too, and are worth a look.
        var foundLeftovers = false
        /// Whether objects may have lost their last tree without a file list naming them: a
        /// tree was removed whose files are not known, so only a walk of `objects/` finds them.
        var needsObjectSweep = false

        mutating func add(_ other: Outcome) {
            freed.add(other.freed)
            foundLeftovers = foundLeftovers || other.foundLeftovers
            needsObjectSweep = needsObjectSweep || other.needsObjectSweep
        }
    }

    private var objects: ObjectStore { ObjectStore(layout: layout, logger: logger) }

    /// The directory of a staging entry where a package's tree is unpacked or assembled and
    /// its files become objects (``PackageFetcher``, ``DeltaAssembler``, local folders).
    static let stagedTreeName = "tree"

    /// What a read of `staging/` found that no live process is working on.
    struct StagingLeftovers: Sendable {
        /// Entries no live process owns (see ``StagingOwner``), and trees of deleted versions.
        var dead: [URL] = []
        /// Whether a dead entry holds a staged tree: its files may be links to objects (adopted,
        /// or linked there by a delta or a local folder), whose digests no list here names.
        var stagedTree = false
        /// The file lists of deletions that did not finish.
        var deletions: [URL] = []
        /// Whether a deleted version's tree was found without its list: killed between the two
        /// moves, so its list is still with the file lists and its objects are not known here.
        var treeWithoutList = false

        var isEmpty: Bool { dead.isEmpty && deletions.isEmpty }
    }

    /// Reads `staging/` and says what no live process is working on: one read of the
    /// directory and a look at each entry's owner lock. Its caller makes sure no staging entry
    /// of its own process is being created meanwhile (the store runs it on its actor, where
    /// entries are made): an entry found without its owner lock is then one whose process died.
    func stagingLeftovers() -> StagingLeftovers {
        var found = StagingLeftovers()
        let names = FileSystem.contents(of: layout.stagingDirectory)
        let present = Set(names)
        for name in names {
            let entry = layout.stagingDirectory.appendingPathComponent(name, isDirectory: false)
            if DeletedVersion.isList(name) {
                found.deletions.append(entry)
            } else if DeletedVersion.isTree(name) {
                found.dead.append(entry)
                if !present.contains(name + DeletedVersion.listSuffix) { found.treeWithoutList = true }
            } else if !StagingOwner.isOwned(entry) {
                found.dead.append(entry)
                // A download's entry holds an archive at most: nothing there links an object.
                if FileSystem.isDirectory(entry.appendingPathComponent(Self.stagedTreeName)) { found.stagedTree = true }
            }
        }
        return found
    }

    /// Removes what ``stagingLeftovers()`` found, then finishes each deletion from its list:
    /// work in proportion to what was left.
    func finish(_ found: StagingLeftovers) -> Outcome {
        var outcome = Outcome()
        for entry in found.dead {
            let name = entry.lastPathComponent
            if DeletedVersion.isTree(name) {
                logger.notice("finishing the deletion of a version", metadata: ["entry": "\(name)"])
            } else {
                logger.notice("removing staging no live process owns", metadata: ["entry": "\(name)"])
            }
            try? FileSystem.remove(entry)
        }
        if found.stagedTree { outcome.needsObjectSweep = true }
        // After every tree above is gone: an object two of them linked is free now.
        for list in found.deletions {
            outcome.add(DeletedVersion(list: list).finish(objects: objects, logger: logger))
        }
        if found.treeWithoutList { outcome.needsObjectSweep = true }
        // A process died amid a change; it may not have reached the other versions it dropped:
        // their trees and lists are still where they were.
        outcome.foundLeftovers = !found.isEmpty
        return outcome
    }

    /// Removes the installed trees and file lists no record of `snapshot` names: each tree
    /// is removed, then the objects its file list names are freed and the list removed (a
    /// tree without a list asks for a walk of `objects/`). Reads `packages/` and `filelists/`
    /// and every package's directory in them.
    func sweepTrees(_ snapshot: StoreSnapshot) -> Outcome {
        var outcome = Outcome()
        let referenced = snapshot.keptPaths
        for id in FileSystem.contents(of: layout.packagesDirectory) {
            let idDirectory = layout.packageDirectory(id: id)
            for name in FileSystem.contents(of: idDirectory) {
                let relative = layout.relativeVersionPath(id: id, directoryName: name)
                if !referenced.contains(relative) {
                    logger.notice("removing an install no record refers to", metadata: ["path": "\(relative)"])
                    try? FileSystem.remove(idDirectory.appendingPathComponent(name))
                    outcome.foundLeftovers = true
                    let list = layout.fileListURL(forVersionPath: relative)
                    if list.map({ FileInfo($0)?.isRegular != true }) ?? true { outcome.needsObjectSweep = true }
                }
            }
            if FileSystem.contents(of: idDirectory).isEmpty { try? FileSystem.remove(idDirectory) }
        }
        for id in FileSystem.contents(of: layout.fileListsDirectory) {
            let directory = layout.fileListsDirectory.appendingPathComponent(id, isDirectory: true)
            for name in FileSystem.contents(of: directory) {
                let file = directory.appendingPathComponent(name)
                let version = name.hasSuffix(".files") ? String(name.dropLast(".files".count)) : name
                let relative = layout.relativeVersionPath(id: id, directoryName: version)
                if name.hasPrefix(".") || !name.hasSuffix(".files") {
                    try? FileSystem.remove(file)  // a temporary the list's writer left
                    outcome.foundLeftovers = true
                } else if !referenced.contains(relative) {
                    // The list of a version whose deletion died before its list moved to staging,
                    // or of a tree whose install died before its commit: its objects may be unlinked.
                    outcome.freed.add(releaseObjects(listedIn: file, outcome: &outcome))
                    try? FileSystem.remove(file)
                    outcome.foundLeftovers = true
                }
            }
            if FileSystem.contents(of: directory).isEmpty { try? FileSystem.remove(directory) }
        }
        return outcome
    }

    /// Frees the objects of the list at `url` that nothing links; a list that cannot be read
    /// asks for a walk of `objects/`.
    private func releaseObjects(listedIn url: URL, outcome: inout Outcome) -> ObjectStore.Freed {
        guard let list = try? FileList.read(from: url) else {
            outcome.needsObjectSweep = true
            return ObjectStore.Freed()
        }
        return objects.release(list.files.map(\.sha256))
    }
}

/// A version being deleted, recorded in staging so that a process killed midway leaves the
/// deletion to be finished rather than objects no one knows of:
///
/// ```
/// staging/deleted-<uuid>/        the version's tree, moved there first
/// staging/deleted-<uuid>.files   its file list, moved there next
/// ```
///
/// Then the tree is removed, the objects the list names are freed when nothing else links
/// them, and the list goes last. Both moves are renames within the root: no new space is
/// needed, so a full disk can still delete. A list found in staging means its deletion did not
/// finish: ``finish(objects:logger:)`` removes the tree if it is still there and frees the
/// list's objects again (freeing is idempotent: only an object nothing links is unlinked). A
/// tree found without its list was left between the two moves: its list is still with the file
/// lists, and the sweep walks `objects/`. Only under the exclusive store lock.
struct DeletedVersion {
    static let prefix = "deleted-"
    static let listSuffix = ".files"

    /// The list in staging.
    let list: URL
    /// The tree in staging, beside the list.
    var tree: URL {
        list.deletingLastPathComponent()
            .appendingPathComponent(String(list.lastPathComponent.dropLast(Self.listSuffix.count)), isDirectory: true)
    }

    /// Whether a staging entry's name is a deleted version's list.
    static func isList(_ name: String) -> Bool {
        name.hasPrefix(prefix) && name.hasSuffix(listSuffix)
    }

    /// Whether a staging entry's name is a deleted version's tree.
    static func isTree(_ name: String) -> Bool {
        name.hasPrefix(prefix) && !name.hasSuffix(listSuffix)
    }

    /// A new record in `staging`.
    init(staging: URL) {
        list = staging.appendingPathComponent(Self.prefix + UUID().uuidString + Self.listSuffix, isDirectory: false)
    }

    /// The record whose list is `list`.
    init(list: URL) {
        self.list = list
    }

    /// What deleting a version did.
    struct Deleted: Sendable {
        var freed = ObjectStore.Freed()
        /// False when the version had no file list: objects it alone linked are left to a walk
        /// of `objects/`.
        var listKnown = true
    }

    /// Deletes the installed version whose tree is `installed` and whose file list is
    /// `listURL` (`known`, when its content was read before; it is written to staging when the
    /// file is gone). When staging cannot take the deletion (a rename across file systems, say)
    /// it is done in place, the list kept until its objects are freed, so that a kill leaves a
    /// list the next full sweep finishes.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem`` when the tree cannot be removed.
    func delete(tree installed: URL, listURL: URL?, known: FileList?, objects: ObjectStore) throws -> Deleted {
        var deleted = Deleted()
        let staging = list.deletingLastPathComponent()
        var listFile = listURL
        var moved = false
        do {
            try FileSystem.createDirectory(staging)
            // Not fsynced, nor below: lost in a crash, the tree and its list are found where
            // they were, named by no record, and the next full sweep finishes them.
            if FileSystem.isDirectory(installed) { try FileSystem.rename(installed, to: tree, durable: false) }
            moved = true
            if let listURL, FileInfo(listURL)?.isRegular == true {
                try FileSystem.rename(listURL, to: list, durable: false)
                listFile = list
            } else if let known {
                try known.write(to: list)
                listFile = list
            }
        } catch {
            // Staging cannot take it: the list stays where it is until its objects are freed.
        }
        try FileSystem.remove(moved ? tree : installed)
        let files: [FileList.Entry]
        if let known {
            files = known.files
        } else if let listFile, let read = try? FileList.read(from: listFile) {
            files = read.files
        } else {
            files = []
            deleted.listKnown = false
        }
        deleted.freed = objects.release(files.map(\.sha256))
        try? FileSystem.remove(list)
        if let listURL { try? FileSystem.remove(listURL) }
        return deleted
    }

    /// Finishes a deletion a killed process left: removes the tree if it is still there,
    /// frees the objects the list names that nothing links, then removes the list. A list
    /// that cannot be read asks for a walk of `objects/`.
    func finish(objects: ObjectStore, logger: Logger) -> StoreSweeper.Outcome {
        var outcome = StoreSweeper.Outcome()
        try? FileSystem.remove(tree)
        if let read = try? FileList.read(from: list) {
            outcome.freed = objects.release(read.files.map(\.sha256))
        } else {
            outcome.needsObjectSweep = true
        }
        try? FileSystem.remove(list)
        if outcome.freed.objects > 0 {
            logger.notice(
                "finished the deletion of a version",
                metadata: ["objects": "\(outcome.freed.objects)", "bytes": "\(outcome.freed.bytes)"]
            )
        }
        return outcome
    }
}
