import Foundation
import Logging

/// A staged package waiting for the next group commit.
struct PendingInstall: Sendable {
    var number: Int
    /// The flight that staged it; nil for a local folder.
    var key: FlightKey?
    var staged: StagedPackage
    var offered: PackageDescriptor
    var continuation: CheckedContinuation<InstalledVersion, any Error>
}

/// One package of a group, decided: when it was asked for.
private struct Candidate: Sendable {
    var pending: PendingInstall
    var chosenAt: Date
}

/// A tree moved into place whose version is not recorded yet.
private struct PreparedInstall: Sendable {
    var pending: PendingInstall
    var version: InstalledVersion
    var destination: URL
    var listURL: URL
}

/// The group a transaction took, read after it.
private final class TakenGroup: @unchecked Sendable {
    private let lock = NSLock()
    private var candidates: [Candidate] = []

    func set(_ group: [Candidate]) {
        lock.withLock { candidates = group }
    }

    var group: [Candidate] { lock.withLock { candidates } }
}

/// The answers of a group, decided inside its transaction.
private final class GroupResults: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [Int: Result<InstalledVersion, any Error>] = [:]

    func set(_ number: Int, _ result: Result<InstalledVersion, any Error>) {
        lock.withLock { results[number] = result }
    }

    func result(_ number: Int) -> Result<InstalledVersion, any Error>? {
        lock.withLock { results[number] }
    }
}

extension Updater {
    /// Installs a staged package in the next group commit and returns the version recorded.
    ///
    /// Packages staged while the store is busy are installed together, with one flush of the
    /// file system and one commit for all of them, so syncing many small packages does not
    /// pay a flush and a commit each. For every package the steps are safe to interrupt:
    /// every file becomes an object (or a link to the object already holding its content);
    /// the file list is written; the tree is renamed into `packages/`; then, for the group,
    /// the file system is flushed and one commit makes the versions active. A crash before
    /// the commit leaves trees no record refers to, which the next transaction sweeps together
    /// with the objects only they linked. The staging entry is removed whatever happens.
    ///
    /// Each package is decided against the snapshot current inside the group's transaction:
    /// of several requests for one package only the newest installs, and an install asked for
    /// before the active version was chosen (by this process or another) does not replace it
    /// (``HotUpdateError/Code/superseded``).
    ///
    /// Cancelling the caller before its group starts withdraws the package; after that, it
    /// is installed completely.
    func installStaged(
        _ staged: StagedPackage,
        _ offered: PackageDescriptor,
        key: FlightKey?
    ) async throws
        -> InstalledVersion
    {
        installCounter += 1
        let number = installCounter
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard !Task.isCancelled else {
                    staged.discard()
                    continuation.resume(throwing: CancellationError())
                    return
                }
                pendingInstalls.append(
                    PendingInstall(
                        number: number,
                        key: key,
                        staged: staged,
                        offered: offered,
                        continuation: continuation
                    )
                )
                if !installGroupQueued {
                    installGroupQueued = true
                    Task { await self.commitPendingInstalls() }
                }
            }
        } onCancel: {
            Task { await self.withdrawInstall(number) }
        }
    }

    private func withdrawInstall(_ number: Int) {
        guard let index = pendingInstalls.firstIndex(where: { $0.number == number }) else { return }
        let pending = pendingInstalls.remove(at: index)
        pending.staged.discard()
        pending.continuation.resume(throwing: CancellationError())
    }

    /// Installs every pending package as one group, in one transaction. The group is taken
    /// when the transaction starts, so every package staged while the store was busy joins it.
    private func commitPendingInstalls() async {
        let results = GroupResults()
        let taken = TakenGroup()
        let prepared: [PreparedInstall]
        do {
            prepared = try await ledger.transaction { next, transaction in
                let group = await self.takeGroup()
                taken.set(group)
                return try await self.decide(group, in: &next, transaction, results: results)
            }
        } catch {
            for candidate in taken.group {
                settle(candidate.pending, results.result(candidate.pending.number) ?? .failure(error))
            }
            return
        }
        for install in prepared {
            let offered = install.pending.offered
            results.set(install.pending.number, .success(install.version))
            await ledger.remember(
                FileList(files: install.pending.staged.files),
                forVersionPath: install.version.path,
                checked: true
            )
            hub.publish(offered.id, offered.version, .installed)
            logger.info("installed", metadata: ["package": "\(offered.id)", "version": "\(offered.version)"])
        }
        for candidate in taken.group {
            settle(
                candidate.pending,
                results.result(candidate.pending.number)
                    ?? .failure(
                        HotUpdateError(
                            .internalInconsistency,
                            "the group decided nothing",
                            packageID: candidate.pending.offered.id
                        )
                    )
            )
        }
    }

    /// Takes the pending packages as one group. In this process the newest request for a
    /// package is the one wanted: the others are answered ``HotUpdateError/Code/superseded``.
    private func takeGroup() -> [Candidate] {
        let group = pendingInstalls
        pendingInstalls = []
        installGroupQueued = false
        var candidates: [String: Candidate] = [:]
        for pending in group {
            let id = pending.offered.id
            let newest = wanted[id]
            if let key = pending.key, let newest, newest.key != key {
                settle(pending, .failure(Self.superseded(pending.offered, by: newest.key.version)))
                continue
            }
            let chosenAt = pending.key.flatMap { requested[$0] } ?? Date()
            if let earlier = candidates[id] {
                // Two local installs of one package in one group: the later one wins.
                settle(earlier.pending, .failure(Self.superseded(earlier.pending.offered, by: pending.offered.version)))
            }
            candidates[id] = Candidate(pending: pending, chosenAt: chosenAt)
        }
        return group.compactMap { pending in
            candidates[pending.offered.id].flatMap { $0.pending.number == pending.number ? $0 : nil }
        }
    }

    private static func superseded(_ offered: PackageDescriptor, by version: String) -> HotUpdateError {
        HotUpdateError(
            .superseded,
            "version \(offered.version) was not installed: version \(version) was asked for later",
            packageID: offered.id
        )
    }

    /// Decides every candidate against `next`, the snapshot current in the transaction, and
    /// prepares the trees of those that install. Versions the group leaves unreferenced are
    /// deleted after the commit; trees of a failed commit are discarded.
    private nonisolated func decide(
        _ candidates: [Candidate],
        in next: inout StoreSnapshot,
        _ transaction: StoreTransaction,
        results: GroupResults
    ) async throws -> [PreparedInstall] {
        let before = next
        var prepared: [PreparedInstall] = []
        for candidate in candidates {
            let offered = candidate.pending.offered
            let active = next.packages[offered.id]?.active
            if let active, UpdatePlan.isSame(offered, active),
                let directory = try? layout.url(forRelativePath: active.path), FileSystem.isDirectory(directory)
            {
                results.set(candidate.pending.number, .success(active))  // installed since this flight started
                continue
            }
            if let waiting = next.packages[offered.id]?.pending, UpdatePlan.isSame(offered, waiting),
                let directory = try? layout.url(forRelativePath: waiting.path), FileSystem.isDirectory(directory)
            {
                results.set(candidate.pending.number, .success(waiting))  // already waiting for the next launch
                continue
            }
            if let active, let activeChosen = active.chosenAt, activeChosen > candidate.chosenAt {
                results.set(candidate.pending.number, .failure(Self.superseded(offered, by: active.version)))
                continue
            }
            do {
                let install = try await prepare(candidate, in: &next)
                prepared.append(install)  // answered once committed
                transaction.onFailure {
                    await self.discardTree(
                        install.destination,
                        listURL: install.listURL,
                        files: install.pending.staged.files
                    )
                }
            } catch {
                results.set(candidate.pending.number, .failure(error))
            }
        }
        if !prepared.isEmpty { transaction.flushesBeforeCommit = true }

        // What the group leaves unreferenced: versions dropped beyond those kept.
        var dropped: [(String, [InstalledVersion])] = []
        for id in Set(prepared.map(\.pending.offered.id)) {
            let kept = Set(next.packages[id].map(Self.versions(of:))?.map(\.path) ?? [])
            let gone = (before.packages[id].map(Self.versions(of:)) ?? []).filter { !kept.contains($0.path) }
            if !gone.isEmpty { dropped.append((id, gone)) }
        }
        if !dropped.isEmpty {
            let dropped = dropped
            // Versions beyond those kept go before the callers hear back, so a caller never sees them.
            transaction.afterCommit {
                for (id, versions) in dropped { await self.deleteVersions(versions, of: id) }
            }
        }
        return prepared
    }

    /// Every version a record keeps a tree for (see ``InstallRecord/keptVersions``).
    static func versions(of record: InstallRecord) -> [InstalledVersion] {
        record.keptVersions
    }

    /// Removes the staging entry and answers the caller.
    private func settle(_ pending: PendingInstall, _ result: Result<InstalledVersion, any Error>) {
        pending.staged.discard()
        pending.continuation.resume(with: result)
    }

    /// Turns one staged package into objects, a file list and a tree in place, and records
    /// it in `next` (not committed yet). A failure on the way releases what it adopted.
    private nonisolated func prepare(
        _ candidate: Candidate,
        in next: inout StoreSnapshot
    ) async throws
        -> PreparedInstall
    {
        let staged = candidate.pending.staged
        let offered = candidate.pending.offered
        let files = staged.files
        let tree = staged.tree
        let existing = next.packages[offered.id]
        let kept = existing.map(Self.versions(of:)) ?? []
        let relative = try versionPath(for: offered, digest: staged.sha256, avoiding: Set(kept.map(\.path)))
        let destination = try layout.url(forRelativePath: relative)
        guard let listURL = layout.fileListURL(forVersionPath: relative) else {
            throw HotUpdateError(.internalInconsistency, "no file list path for \(relative)", packageID: offered.id)
        }
        let packageDirectory = layout.packageDirectory(id: offered.id)
        do {
            try await adoptObjects(of: staged, for: offered.id, distrustingExisting: false)
            FaultPoint.reached("after-adopt")
            try await FileSystem.offload {
                try FileList(files: files).write(to: listURL)
                try FileSystem.createDirectory(packageDirectory)
                try FileSystem.remove(destination)
                try FileSystem.rename(tree, to: destination, durable: false)  // the group's flush follows
            }
            FaultPoint.reached("after-rename")
        } catch {
            // The staged tree goes first, so the objects only it linked are free to release.
            try? FileSystem.remove(tree)
            await discardTree(destination, listURL: listURL, files: files)
            throw error
        }

        let version = InstalledVersion(
            version: offered.version,
            path: relative,
            archiveSize: staged.size,
            sha256: staged.sha256.hex,
            md5: staged.md5?.hex,
            sourceURL: offered.url.absoluteString,
            installedAt: Date(),
            chosenAt: candidate.chosenAt
        )
        next.packages[offered.id] = Self.installing(
            version,
            over: existing,
            id: offered.id,
            policy: configuration.launch,
            keep: configuration.keepPreviousVersions
        )
        return PreparedInstall(pending: candidate.pending, version: version, destination: destination, listURL: listURL)
    }

    /// The record after installing `version` over `existing`, per the launch policy: a
    /// version whose timing is not ``LaunchPolicy/Timing/immediate`` waits as
    /// ``InstallRecord/pending`` (a version waiting before it is replaced); otherwise it becomes
    /// active, the active one goes first among the previous ones, and a guarded package's new
    /// version starts ``InstallRecord/LaunchPhase/pending`` with the last confirmed version as its fallback.
    /// Blocked versions stay recorded.
    static func installing(
        _ version: InstalledVersion,
        over existing: InstallRecord?,
        id: String,
        policy: LaunchPolicy,
        keep: Int
    ) -> InstallRecord {
        var record = existing ?? InstallRecord(id: id, state: .installed, active: nil)
        record.state = .installed
        record.lastError = nil
        record.lastErrorCode = nil
        if policy.timing(for: id) != .immediate {
            record.pending = version
            return record
        }
        if policy.isGuarded(id) {
            record.launch = InstallRecord.LaunchTrial(phase: .pending, fallback: record.confirmedVersion)
        } else {
            record.launch = nil
        }
        record.previous = Array(([record.active].compactMap { $0 } + record.previous).prefix(keep))
        record.active = version
        record.pending = nil
        return record
    }

    /// Replaces the damaged tree of the active version `repairing` with a freshly fetched
    /// one, in one transaction, provided that version is still the active one (else
    /// ``HotUpdateError/Code/superseded``: the version installed since is not touched).
    ///
    /// The fresh tree goes to a new directory and the record moves to it in the commit; the
    /// damaged tree is deleted after. A crash at any point leaves the record naming a whole
    /// tree (the old one before the commit, the new one after) and an unreferenced tree the
    /// next transaction sweeps. Existing objects are hashed before they are reused: one may
    /// be what was damaged.
    func repairStaged(
        _ staged: StagedPackage,
        _ offered: PackageDescriptor,
        repairing: String
    ) async throws
        -> InstalledVersion
    {
        defer { staged.discard() }
        try Task.checkCancellation()
        let id = offered.id
        let version = try await ledger.transaction { next, transaction in
            guard var record = next.packages[id], let active = record.active, active.path == repairing,
                active.version == offered.version
            else {
                throw HotUpdateError(
                    .superseded,
                    "version \(offered.version) is no longer active; nothing to repair",
                    packageID: id
                )
            }
            let relative = try self.versionPath(
                for: offered,
                digest: staged.sha256,
                avoiding: Set(Self.versions(of: record).map(\.path))
            )
            let destination = try self.layout.url(forRelativePath: relative)
            guard let listURL = self.layout.fileListURL(forVersionPath: relative) else {
                throw HotUpdateError(.internalInconsistency, "no file list path for \(relative)", packageID: id)
            }
            let files = staged.files
            let tree = staged.tree
            let packageDirectory = self.layout.packageDirectory(id: id)
            transaction.onFailure {
                try? FileSystem.remove(tree)
                await self.discardTree(destination, listURL: listURL, files: files)
            }
            try await self.adoptObjects(of: staged, for: id, distrustingExisting: true)
            FaultPoint.reached("after-adopt")
            try await FileSystem.offload {
                try FileList(files: files).write(to: listURL)
                try FileSystem.createDirectory(packageDirectory)
                try FileSystem.rename(tree, to: destination, durable: false)  // the flush before the commit follows
            }
            FaultPoint.reached("after-rename")
            var repaired = active
            repaired.path = relative
            record.active = repaired
            record.state = .installed
            record.lastError = nil
            record.lastErrorCode = nil
            next.packages[id] = record
            transaction.flushesBeforeCommit = true
            transaction.afterCommit {
                await self.deleteVersions([active], of: id)
                await self.ledger.remember(FileList(files: files), forVersionPath: relative, checked: true)
            }
            return repaired
        }
        hub.publish(id, version.version, .installed)
        logger.info("re-fetched a damaged version", metadata: ["package": "\(id)", "version": "\(version.version)"])
        return version
    }

    /// Makes every file of a staged tree an object, off the cooperative pool.
    private nonisolated func adoptObjects(
        of staged: StagedPackage,
        for id: String,
        distrustingExisting: Bool
    )
        async throws
    {
        let objects = self.objects
        let verifier = configuration.verifier
        let files = staged.files
        let tree = staged.tree
        let claimedBy = staged.digestsClaimed ? id : nil
        let copies = try await FileSystem.offload {
            try objects.adopt(
                tree: tree,
                files: files,
                distrustExisting: distrustingExisting,
                claimedBy: claimedBy,
                verifier: verifier
            )
        }
        if copies > 0 {
            logger.notice(
                "the file system would not hard-link \(copies) file(s): they are kept as copies, not shared",
                metadata: ["package": "\(id)"]
            )
        }
    }

    /// The directory for a new version: its version, or the version and digest when a kept
    /// version already uses that name (a re-published version, or a repaired tree), with a
    /// counter after that.
    private nonisolated func versionPath(
        for offered: PackageDescriptor,
        digest: Digest,
        avoiding kept: Set<String>
    )
        throws -> String
    {
        var names = [offered.version, "\(offered.version)-\(digest.hex.prefix(16))"]
        names += (2..<100).map { "\(offered.version)-\(digest.hex.prefix(16))-\($0)" }
        for name in names {
            let relative = layout.relativeVersionPath(id: offered.id, directoryName: name)
            if !kept.contains(relative) { return relative }
        }
        throw HotUpdateError(
            .internalInconsistency,
            "version \(offered.version) with this digest is already kept",
            packageID: offered.id
        )
    }

    /// Removes a tree that was never recorded, its list, and the objects only it linked.
    private nonisolated func discardTree(_ destination: URL, listURL: URL, files: [FileList.Entry]) async {
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
            try await ledger.transaction { next, _ in
                var record = next.packages[id] ?? InstallRecord(id: id, state: .failed, active: nil)
                record.state = .failed
                record.lastError = error.description
                record.lastErrorCode = error.code.description
                next.packages[id] = record
            }
        } catch {
            logger.error("cannot record the failure of \(id): \(error)")
        }
    }

    /// Deletes installed versions that no record refers to any more, and frees the objects
    /// only they linked. Each tree first moves into staging, so that a crash midway leaves
    /// something the next transaction sees and sweeps. Only inside a transaction.
    @discardableResult
    nonisolated func deleteVersions(_ versions: [InstalledVersion], of id: String) async -> ObjectStore.Freed {
        var freed = ObjectStore.Freed()
        for version in versions {
            guard let url = try? layout.url(forRelativePath: version.path) else { continue }
            let listURL = layout.fileListURL(forVersionPath: version.path)
            let list = try? await ledger.fileList(forVersionPath: version.path)
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
                    }
                )
            } catch {
                logger.warning("cannot delete an old version: \(error)", metadata: ["package": "\(id)"])
            }
            await ledger.forget(versionPath: version.path)
        }
        let directory = layout.packageDirectory(id: id)
        if FileSystem.contents(of: directory).isEmpty { try? FileSystem.remove(directory) }
        let lists = layout.fileListsDirectory.appendingPathComponent(id, isDirectory: true)
        if FileSystem.contents(of: lists).isEmpty { try? FileSystem.remove(lists) }
        return freed
    }
}
