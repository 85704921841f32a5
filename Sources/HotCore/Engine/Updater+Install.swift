import Foundation
import Logging

/// A staged package waiting for the next group commit.
struct PendingInstall {
    var number: Int
    var staged: StagedPackage
    var offered: PackageDescriptor
    var continuation: CheckedContinuation<InstalledVersion, any Error>
}

/// A tree moved into place whose version is not recorded yet.
private struct PreparedInstall {
    var pending: PendingInstall
    var version: InstalledVersion
    var destination: URL
    var listURL: URL
    var dropped: [InstalledVersion]
}

extension Updater {
    /// Installs a staged package in the next group commit and returns the version recorded.
    ///
    /// Packages staged while the store queue is busy are installed together, with one flush
    /// of the file system and one commit for all of them, so syncing many small packages does
    /// not pay a flush and a commit each. For every package the steps are safe to interrupt:
    /// every file becomes an object (or a link to the object already holding its content);
    /// the file list is written; the tree is renamed into `packages/`; then, for the group,
    /// the file system is flushed and one commit makes the versions active. A crash before
    /// the commit leaves trees no record refers to, which the next open sweeps together with
    /// the objects only they linked. The staging directory is removed whatever happens.
    ///
    /// Cancelling the caller before its group starts withdraws the package; after that, it
    /// is installed completely.
    func installStaged(_ staged: StagedPackage, _ offered: PackageDescriptor) async throws -> InstalledVersion {
        installCounter += 1
        let number = installCounter
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard !Task.isCancelled else {
                    try? FileSystem.remove(staged.stagingDirectory)
                    continuation.resume(throwing: CancellationError())
                    return
                }
                pendingInstalls.append(
                    PendingInstall(number: number, staged: staged, offered: offered, continuation: continuation))
                if !installGroupQueued {
                    installGroupQueued = true
                    enqueue { await self.commitPendingInstalls() }
                }
            }
        } onCancel: {
            Task { await self.withdrawInstall(number) }
        }
    }

    private func withdrawInstall(_ number: Int) {
        guard let index = pendingInstalls.firstIndex(where: { $0.number == number }) else { return }
        let pending = pendingInstalls.remove(at: index)
        try? FileSystem.remove(pending.staged.stagingDirectory)
        pending.continuation.resume(throwing: CancellationError())
    }

    /// Installs every pending package as one group; runs on the store queue.
    private func commitPendingInstalls() async {
        let group = pendingInstalls
        pendingInstalls = []
        installGroupQueued = false
        guard !group.isEmpty else { return }
        var next: StoreSnapshot
        do {
            next = try await open()
        } catch {
            for pending in group { settle(pending, .failure(error)) }
            return
        }

        var prepared: [PreparedInstall] = []
        for pending in group {
            let offered = pending.offered
            if let active = next.packages[offered.id]?.active, UpdatePlan.isSame(offered, active),
                let directory = try? layout.url(forRelativePath: active.path), FileSystem.isDirectory(directory)
            {
                settle(pending, .success(active))  // a flight that started before this one installed it
                continue
            }
            do {
                prepared.append(try await prepare(pending, in: &next))
            } catch {
                settle(pending, .failure(error))
            }
        }
        guard !prepared.isEmpty else { return }

        do {
            let root = layout.root
            try await FileSystem.offload { try FileSystem.syncFileSystem(containing: root) }
            FaultPoint.reached("after-flush")
            try await commit(next)
        } catch {
            for install in prepared.reversed() {
                await discardTree(install.destination, listURL: install.listURL, files: install.pending.staged.files)
                settle(install.pending, .failure(error))
            }
            return
        }
        for install in prepared {
            let offered = install.pending.offered
            fileLists[install.version.path] = FileList(files: install.pending.staged.files)
            checkedVersions.insert(install.version.path)
            hub.publish(offered.id, offered.version, .installed)
            logger.info("installed", metadata: ["package": "\(offered.id)", "version": "\(offered.version)"])
        }
        // Versions beyond those kept go before the callers hear back, so a caller never sees them.
        for install in prepared where !install.dropped.isEmpty {
            await deleteVersions(install.dropped, of: install.pending.offered.id)
        }
        for install in prepared { settle(install.pending, .success(install.version)) }
    }

    /// Removes the staging directory and answers the caller.
    private func settle(_ pending: PendingInstall, _ result: Result<InstalledVersion, any Error>) {
        try? FileSystem.remove(pending.staged.stagingDirectory)
        pending.continuation.resume(with: result)
    }

    /// Turns one staged package into objects, a file list and a tree in place, and records
    /// it in `next` (not committed yet).
    private func prepare(_ pending: PendingInstall, in next: inout StoreSnapshot) async throws -> PreparedInstall {
        let staged = pending.staged
        let offered = pending.offered
        let files = staged.files
        let tree = staged.tree
        try await adoptObjects(of: staged, for: offered.id, distrustingExisting: false)
        FaultPoint.reached("after-adopt")

        let existing = next.packages[offered.id]
        let kept = ([existing?.active].compactMap { $0 }) + (existing?.previous ?? [])
        let relative = try versionPath(for: offered, digest: staged.sha256, avoiding: Set(kept.map(\.path)))
        let destination = try layout.url(forRelativePath: relative)
        guard let listURL = layout.fileListURL(forVersionPath: relative) else {
            throw HotUpdateError(.internalInconsistency, "no file list path for \(relative)", packageID: offered.id)
        }
        let packageDirectory = layout.packageDirectory(id: offered.id)
        do {
            try await FileSystem.offload {
                try FileList(files: files).write(to: listURL)
                try FileSystem.createDirectory(packageDirectory)
                try FileSystem.remove(destination)
                try FileSystem.rename(tree, to: destination, durable: false)  // the group's flush follows
            }
        } catch {
            await discardTree(destination, listURL: listURL, files: files)
            throw error
        }
        FaultPoint.reached("after-rename")

        let version = InstalledVersion(
            version: offered.version, path: relative, archiveSize: staged.size, sha256: staged.sha256.hex,
            md5: staged.md5?.hex, sourceURL: offered.url.absoluteString, installedAt: Date())
        let keep = configuration.keepPreviousVersions
        next.packages[offered.id] = InstallRecord(
            id: offered.id, state: .installed, active: version, previous: Array(kept.prefix(keep)), lastError: nil)
        return PreparedInstall(
            pending: pending, version: version, destination: destination, listURL: listURL,
            dropped: kept.count > keep ? Array(kept[keep...]) : [])
    }

    /// Replaces the active version's damaged tree with a freshly fetched one; runs on the
    /// store queue. Existing objects are hashed before they are reused: one may be what was
    /// damaged.
    func repairStaged(_ staged: StagedPackage, _ offered: PackageDescriptor) async throws -> InstalledVersion {
        defer { try? FileSystem.remove(staged.stagingDirectory) }
        try Task.checkCancellation()
        try await adoptObjects(of: staged, for: offered.id, distrustingExisting: true)
        FaultPoint.reached("after-adopt")
        return try await replaceActiveTree(with: staged, of: offered.id, in: try await open())
    }

    /// Makes every file of a staged tree an object, off the cooperative pool.
    private func adoptObjects(of staged: StagedPackage, for id: String, distrustingExisting: Bool) async throws {
        let objects = self.objects
        let verifier = configuration.verifier
        let files = staged.files
        let tree = staged.tree
        let copies = try await FileSystem.offload {
            try objects.adopt(tree: tree, files: files, distrustExisting: distrustingExisting, verifier: verifier)
        }
        if copies > 0 {
            logger.notice(
                "the file system would not hard-link \(copies) file(s): they are kept as copies, not shared",
                metadata: ["package": "\(id)"])
        }
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
            FaultPoint.reached("after-rename")
            try FileSystem.syncFileSystem(containing: root)
            FaultPoint.reached("after-flush")
            try? FileSystem.remove(damaged)
            _ = objects.release(files.map(\.sha256))
        }
        record.state = .installed
        record.lastError = nil
        record.lastErrorCode = nil
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
                record.lastErrorCode = error.code.description
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
                        // Not fsynced: lost in a crash, the tree is swept as one no record names.
                        if FileSystem.isDirectory(url) { try FileSystem.rename(url, to: trash, durable: false) }
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
