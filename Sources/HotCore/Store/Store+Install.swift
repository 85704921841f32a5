import Foundation
import Logging

/// A staged package to install, as its flight hands it to the store.
struct InstallRequest: Sendable {
    var staged: StagedPackage
    var offered: PackageDescriptor
    /// When the install was asked for, by the device's clock: information only.
    var chosenAt: Date
    /// The generation of the snapshot the request was asked on: an active version committed
    /// after it (by this process or another) was chosen later and is not replaced (see
    /// ``InstalledVersion/chosenInGeneration``).
    var seenGeneration: Int
    /// Asked when the request's group starts: the version asked for since, when this request
    /// is no longer the package's newest in this process; nil when it still is.
    var newerRequest: @Sendable () async -> String?
    /// How the store records the version (the launch policy and the versions kept).
    var policy: LaunchPolicy
    var keep: Int
}

extension Store {
    /// Installs a staged package in the next install group and returns the version recorded.
    ///
    /// Packages staged while the store is busy are installed together, with one flush of the
    /// file system and one commit for all of them, so syncing many small packages does not
    /// pay a flush and a commit each. For every package the steps are safe to interrupt:
    /// every file becomes an object (or a link to the object already holding its content);
    /// the file list is written; the tree is renamed into `packages/`; then, for the group,
    /// the file system is flushed and one commit makes the versions active. A crash before
    /// the commit leaves trees no record refers to, which the next transaction sweeps
    /// together with the objects only they linked. The staging entry is removed whatever
    /// happens.
    ///
    /// Each package is decided against the snapshot current inside the group's transaction:
    /// of several requests for one package only the newest installs, and an install asked
    /// for before the active version was chosen does not replace it
    /// (``HotUpdateError/Code/superseded``).
    ///
    /// Cancelling the caller before its group starts withdraws the package; after that, it
    /// is installed completely.
    func install(_ request: InstallRequest) async throws -> InstalledVersion {
        installRequests += 1
        let number = installRequests
        guard !Task.isCancelled else {
            request.staged.discard()
            throw CancellationError()
        }
        waitingInstalls[number] = request
        let group = openInstallGroup ?? startInstallGroup()
        let withdrawn = withdrawnInstalls
        let results = await withTaskCancellationHandler {
            (try? await group.value) ?? [:]
        } onCancel: {
            withdrawn.withLock { _ = $0.insert(number) }
        }
        guard let result = results[number] else { throw CancellationError() }
        return try result.get()
    }

    /// How many staged packages wait for the next install group.
    var waitingInstallCount: Int { waitingInstalls.count }

    /// Queues the transaction of the next install group.
    private func startInstallGroup() -> Task<[Int: Result<InstalledVersion, any Error>], any Error> {
        let group = enqueue { await self.installGroup() }
        openInstallGroup = group
        return group
    }

    /// Takes every waiting request as one group and installs it in one transaction.
    private func installGroup() async -> [Int: Result<InstalledVersion, any Error>] {
        openInstallGroup = nil
        let requests = waitingInstalls
        waitingInstalls = [:]
        let withdrawn = withdrawnInstalls.withLock { taken in
            defer { taken = [] }
            return taken
        }
        var results: [Int: Result<InstalledVersion, any Error>] = [:]
        // Of several requests for one package, the newest in this process is wanted.
        var candidates: [String: (number: Int, request: InstallRequest)] = [:]
        for (number, request) in requests.sorted(by: { $0.key < $1.key }) {
            if withdrawn.contains(number) { continue }
            let id = request.offered.id
            if let newer = await request.newerRequest() {
                results[number] = .failure(Self.superseded(request.offered, by: newer))
                continue
            }
            if let earlier = candidates[id] {
                // Two local installs of one package in one group: the later one wins.
                results[earlier.number] = .failure(
                    Self.superseded(earlier.request.offered, by: request.offered.version)
                )
            }
            candidates[id] = (number, request)
        }
        let group = candidates.values.sorted { $0.number < $1.number }
        do {
            // Already in the queue: the transaction runs here, not behind this group.
            let decided = try await run { transaction in
                var decided: [Int: Result<InstalledVersion, any Error>] = [:]
                for (number, request) in group {
                    decided[number] = await self.decide(request, in: &transaction)
                }
                return decided
            }
            results.merge(decided.value) { _, new in new }
        } catch {
            for (number, _) in group { results[number] = .failure(error) }
        }
        for request in requests.values { request.staged.discard() }
        return results
    }

    static func superseded(_ offered: PackageDescriptor, by version: String) -> HotUpdateError {
        HotUpdateError(
            .superseded,
            "version \(offered.version) was not installed: version \(version) was asked for later",
            packageID: offered.id
        )
    }

    /// Decides one request against the snapshot current in the transaction and, when it
    /// installs, places its tree and records it (committed with the group).
    private func decide(
        _ request: InstallRequest,
        in transaction: inout StoreTransaction
    ) async -> Result<InstalledVersion, any Error> {
        let offered = request.offered
        let record = transaction[offered.id]
        if let active = record?.active, UpdatePlan.isSame(offered, active), treeExists(active) {
            return .success(active)  // installed since this flight started
        }
        if let waiting = record?.pending, UpdatePlan.isSame(offered, waiting), treeExists(waiting) {
            return .success(waiting)  // already waiting for the next launch
        }
        // The store's order decides, never the clock: a version committed after the snapshot
        // this request was asked on was chosen after it, and stays.
        if let active = record?.active, let chosen = active.chosenInGeneration, chosen > request.seenGeneration {
            return .failure(Self.superseded(offered, by: active.version))
        }
        do {
            let kept = Set((record?.keptVersions ?? []).map(\.path))
            let relative = try await place(
                request.staged,
                for: offered,
                avoiding: kept,
                distrusting: false,
                in: &transaction
            )
            let version = InstalledVersion(
                version: offered.version,
                path: relative,
                archiveSize: request.staged.size,
                sha256: request.staged.sha256.hex,
                md5: request.staged.md5?.hex,
                sourceURL: offered.url.absoluteString,
                installedAt: Date(),
                chosenAt: request.chosenAt,
                chosenInGeneration: transaction.committingGeneration
            )
            transaction.update(offered.id, creatingAs: .installed) {
                $0.install(version, policy: request.policy, keep: request.keep)
            }
            return .success(version)
        } catch {
            return .failure(error)
        }
    }

    /// Replaces the damaged tree of the active version at `repairing` with a freshly fetched
    /// one, in one transaction, provided that version is still the active one (else
    /// ``HotUpdateError/Code/superseded``: the version installed since is not touched).
    ///
    /// The fresh tree goes to a new directory and the record moves to it in the commit; the
    /// damaged tree is deleted after. A crash at any point leaves the record naming a whole
    /// tree (the old one before the commit, the new one after) and an unreferenced tree the
    /// next transaction sweeps. Existing objects are hashed before they are reused: one may
    /// be what was damaged. The repaired version is no longer marked
    /// ``InstalledVersion/damageSeen``: its tree is new.
    func replaceTree(
        _ staged: StagedPackage,
        _ offered: PackageDescriptor,
        repairing: String
    ) async throws -> InstalledVersion {
        defer { staged.discard() }
        try Task.checkCancellation()
        let id = offered.id
        return try await transaction { transaction in
            guard let record = transaction[id], let active = record.active, active.path == repairing,
                active.version == offered.version
            else {
                throw HotUpdateError(
                    .superseded,
                    "version \(offered.version) is no longer active; nothing to repair",
                    packageID: id
                )
            }
            let kept = Set(record.keptVersions.map(\.path))
            var repaired = active
            repaired.damageSeen = nil  // a fresh tree, every file hashed on the way in
            repaired.path = try await self.place(
                staged,
                for: offered,
                avoiding: kept,
                distrusting: true,
                in: &transaction
            )
            transaction.updateExisting(id) {
                $0.active = repaired
                $0.markInstalled()
            }
            return repaired
        }.value
    }

    /// Makes every file of a staged tree an object, writes its file list and renames it
    /// into `packages/` under a new version path; the transaction notes the tree, to flush
    /// it before the commit and discard it if the commit fails. A failure on the way
    /// releases what was adopted.
    ///
    /// - Returns: The version path, relative to the root.
    private func place(
        _ staged: StagedPackage,
        for offered: PackageDescriptor,
        avoiding kept: Set<String>,
        distrusting: Bool,
        in transaction: inout StoreTransaction
    ) async throws -> String {
        let relative = try versionPath(for: offered, digest: staged.sha256, avoiding: kept)
        let destination = try layout.url(forRelativePath: relative)
        guard let listURL = layout.fileListURL(forVersionPath: relative) else {
            throw HotUpdateError(.internalInconsistency, "no file list path for \(relative)", packageID: offered.id)
        }
        var files = staged.files
        let tree = staged.tree
        let packageDirectory = layout.packageDirectory(id: offered.id)
        var placed = StoreTransaction.PlacedTree(
            stagedTree: tree,
            destination: destination,
            listURL: listURL,
            files: files
        )
        do {
            try await PhaseRecorder.measure(\.adoptSeconds) {
                files = try await adoptObjects(of: staged, for: offered.id, distrusting: distrusting)
                placed.files = files
                FaultPoint.reached("after-adopt")
                try await FileSystem.offload { [files] in
                    try FileList(files: files).write(to: listURL)
                    try FileSystem.createDirectory(packageDirectory)
                    try FileSystem.remove(destination)
                    try FileSystem.rename(tree, to: destination, durable: false)  // the commit's flush follows
                }
                FaultPoint.reached("after-rename")
            }
        } catch {
            // The staged tree goes first, so the objects only it linked are free to release.
            await discard(placed)
            throw error
        }
        transaction.placed(placed)
        transaction.remember(FileList(files: files), forVersionPath: relative)
        return relative
    }

    /// Makes every file of a staged tree an object, off the cooperative pool; returns the
    /// files as stored (a false recorded SHA-256 replaced by the file's own).
    private func adoptObjects(
        of staged: StagedPackage,
        for id: String,
        distrusting: Bool
    ) async throws -> [FileList.Entry] {
        let objects = self.objects
        let verifier = self.verifier
        let files = staged.files
        let tree = staged.tree
        let claimedBy = staged.digestsClaimed ? id : nil
        let adoption = try await FileSystem.offload {
            try objects.adopt(
                tree: tree,
                files: files,
                distrustExisting: distrusting,
                claimedBy: claimedBy,
                verifier: verifier
            )
        }
        if adoption.copies > 0 {
            logger.notice(
                "the file system would not hard-link \(adoption.copies) file(s): they are kept as copies, not shared",
                metadata: ["package": "\(id)"]
            )
        }
        return adoption.files
    }

    /// The directory for a new version: its version, or the version and digest when a kept
    /// version already uses that name (a re-published version, or a repaired tree), with a
    /// counter after that.
    private nonisolated func versionPath(
        for offered: PackageDescriptor,
        digest: Digest,
        avoiding kept: Set<String>
    ) throws -> String {
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
}
