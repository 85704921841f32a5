import Foundation
import Logging

/// The manifest the last sync left nothing to do for (`settled.json` under the root): its
/// revision (``Manifest/revision``) and version, the generation that sync left, and the stamp
/// of the store file then (``MetadataStore/commitStamp()``). While no commit came after it,
/// the store holds exactly what that manifest asks for.
struct SettledSync: Codable, Sendable, Hashable {
    /// The manifest's revision, as its source identified it.
    var revision: String
    /// The manifest's version, for the report of a check that finds it unchanged.
    var manifestVersion: Int?
    /// The generation the sync left.
    var generation: Int
    /// The store file's stamp then; another stamp means a commit came after.
    var stamp: String
    /// The catalog's stamp then (`catalog.json`, `FileSystem.identity(of:)`): a catalog
    /// changed or removed since is written again by a plain sync.
    var catalogStamp: String?
    /// Each package as the sync left it, one line each, tab-separated: its id, what a sync
    /// that finds nothing new reports of it (`unchanged`, `notRequested` or `blocked`), its
    /// active version and the tree a sync checks for loss, relative to the root (`-` for
    /// none). Lines of text, not objects: read at every launch, 10,000 of them parse in
    /// milliseconds.
    var packages: String

    /// One package's line.
    struct Package: Sendable, Hashable {
        var id: String
        var change: UpdatePlan.Change
        var version: String?
        var tree: String?
    }

    /// The lines, parsed; nil when one is not a line this code writes.
    var parsedPackages: [Package]? {
        var result: [Package] = []
        for line in packages.split(separator: "\n") {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 4 else { return nil }
            let change: UpdatePlan.Change
            switch fields[1] {
            case "unchanged": change = .unchanged
            case "notRequested": change = .notRequested
            case "blocked": change = .blocked
            default: return nil
            }
            let optional = { (field: String) in field == "-" ? nil : field }
            result.append(
                Package(id: fields[0], change: change, version: optional(fields[2]), tree: optional(fields[3]))
            )
        }
        return result
    }

    /// The lines of `packages`.
    static func lines(_ packages: [Package]) -> String {
        packages.map { "\($0.id)\t\($0.change)\t\($0.version ?? "-")\t\($0.tree ?? "-")\n" }.joined()
    }
}

extension StoreStateFile {
    /// The manifest the last sync left nothing to do for (`settled.json`, ``SettledSync``).
    static let settled = StoreStateFile(name: StoreLayout.settledFileName, faultPoint: "mid-settled")
}

extension Store {
    /// The manifest the last sync of this root left nothing to do for, when nothing has
    /// happened since that a sync would act on: no commit (the store file's stamp is the one
    /// recorded), no change to the catalog, no reader reporting lost files (`losses/`), no quick check due, no objects,
    /// hook output, active tree or file list gone, no interrupted step in `staging/`. Then a
    /// sync whose manifest has the same revision has nothing to plan, download, check or write.
    /// The `stat`s a plain sync makes and one small read; nil otherwise, or when the metadata
    /// store gives no stamp.
    func settledSync(quickCheckInterval: TimeInterval?) -> (sync: SettledSync, packages: [SettledSync.Package])? {
        let root = layout.root
        guard let data = try? StoreStateFile.settled.read(root: root),
            let settled = try? JSONDecoder().decode(SettledSync.self, from: data),
            let stamp = metadata.commitStamp(), stamp == settled.stamp,
            FileSystem.identity(of: StoreStateFile.catalog.url(root: root)) == settled.catalogStamp
        else { return nil }
        let markers = FileSystem.contents(of: layout.lossesDirectory).filter { !$0.hasPrefix(".") }
        guard markers.isEmpty, !objectsDirectoryIsGone,
            !hooks.contains(where: { $0.isMissing(generation: settled.generation, root: root) }),
            quickCheckInterval.map({ !LossMarker.quickCheckDue(interval: $0, layout: layout) }) ?? true,
            nothingToSweep()
        else { return nil }
        // What a plain sync checks of each package: its tree, every directory down to it a real
        // one (`ContainedDirectory`, each folder looked at once), and its file list. Paths as
        // text, three `lstat`s a package: this runs at every launch.
        guard let packages = settled.parsedPackages else { return nil }
        var folders = ContainedDirectory.Folders(tree: root.path)
        for tree in packages.compactMap(\.tree) {
            let parts = tree.split(separator: "/")
            guard parts.count == 3, parts[0] == "packages", folders.isRealFolder(tree),
                FileSystem.isRegularFile(atPath: folders.base + "filelists/" + parts[1] + "/" + parts[2] + ".files")
            else { return nil }
        }
        return (settled, packages)
    }

    /// Records that the manifest of `revision` left nothing to do, with each package as
    /// `outcomes` left it (the report of the sync that applied it), for the generation this
    /// store last committed or read, unless a commit of another process came after that (the
    /// store file's stamp is taken under the exclusive lock and must be the one this store
    /// last saw). Written only when it changes. A failure is logged: the next sync reads the
    /// manifest in full.
    func recordSettled(revision: String, manifestVersion: Int?, outcomes: [SyncReport.PackageOutcome]) async {
        // A record a sync would act on (damage to heal, a failure) is not settled.
        guard let snapshot = cached, let seen = lastStamp,
            !snapshot.packages.values.contains(where: { $0.state.isDamage || $0.state == .failed })
        else { return }
        var packages: [SettledSync.Package] = []
        for outcome in outcomes where outcome.change != .remove {
            // What the next sync would report: a package this one changed is unchanged then.
            let change = outcome.change == .notRequested || outcome.change == .blocked ? outcome.change : .unchanged
            let record = snapshot.packages[outcome.id]
            let tree = record?.state == .disabled ? nil : record?.active?.path
            packages.append(
                SettledSync.Package(id: outcome.id, change: change, version: outcome.activeVersion, tree: tree)
            )
        }
        let settled = SettledSync(
            revision: revision,
            manifestVersion: manifestVersion,
            generation: snapshot.generation,
            stamp: seen,
            catalogStamp: FileSystem.identity(of: StoreStateFile.catalog.url(root: layout.root)),
            packages: SettledSync.lines(packages)
        )
        let root = layout.root
        let metadata = self.metadata
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let bytes = try encoder.encode(settled)
            let wait = lockWait
            try await FileSystem.offload {
                try StoreStateFile.settled.update(root: root, wait: wait) { data in
                    guard metadata.commitStamp() == seen else { return }
                    data = bytes
                }
            }
        } catch {
            logger.warning("cannot record that the store settled on the manifest: \(error)")
        }
    }
}
