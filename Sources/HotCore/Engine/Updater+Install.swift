import Foundation
import Logging

extension Updater {
    /// Installs a staged package; runs on the store queue.
    ///
    /// The steps, each safe to interrupt: every file becomes an object (or a link to the
    /// object already holding its content); the file list is written; the tree is renamed
    /// into `packages/`; the file system is flushed; one commit makes the version active.
    /// A crash before the commit leaves a tree no record refers to, which the next open
    /// sweeps together with the objects only it linked. The staging directory is removed
    /// whatever happens.
    func installStaged(_ staged: StagedPackage, _ offered: PackageDescriptor, isRepair: Bool) async throws
        -> InstalledVersion
    {
        defer { try? FileSystem.remove(staged.stagingDirectory) }
        try Task.checkCancellation()
        var next = try await open()
        let existing = next.packages[offered.id]
        if !isRepair, let active = existing?.active, UpdatePlan.isSame(offered, active),
            FileSystem.isDirectory(try layout.url(forRelativePath: active.path))
        {
            return active  // a flight that started before this one installed it
        }

        let objects = self.objects
        let verifier = configuration.verifier
        let files = staged.files
        let tree = staged.tree
        try await FileSystem.offload {
            try objects.adopt(tree: tree, files: files, distrustExisting: isRepair, verifier: verifier)
        }
        if isRepair {
            return try await replaceActiveTree(with: staged, of: offered.id, in: next)
        }

        let kept = ([existing?.active].compactMap { $0 }) + (existing?.previous ?? [])
        let relative = try versionPath(for: offered, digest: staged.sha256, avoiding: Set(kept.map(\.path)))
        let destination = try layout.url(forRelativePath: relative)
        guard let listURL = layout.fileListURL(forVersionPath: relative) else {
            throw HotUpdateError(.internalInconsistency, "no file list path for \(relative)", packageID: offered.id)
        }
        let root = layout.root
        let packageDirectory = layout.packageDirectory(id: offered.id)
        do {
            try await FileSystem.offload {
                try FileList(files: files).write(to: listURL)
                try FileSystem.createDirectory(packageDirectory)
                try FileSystem.remove(destination)
                try FileSystem.rename(tree, to: destination)
                try FileSystem.syncFileSystem(containing: root)
            }
        } catch {
            await discardTree(destination, listURL: listURL, files: files)
            throw error
        }

        let version = InstalledVersion(
            version: offered.version, path: relative, archiveSize: staged.size, sha256: staged.sha256.hex,
            md5: staged.md5?.hex, sourceURL: offered.url.absoluteString, installedAt: Date())
        let keep = configuration.keepPreviousVersions
        let dropped = kept.count > keep ? Array(kept[keep...]) : []
        next.packages[offered.id] = InstallRecord(
            id: offered.id, state: .installed, active: version, previous: Array(kept.prefix(keep)), lastError: nil)
        do {
            try await commit(next)
        } catch {
            await discardTree(destination, listURL: listURL, files: files)
            throw error
        }
        fileLists[relative] = FileList(files: files)
        checkedVersions.insert(relative)
        hub.publish(offered.id, offered.version, .installed)
        logger.info("installed", metadata: ["package": "\(offered.id)", "version": "\(offered.version)"])
        await deleteVersions(dropped, of: offered.id)
        return version
    }

    /// The directory for a new version: its version, or the version and digest when a kept
    /// version already uses that name (a re-published version).
    private func versionPath(for offered: PackageDescriptor, digest: Digest, avoiding kept: Set<String>) throws
        -> String
    {
        var relative = layout.relativeVersionPath(id: offered.id, directoryName: offered.version)
        if kept.contains(relative) {
            relative = layout.relativeVersionPath(
                id: offered.id, directoryName: "\(offered.version)-\(digest.hex.prefix(16))")
        }
        if kept.contains(relative) {
            throw HotUpdateError(
                .internalInconsistency, "version \(offered.version) with this digest is already kept",
                packageID: offered.id)
        }
        return relative
    }

    /// Puts a freshly fetched tree in place of the active version's damaged one (a repair
    /// that the objects could not serve). The damaged tree goes through staging, so a crash
    /// midway is swept like any other.
    private func replaceActiveTree(with staged: StagedPackage, of id: String, in current: StoreSnapshot) async throws
        -> InstalledVersion
    {
        var next = current
        guard var record = next.packages[id], let active = record.active,
            let listURL = layout.fileListURL(forVersionPath: active.path)
        else {
            throw HotUpdateError(.notFound, "no active version to repair", packageID: id)
        }
        let destination = try layout.url(forRelativePath: active.path)
        let damaged = layout.stagingDirectory.appendingPathComponent("replaced-\(UUID().uuidString)")
        let tree = staged.tree
        let files = staged.files
        let root = layout.root
        let objects = self.objects
        try await FileSystem.offload {
            try FileList(files: files).write(to: listURL)
            if FileSystem.isDirectory(destination) { try FileSystem.rename(destination, to: damaged) }
            try FileSystem.rename(tree, to: destination)
            try FileSystem.syncFileSystem(containing: root)
            try? FileSystem.remove(damaged)
            _ = objects.release(files.map(\.sha256))
        }
        record.state = .installed
        record.lastError = nil
        next.packages[id] = record
        try await commit(next)
        fileLists[active.path] = FileList(files: files)
        checkedVersions.insert(active.path)
        hub.publish(id, active.version, .installed)
        logger.info("re-fetched a damaged version", metadata: ["package": "\(id)", "version": "\(active.version)"])
        return active
    }

    /// Removes a tree that was never recorded, its list, and the objects only it linked.
    private func discardTree(_ destination: URL, listURL: URL, files: [InstalledFile]) async {
        let objects = self.objects
        _ = try? await FileSystem.offload {
            try? FileSystem.remove(destination)
            try? FileSystem.remove(listURL)
            return objects.release(files.map(\.sha256))
        }
    }

    /// Records a failure (state ``PackageState/failed`` with the error) and publishes it.
    func recordFailure(_ id: String, version: String?, _ error: HotUpdateError) async {
        hub.publish(id, version, .failed, error)
        do {
            try await serialized {
                try Task.checkCancellation()
                var next = try await self.open()
                var record = next.packages[id] ?? InstallRecord(id: id, state: .failed, active: nil)
                record.state = .failed
                record.lastError = error.description
                next.packages[id] = record
                try await self.commit(next)
            }
        } catch {
            logger.error("cannot record the failure of \(id): \(error)")
        }
    }

    /// Deletes installed versions that no record refers to any more, and frees the objects
    /// only they linked. Each tree first moves into staging, so that a crash midway leaves
    /// something the next open sees and sweeps. Runs on the store queue.
    @discardableResult
    func deleteVersions(_ versions: [InstalledVersion], of id: String) async -> ObjectStore.Freed {
        var freed = ObjectStore.Freed()
        for version in versions {
            guard let url = try? layout.url(forRelativePath: version.path) else { continue }
            let list = try? await fileList(forVersionPath: version.path)
            let listURL = layout.fileListURL(forVersionPath: version.path)
            let trash = layout.stagingDirectory.appendingPathComponent("deleted-\(UUID().uuidString)")
            let objects = self.objects
            let staging = layout.stagingDirectory
            do {
                freed.add(
                    try await FileSystem.offload {
                        try FileSystem.createDirectory(staging)
                        if FileSystem.isDirectory(url) { try FileSystem.rename(url, to: trash) }
                        try FileSystem.remove(trash)
                        if let listURL { try FileSystem.remove(listURL) }
                        return objects.release((list?.files ?? []).map(\.sha256))
                    })
            } catch {
                logger.warning("cannot delete an old version: \(error)", metadata: ["package": "\(id)"])
            }
            fileLists[version.path] = nil
            checkedVersions.remove(version.path)
        }
        let directory = layout.packageDirectory(id: id)
        if FileSystem.contents(of: directory).isEmpty { try? FileSystem.remove(directory) }
        let lists = layout.fileListsDirectory.appendingPathComponent(id, isDirectory: true)
        if FileSystem.contents(of: lists).isEmpty { try? FileSystem.remove(lists) }
        return freed
    }
}
