import Foundation
import Logging

/// The store's repairs of content shared through `objects/`: one object is hard-linked into
/// every installed tree that has its content, so damage written into one tree's file is in
/// the object and in every other tree that links it, kept versions included.
extension Store {
    /// A version some record keeps, with the files of it that name given digests.
    struct SharingVersion: Sendable {
        var id: String
        var version: InstalledVersion
        var files: [FileList.Entry]
    }

    /// What ``restoreFromObjects(_:version:paths:)`` did.
    struct ObjectRestore: Sendable {
        /// The paths linked to their intact objects again.
        var restored: [String] = []
        /// The paths whose object is gone or damaged: only a download puts them back.
        var remaining: [String] = []
        /// The SHA-256 of each remaining path: the content other kept trees may share.
        var remainingDigests: Set<String> = []
        /// The version repaired; nil when another version became active since the check.
        var version: InstalledVersion?
    }

    /// What a restore of a kept version found (see ``rollback(_:to:)``).
    enum Restore: Sendable {
        /// The version is active again: its files passed their check (or were mended from
        /// intact objects).
        case restored(InstalledVersion)
        /// The version's tree failed its check and could not be mended from `objects/`: the
        /// record let it go (its tree is deleted) and nothing was restored; the caller downloads
        /// it again. `digests` names the content found damaged, which other kept trees may
        /// share (see ``relinkShared(_:)``).
        case damaged(InstalledVersion, reason: HotUpdateError, digests: Set<String>)
    }

    /// Links every file of every kept version (of every package) whose file list names one of
    /// `digests` to the intact object of its content, where it links another file: after a
    /// repair put back a good object for content that was damaged in place, the other trees
    /// that shared it still link the damaged file. Each link is replaced atomically (a new
    /// link under a temporary name, renamed over). Content whose object is gone or damaged is
    /// left as it is (those versions were marked ``InstalledVersion/damageSeen`` when the
    /// damage was found).
    ///
    /// - Returns: The files linked again.
    /// - Throws: ``HotUpdateError/Code/fileSystem`` when a link cannot be replaced.
    func relinkShared(_ digests: Set<String>) async throws -> [PackageHealth.RelinkedFile] {
        guard !digests.isEmpty else { return [] }
        let objects = self.objects
        let verifier = self.verifier
        let layout = self.layout
        let relinked = try await transaction { transaction in
            let sharing = await self.versions(naming: digests, in: transaction.records)
            return try await FileSystem.offload {
                var intact: [String: URL?] = [:]
                var relinked: [PackageHealth.RelinkedFile] = []
                for entry in sharing {
                    guard let root = try? layout.url(forRelativePath: entry.version.path), FileSystem.isDirectory(root)
                    else { continue }
                    for file in entry.files {
                        let object: URL?
                        if let known = intact[file.sha256] {
                            object = known
                        } else {
                            object = objects.intactObject(for: file, verifier: verifier)
                            intact[file.sha256] = object
                        }
                        guard let object,
                            try objects.relink(object, at: root.appendingPathComponent(file.path, isDirectory: false))
                        else { continue }
                        relinked.append(
                            PackageHealth.RelinkedFile(
                                packageID: entry.id,
                                version: entry.version.version,
                                path: file.path
                            )
                        )
                    }
                }
                return relinked
            }
        }.value
        if !relinked.isEmpty {
            logger.notice(
                "linked files of kept versions to the repaired objects they share",
                metadata: ["count": "\(relinked.count)"]
            )
        }
        return relinked
    }

    /// ``relinkShared(_:)`` for a repair of `id` that put good objects back; a failure is
    /// logged, not thrown: those versions stay marked ``InstalledVersion/damageSeen`` and are
    /// checked before a restore.
    func relinkShared(_ digests: Set<String>, of id: String) async {
        do {
            _ = try await relinkShared(digests)
        } catch {
            logger.warning(
                "cannot link the kept versions sharing damaged files to good objects: \(error)",
                metadata: ["package": "\(id)"]
            )
        }
    }

    /// Marks every version `transaction` keeps whose files name one of `digests` (see
    /// ``InstalledVersion/damageSeen``): damage was found in that content, so a restore of
    /// those versions hashes their files.
    func markDamageSeen(naming digests: Set<String>, in transaction: inout StoreTransaction) async {
        guard !digests.isEmpty else { return }
        var paths: [String: Set<String>] = [:]
        for entry in await versions(naming: digests, in: transaction.records) {
            paths[entry.id, default: []].insert(entry.version.path)
        }
        for (id, marked) in paths.sorted(by: { $0.key < $1.key }) {
            transaction.updateExisting(id) { _ = $0.markDamageSeen(paths: marked) }
        }
    }

    /// The kept versions whose file lists name one of `digests`, with those files. A version
    /// whose file list cannot be read is left out.
    func versions(naming digests: Set<String>, in records: [String: PackageRecord]) async -> [SharingVersion] {
        var sharing: [SharingVersion] = []
        for id in records.keys.sorted() {
            for version in records[id]?.keptVersions ?? [] {
                guard let list = try? await fileList(forVersionPath: version.path) else { continue }
                let files = list.files.filter { digests.contains($0.sha256) }
                if !files.isEmpty { sharing.append(SharingVersion(id: id, version: version, files: files)) }
            }
        }
        return sharing
    }

    /// Checks the tree of a kept version before it is restored: presence and size of every
    /// file, and its SHA-256 too when damage was ever seen in what it shares
    /// (``InstalledVersion/damageSeen``). A file that fails is put back from its object when
    /// that is intact; a damaged object loses its name (see
    /// ``ObjectStore/intactObjectDiscardingDamaged(for:verifier:)``).
    ///
    /// - Returns: nil when the tree is whole (or was mended); otherwise why not, the digests
    ///   of the files still damaged, and those whose object was found damaged.
    func checkKept(
        _ version: InstalledVersion,
        of id: String
    ) async throws
        -> (reason: HotUpdateError, digests: Set<String>, damagedObjects: Set<String>)?
    {
        let list: FileList
        let root: URL
        do {
            list = try await fileList(forVersionPath: version.path)
            root = try directory(of: version)
        } catch {
            let reason = HotUpdateError.wrap(
                error,
                as: .storeCorrupt,
                "the files of the kept version \(version.version) cannot be checked",
                packageID: id
            )
            return (reason, [], [])
        }
        // A kept tree reached through a link is not looked into, nor mended in place: the
        // record lets it go (the link itself is deleted) and the version is downloaded again.
        if case .foreign(let component) = ContainedDirectory.check(version.path, under: layout.root.path) {
            let reason = HotUpdateError(
                .treeOutsideStore,
                "\(component) is not a directory inside the store (a symbolic link or another file)",
                packageID: id,
                subject: version.path
            )
            return (reason, [], [])
        }
        let depth: PackageHealth.Depth = version.damageSeen == true ? .full : .quick
        let objects = self.objects
        let verifier = self.verifier
        let files = list.files
        let (missing, damaged, remaining, damagedObjects) = try await FileSystem.offload {
            let (missing, damaged) = PackageHealth.examine(files, under: root, depth: depth, verifier: verifier)
            guard !missing.isEmpty || !damaged.isEmpty else {
                return (missing, damaged, [FileList.Entry](), Set<String>())
            }
            let byPath = list.byPath
            var remaining: [FileList.Entry] = []
            var damagedObjects: Set<String> = []
            for path in missing + damaged {
                guard let file = byPath[path] else { continue }
                let (object, discarded) = try objects.intactObjectDiscardingDamaged(for: file, verifier: verifier)
                if discarded { damagedObjects.insert(file.sha256) }
                guard let object else {
                    remaining.append(file)
                    continue
                }
                let target = root.appendingPathComponent(path, isDirectory: false)
                if FileSystem.isDirectory(target) { try FileSystem.remove(target) }
                try objects.linkObject(object, to: target)
            }
            return (missing, damaged, remaining, damagedObjects)
        }
        if !missing.isEmpty || !damaged.isEmpty {
            logger.warning(
                "a kept version failed its check before a restore",
                metadata: [
                    "package": "\(id)", "version": "\(version.version)", "depth": "\(depth)",
                    "missing": "\(missing.count)", "damaged": "\(damaged.count)", "unmended": "\(remaining.count)",
                ]
            )
        }
        guard let first = remaining.first else { return nil }
        let reason = HotUpdateError(
            missing.contains(first.path) ? .notFound : .digestMismatch,
            "the kept version \(version.version) failed its \(depth) check before a restore: "
                + "\(remaining.count) file(s) missing or damaged with no intact object, first \(first.path)",
            packageID: id,
            subject: version.path
        )
        return (reason, Set(remaining.map(\.sha256)), damagedObjects)
    }
}
