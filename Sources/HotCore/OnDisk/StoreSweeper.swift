import Foundation
import Logging

/// Removes what an interrupted step left under a store root: staging entries no live process
/// owns (see ``StagingOwner``), installed trees and file lists that no record refers to.
/// Runs only under the exclusive store lock: then no live process is between moving a tree
/// into `packages/` and recording it, so a tree no record names is garbage.
struct StoreSweeper {
    let layout: StoreLayout
    let logger: Logger

    /// Sweeps, and says whether anything was left: then objects may have lost their last
    /// tree and the caller sweeps `objects/` too.
    func sweep(_ snapshot: StoreSnapshot) -> Bool {
        var leftovers = false
        for name in FileSystem.contents(of: layout.stagingDirectory) {
            let entry = layout.stagingDirectory.appendingPathComponent(name, isDirectory: true)
            guard !StagingOwner.isOwned(entry) else { continue }
            logger.notice("removing staging no live process owns", metadata: ["entry": "\(name)"])
            try? FileSystem.remove(entry)
            leftovers = true
        }
        let referenced = snapshot.keptPaths
        for id in FileSystem.contents(of: layout.packagesDirectory) {
            let idDirectory = layout.packageDirectory(id: id)
            for name in FileSystem.contents(of: idDirectory) {
                let relative = layout.relativeVersionPath(id: id, directoryName: name)
                if !referenced.contains(relative) {
                    logger.notice("removing an install no record refers to", metadata: ["path": "\(relative)"])
                    try? FileSystem.remove(idDirectory.appendingPathComponent(name))
                    leftovers = true
                }
            }
            if FileSystem.contents(of: idDirectory).isEmpty { try? FileSystem.remove(idDirectory) }
        }
        for id in FileSystem.contents(of: layout.fileListsDirectory) {
            let directory = layout.fileListsDirectory.appendingPathComponent(id, isDirectory: true)
            for name in FileSystem.contents(of: directory) {
                let version = name.hasSuffix(".files") ? String(name.dropLast(".files".count)) : name
                let relative = layout.relativeVersionPath(id: id, directoryName: version)
                if name.hasPrefix(".") || !name.hasSuffix(".files") || !referenced.contains(relative) {
                    try? FileSystem.remove(directory.appendingPathComponent(name))
                    leftovers = true
                }
            }
            if FileSystem.contents(of: directory).isEmpty { try? FileSystem.remove(directory) }
        }
        return leftovers
    }
}
