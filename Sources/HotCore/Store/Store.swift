import Foundation
import Logging

/// The one owner of a store root within a process: the snapshot, the store lock, the file
/// lists read, and every change on disk.
///
/// Every change is a method that states an intent (install these staged packages, record
/// a failure, begin a launch, collect garbage) and returns a typed result. Each runs as one
/// *transaction*: after every earlier one of this process, under the exclusive store lock,
/// over the snapshot committed at that moment, ending in one commit. The snapshot is edited
/// only through a ``StoreTransaction`` value, which only the store makes, so "only inside a
/// transaction" is a rule the types keep: nothing else can change a record, place a tree or
/// delete one.
///
/// - Reading (``read()``) takes the shared lock briefly and re-reads the metadata only when
///   the store's change counter moved since the last load (another process, or another
///   updater over the same root, committed). It creates nothing and sweeps nothing.
/// - A transaction re-reads the snapshot when the store changed underneath, and the store
///   commits the edited snapshot as the next generation: no process ever writes back a
///   snapshot it read before another process's commit. A version that a record kept before
///   the transaction and no longer keeps after it is deleted after the commit, with the
///   objects only it linked. Every transaction first finishes what interrupted steps left
///   in staging; the first one of a process also looks for trees no record keeps.
/// - Staging entries (``makeStaging()``) are created under the shared lock, each with an
///   owner lock (``StagingOwner``), so a sweep in any process removes only the entries of
///   processes that are gone.
/// - Each commit runs the ``StoreCommitHook``s before the store file is replaced (HotAssets'
///   name index is written there), and has them remove what older generations left after it.
package actor Store {
    /// Where things live under the root.
    package nonisolated let layout: StoreLayout
    /// The snapshot's file.
    let metadata: any MetadataStore
    /// Hashes objects when a file's content must be proven before it is reused.
    let verifier: any Verifier
    let logger: Logger
    /// What commits write besides the snapshot (``UpdaterConfiguration/commitHooks``).
    let hooks: [any StoreCommitHook]
    /// How this store waits for another process's hold on the store lock, with the holder
    /// logged as well as told to the configured callback.
    nonisolated let lockWait: StoreLockWait

    /// The snapshot last loaded or committed.
    private var snapshot: StoreSnapshot?
    /// The change counter seen when ``snapshot`` was loaded; nil: not known, load again.
    private var counter: UInt64?
    /// Whether this store swept the root already.
    private var swept = false
    /// The store file's stamp when this store last loaded or committed the snapshot
    /// (``MetadataStore/commitStamp()``): what a settled sync is recorded against.
    var lastStamp: String?
    /// Whether one of this store's transactions holds the exclusive lock now.
    private var inTransaction = false
    private var tail: Task<Void, Never>?

    /// File lists read, by version path; dropped when another process changed the store.
    private var fileLists: [String: FileList] = [:]
    /// Version paths whose files passed a check since the store last changed underneath.
    private var checkedVersions: Set<String> = []
    /// The catalog last read (see ``catalog()``).
    let catalogCache = CatalogCache()
    /// When this process last recorded a use of each package (see ``noteUse(_:now:interval:)``).
    var usesRecorded: [String: Date] = [:]

    /// Staged packages waiting for the next install group, by request number.
    var waitingInstalls: [Int: InstallRequest] = [:]
    /// The install group that takes the waiting requests when its transaction starts.
    var openInstallGroup: Task<[Int: Result<InstalledVersion, any Error>], any Error>?
    var installRequests = 0
    /// Requests whose caller was cancelled before their group started.
    let withdrawnInstalls = Locked<Set<Int>>([])
    /// This store's live launches, by token: each holds its owner file's lock until the
    /// store's next begin, ``endLaunches()``, or the store's end.
    let launchOwners = Locked<[String: LaunchOwner]>([:])

    nonisolated var objects: ObjectStore { ObjectStore(layout: layout, logger: logger) }

    /// Whether the store's volume ignores case, once probed.
    private let ignoresCase = Locked<Bool?>(nil)

    /// Refuses a package for case-sensitive file systems only when the store's volume ignores
    /// case: its paths that differ only by case would be one file there. Probed once per store.
    ///
    /// - Throws: ``HotUpdateError/Code/pathCollision``; ``HotUpdateError/Code/fileSystem``
    ///   when the volume cannot be probed.
    package nonisolated func requireCaseSensitiveVolume(for descriptor: PackageDescriptor) throws {
        guard descriptor.caseSensitive else { return }
        let ignores: Bool
        if let known = ignoresCase.value {
            ignores = known
        } else {
            try FileSystem.createDirectory(layout.root)
            ignores = try FileSystem.ignoresCase(in: layout.root)
            ignoresCase.withLock { $0 = ignores }
        }
        guard ignores else { return }
        throw HotUpdateError(
            .pathCollision,
            "version \(descriptor.version) is for case-sensitive file systems only (its paths may differ only by case), and this store's volume ignores case: not downloaded",
            packageID: descriptor.id
        )
    }

    /// Creates the owner of `layout`'s root.
    init(
        layout: StoreLayout,
        metadata: any MetadataStore,
        verifier: any Verifier,
        logger: Logger,
        hooks: [any StoreCommitHook] = [],
        lockWait: StoreLockWait = .standard
    ) {
        self.layout = layout
        self.metadata = metadata
        self.verifier = verifier
        self.logger = logger
        self.hooks = hooks
        var wait = lockWait
        let told = lockWait.onWait
        let root = layout.root.path
        wait.onWait = { holder in
            logger.warning("waiting for the store lock, held by \(holder)", metadata: ["root": "\(root)"])
            told?(holder)
        }
        self.lockWait = wait
    }

    // MARK: - Reading

    /// The snapshot as committed now, under the shared lock. A root that does not exist is
    /// read without a lock and nothing is created. A read never waits on a long hold of
    /// another process: after ``StoreLockWait/readPatience`` it reads the snapshot last
    /// committed without the lock (the store file is replaced atomically, so that is a whole
    /// generation).
    package func read() async throws -> StoreSnapshot {
        if inTransaction, let snapshot { return snapshot }  // our own writer holds the store
        guard let lock = try await sharedLockForReading() else { return try await loadUnlocked() }
        defer { lock.release() }
        return try await current(under: lock)
    }

    /// The snapshot last committed, read without the lock; what was cached is not trusted
    /// for the next locked read.
    func loadUnlocked() async throws -> StoreSnapshot {
        let loaded = try await load()
        snapshot = loaded
        counter = nil
        return loaded
    }

    /// The shared lock for a read, or nil when there is no lock file or a writer held the
    /// lock beyond the read patience (then the holder is named and the read goes on without it).
    func sharedLockForReading() async throws -> StoreLock? {
        do {
            return try await StoreLock.acquire(
                root: layout.root,
                mode: .shared,
                create: false,
                wait: lockWait,
                timeout: .some(lockWait.readPatience)
            )
        } catch let error as HotUpdateError where error.code == .storeBusy {
            let root = layout.root
            let holder =
                (try? await FileSystem.offload { StoreLock.holder(root: root) }) ?? StoreLockHolder(processID: nil)
            logger.warning(
                "reading the last committed snapshot without the store lock: \(holder) holds it",
                metadata: ["root": "\(layout.root.path)"]
            )
            if lockWait.readPatience < lockWait.noticeAfter { lockWait.onWait?(holder) }
            return nil
        }
    }

    /// The last snapshot this store saw, without touching the disk.
    package var cached: StoreSnapshot? { snapshot }

    /// The record of `id` in the last snapshot this store saw.
    func cachedRecord(_ id: String) -> PackageRecord? { snapshot?.packages[id] }

    /// The snapshot under a held lock: the cached one when the change counter did not move.
    func current(under lock: StoreLock) async throws -> StoreSnapshot {
        let seen = lock.readCounter()
        if let snapshot, counter == seen { return snapshot }
        let loaded = try await load()
        if snapshot != nil {  // changed underneath: what was read of trees may be stale
            fileLists = [:]
            checkedVersions = []
        }
        snapshot = loaded
        counter = seen
        return loaded
    }

    private func load() async throws -> StoreSnapshot {
        // The stamp first: a commit between the two makes it older, never newer, than the load.
        let stamp = metadata.commitStamp()
        let loaded = try await metadata.load()
        lastStamp = stamp
        guard loaded.schema <= StoreSnapshot.currentSchema else {
            throw HotUpdateError(.storeCorrupt, "the store was written by a newer HotUpdate (schema \(loaded.schema))")
        }
        return loaded
    }

    /// The tree of an installed version, absolute for this launch.
    ///
    /// - Throws: ``HotUpdateError/Code/storeCorrupt`` for a recorded path that leaves the root.
    package nonisolated func directory(of version: InstalledVersion) throws -> URL {
        try layout.url(forRelativePath: version.path)
    }

    /// Whether the tree of an installed version is on disk: its directory and every one above
    /// it under the root are real directories (see ``ContainedDirectory``).
    package nonisolated func treeExists(_ version: InstalledVersion) -> Bool {
        guard (try? directory(of: version)) != nil else { return false }
        return ContainedDirectory.isReal(version.path, under: layout.root.path)
    }

    /// Whether the tree of an installed version, or a directory above it under the root, was
    /// replaced by a symbolic link or another kind of file: nothing may be read through it.
    package nonisolated func treeIsOutsideStore(_ version: InstalledVersion) -> Bool {
        guard (try? directory(of: version)) != nil else { return false }
        if case .foreign = ContainedDirectory.check(version.path, under: layout.root.path) { return true }
        return false
    }

    /// The packages of `snapshot` with an active version that is not disabled, most
    /// recently installed first.
    /// The packages the store serves now: those with an active version that is not disabled,
    /// most recently installed first. A package whose tree is reached through a link in place
    /// of one of its directories is left out, so no reader looks into it, and marked for the
    /// next sync to heal (`losses/`).
    ///
    /// - Throws: ``HotUpdateError`` from the metadata store.
    func servedPackages() async throws -> [InstalledPackage] {
        let snapshot = try await read()
        var outside: Set<String> = []
        for record in snapshot.packages.values {
            guard let active = record.active, treeIsOutsideStore(active) else { continue }
            outside.insert(record.id)
            logger.error(
                "a package's tree is not a directory inside the store: not served, healed by the next sync",
                metadata: ["package": "\(record.id)", "version": "\(active.version)"]
            )
            LossMarker.record(record.id, layout: layout)
        }
        return try installedPackages(in: snapshot).filter { !outside.contains($0.id) }
    }

    /// The file list of `id`'s active version, when that is `version`.
    ///
    /// - Throws: ``HotUpdateError/Code/notFound`` when that version is no longer the active
    ///   one, or its list is missing; ``HotUpdateError/Code/storeCorrupt`` when the list cannot
    ///   be decoded.
    func activeFileList(_ id: String, version: String) async throws -> FileList {
        guard let active = try await read().packages[id]?.active, active.version == version else {
            throw HotUpdateError(.notFound, "version \(version) is not the active version", packageID: id)
        }
        do {
            return try await fileList(forVersionPath: active.path)
        } catch {
            throw HotUpdateError.wrap(error, as: .storeCorrupt, "cannot read the file list", packageID: id)
        }
    }

    package nonisolated func installedPackages(in snapshot: StoreSnapshot) throws -> [InstalledPackage] {
        try snapshot.packages.values.compactMap { record -> InstalledPackage? in
            guard let active = record.active, record.state != .disabled else { return nil }
            return try installedPackage(record, version: active)
        }
        .sorted { ($0.installedAt, $0.id) > ($1.installedAt, $1.id) }
    }

    /// `version` of `record`, located for this launch.
    package nonisolated func installedPackage(
        _ record: PackageRecord,
        version: InstalledVersion
    ) throws
        -> InstalledPackage
    {
        InstalledPackage(
            id: record.id,
            version: version.version,
            directory: try directory(of: version),
            state: record.state,
            installedAt: version.installedAt
        )
    }

    /// The file list of an installed version, read once (until the store changes underneath).
    package func fileList(forVersionPath path: String) async throws -> FileList {
        if let cached = fileLists[path] { return cached }
        guard let url = layout.fileListURL(forVersionPath: path) else {
            throw HotUpdateError(.storeCorrupt, "the version path '\(path)' has no file list")
        }
        let list = try await FileSystem.offload { try FileList.read(from: url) }
        fileLists[path] = list
        return list
    }

    /// Whether the files of a version passed a check since the store last changed underneath.
    func isChecked(_ path: String) -> Bool { checkedVersions.contains(path) }

    /// Records the outcome of a check of a version's files.
    func setChecked(_ path: String, _ healthy: Bool) {
        if healthy { checkedVersions.insert(path) } else { checkedVersions.remove(path) }
    }

    // MARK: - Staging

    /// A new staging entry owned by this process, created under the shared lock so no sweep
    /// runs between its creation and its owner lock.
    func makeStaging() async throws -> StagingOwner {
        let directory = layout.stagingDirectory.appendingPathComponent(UUID().uuidString, isDirectory: true)
        if inTransaction { return try StagingOwner.create(directory) }
        let root = layout.root
        let wait = lockWait
        return try await FileSystem.offload {
            // The lock file is created if missing: staging is the start of a change.
            try FileSystem.createDirectory(root)
            if !FileManager.default.fileExists(atPath: root.appendingPathComponent(StoreLock.fileName).path) {
                try StoreLock.withExclusiveLock(root: root, wait: wait) {}
            }
            guard let lock = try StoreLock.acquireBlocking(root: root, mode: .shared, create: false, wait: wait) else {
                throw HotUpdateError(.fileSystem, "the store lock vanished", subject: root.path)
            }
            defer { lock.release() }
            return try StagingOwner.create(directory)
        }
    }

    // MARK: - Transactions

    /// What a transaction left: its result, and what deleting the versions it dropped freed.
    struct Committed<Value: Sendable>: Sendable {
        var value: Value
        var freed = ObjectStore.Freed()
        var versionsDeleted = 0

        var garbage: GarbageReport {
            GarbageReport(versionsRemoved: versionsDeleted, objectsRemoved: freed.objects, bytesFreed: freed.bytes)
        }
    }

    /// Runs `body` as one transaction and waits for it. Cancelling the caller before the
    /// transaction started withdraws it; once started it runs to the end.
    ///
    /// `otherProcesses` bounds the wait for another process's hold on the store lock (a
    /// launch's deadline); this process's earlier transactions are waited for whatever it says.
    func transaction<T: Sendable>(
        otherProcesses: TimeInterval? = nil,
        _ body: @escaping @Sendable (inout StoreTransaction) async throws -> T
    ) async throws -> Committed<T> {
        let task = enqueue { try await self.run(otherProcesses: otherProcesses, body) }
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// Queues `work` after every earlier transaction of this process, without waiting for it.
    @discardableResult
    func enqueue<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) -> Task<T, any Error> {
        let previous = tail
        let task = Task<T, any Error> {
            await previous?.value
            try Task.checkCancellation()
            return try await work()
        }
        tail = Task { _ = await task.result }
        return task
    }

    /// One transaction, under the exclusive lock: the body edits a ``StoreTransaction``
    /// over the snapshot committed now; when the snapshot changed it is committed as the
    /// next generation (after a flush of the file system when the transaction placed trees),
    /// then the versions it dropped are deleted, still under the lock. When the body or the
    /// commit fails, the trees the transaction placed are discarded and the error thrown.
    /// Call it only from work ``enqueue(_:)`` runs (as ``transaction(_:)`` does).
    func run<T: Sendable>(
        otherProcesses: TimeInterval? = nil,
        _ body: @escaping @Sendable (inout StoreTransaction) async throws -> T
    ) async throws -> Committed<T> {
        guard
            let lock = try await StoreLock.acquire(
                root: layout.root,
                mode: .exclusive,
                create: true,
                wait: lockWait,
                otherProcesses: otherProcesses
            )
        else {
            throw HotUpdateError(.internalInconsistency, "no store lock after creating it", subject: layout.root.path)
        }
        inTransaction = true
        defer {
            inTransaction = false
            lock.release()
        }
        let before = try await current(under: lock)
        // Every transaction finishes what a killed process left in staging; the first of
        // this process, or one that found such work, looks at every tree and file list too.
        _ = await sweepLeftovers(before, everyObject: false)
        var transaction = StoreTransaction(snapshot: before, layout: layout)
        let value: T
        var next = before
        do {
            value = try await body(&transaction)
            // A tree a live launch runs from outlives its records (see `StoreSnapshot.retained`).
            let layout = self.layout
            next = StoreTransaction.retaining(transaction.snapshot, from: before) { LaunchOwner.live(in: layout).paths }
            if next != before {
                let bumped = try await PhaseRecorder.measure(\.commitSeconds) {
                    if transaction.placedTrees {
                        let root = layout.root
                        try await FileSystem.offload { try FileSystem.syncFileSystem(containing: root) }
                        FaultPoint.reached("after-flush")
                    }
                    next.generation = before.generation + 1
                    await runHooks(previous: before, next: next)
                    let bumped = try lock.bumpCounter()
                    try await commit(next)
                    return bumped
                }
                lastStamp = metadata.commitStamp()
                snapshot = next
                counter = bumped
                await removeHookLeftovers(keeping: next.generation)
            }
        } catch {
            for tree in transaction.placed.reversed() { await discard(tree) }
            throw error
        }
        var committed = Committed(value: value)
        for (path, list) in transaction.remembered {
            fileLists[path] = list
            checkedVersions.insert(path)
        }
        var listsMissing = false
        for (id, versions) in StoreTransaction.dropped(from: before, to: next) {
            let deleted = await deleteVersions(versions, of: id)
            committed.freed.add(deleted.freed)
            committed.versionsDeleted += versions.count
            if deleted.listsMissing { listsMissing = true }
        }
        if transaction.sweepsAfterCommit || listsMissing {
            committed.freed.add(await sweepLeftovers(next, everyObject: true))
        }
        return committed
    }

    /// Commits `next`. A commit that throws after its new content was put in place (a failed
    /// flush of the directory after the rename, say) did happen: the reload shows the new
    /// generation, and what it records must not be undone.
    private func commit(_ next: StoreSnapshot) async throws {
        do {
            try await metadata.commit(next)
        } catch {
            guard let stored = try? await metadata.load(), stored.generation == next.generation else { throw error }
            logger.warning(
                "the store's new snapshot is in place but its commit reported an error: \(error)",
                metadata: ["generation": "\(next.generation)"]
            )
        }
    }

    /// Has each hook write what it keeps for `next`, about to be committed; under the
    /// exclusive lock, before the store file is replaced.
    private func runHooks(previous: StoreSnapshot, next: StoreSnapshot) async {
        guard !hooks.isEmpty else { return }
        let context = StoreCommitContext(previous: previous, next: next, root: layout.root, logger: logger) {
            [self] path in try await self.fileList(forVersionPath: path)
        }
        for hook in hooks { await hook.willCommit(context) }
    }

    /// Has each hook remove what it kept for generations older than the one before
    /// `generation`; under the exclusive lock.
    private func removeHookLeftovers(keeping generation: Int) async {
        for hook in hooks { await hook.removeLeftovers(keeping: generation, root: layout.root, logger: logger) }
    }

    /// Whether a change now would find nothing an interrupted step left: this store swept
    /// already, or `staging/` holds no entry of a process that died. Every step that places or
    /// deletes a tree does it from a staging entry it removes only after its commit, so a
    /// crash that left a tree no record keeps also left such an entry. (Temporaries of a
    /// commit that changed only records are swept by the next change that finds work.)
    func nothingToSweep() -> Bool {
        guard !swept else { return true }
        let found = StoreSweeper(layout: layout, logger: logger).stagingLeftovers()
        return found.dead.isEmpty && found.deletions.isEmpty
    }

    /// Removes what interrupted steps left, under the exclusive lock, and frees the objects
    /// only that linked. Every call reads `staging/`: deletions a killed process began are
    /// finished from their file lists, and staging no live process owns is removed. The first
    /// call of this store, a call whose staging held a killed process's work, and a call with
    /// `everyObject` also remove the metadata store's and the trust state's temporary files
    /// and the trees and file lists no record keeps. `objects/` is walked (every object
    /// checked for a tree linking it) with `everyObject`, or when something was removed whose
    /// objects no file list names.
    private func sweepLeftovers(_ current: StoreSnapshot, everyObject: Bool) async -> ObjectStore.Freed {
        let full = !swept || everyObject
        swept = true
        let sweeper = StoreSweeper(layout: layout, logger: logger)
        // Read here, on the actor: no staging entry of this process is half made meanwhile
        // (``makeStaging()`` makes one here too when a transaction holds the lock).
        let found = sweeper.stagingLeftovers()
        let staged =
            found.isEmpty
            ? StoreSweeper.Outcome()
            : (try? await FileSystem.offload { sweeper.finish(found) }) ?? StoreSweeper.Outcome()
        var outcome = staged
        if full || staged.foundLeftovers {
            await metadata.removeLeftovers()
            await removeHookLeftovers(keeping: current.generation)
            for file in StoreStateFile.all { file.removeLeftovers(root: layout.root) }
            outcome.add((try? await FileSystem.offload { sweeper.sweepTrees(current) }) ?? StoreSweeper.Outcome())
        }
        guard everyObject || outcome.needsObjectSweep else { return outcome.freed }
        let objects = self.objects
        let walked = (try? await FileSystem.offload { objects.sweep() }) ?? ObjectStore.Freed()
        if walked.objects > 0 {
            logger.notice("removed objects no installed tree links", metadata: ["count": "\(walked.objects)"])
        }
        outcome.freed.add(walked)
        return outcome.freed
    }

    /// Deletes versions no record keeps any more, and frees the objects only they linked.
    /// Each deletion is recorded in staging before anything is removed (see
    /// ``DeletedVersion``): the tree and its file list move there, the tree is removed, the
    /// list's objects are freed, the list goes last. A process killed midway leaves a list the
    /// next transaction (of any process) finishes, freeing those objects and no others.
    /// Called by ``run(_:)`` alone, under the exclusive lock.
    ///
    /// - Returns: What was freed, and whether a version had no file list, so that objects it
    ///   alone linked are found only by a walk of `objects/`.
    private func deleteVersions(
        _ versions: [InstalledVersion],
        of id: String
    ) async -> (freed: ObjectStore.Freed, listsMissing: Bool) {
        var freed = ObjectStore.Freed()
        var listsMissing = false
        // A directory above the trees replaced by a link: the link goes, so no deletion below
        // reaches through it out of the store.
        let packageDirectory = "packages/\(id)"
        if case .foreign(let component) = ContainedDirectory.check(packageDirectory, under: layout.root.path) {
            try? FileSystem.remove(layout.root.appendingPathComponent(component, isDirectory: false))
        }
        for version in versions {
            guard let url = try? directory(of: version) else { continue }
            let listURL = layout.fileListURL(forVersionPath: version.path)
            let known = fileLists[version.path]
            let deletion = DeletedVersion(staging: layout.stagingDirectory)
            let objects = self.objects
            do {
                let deleted = try await FileSystem.offload {
                    try deletion.delete(tree: url, listURL: listURL, known: known, objects: objects)
                }
                freed.add(deleted.freed)
                if !deleted.listKnown { listsMissing = true }
            } catch {
                logger.warning("cannot delete an old version: \(error)", metadata: ["package": "\(id)"])
            }
            fileLists[version.path] = nil
            checkedVersions.remove(version.path)
        }
        let directory = layout.packageDirectory(id: id)
        if FileSystem.isSymlink(directory) || !FileSystem.isDirectory(directory)
            || FileSystem.contents(of: directory).isEmpty
        {
            // A link in place of the package's directory goes itself, never what it points to.
            try? FileSystem.remove(directory)
        }
        let lists = layout.fileListsDirectory.appendingPathComponent(id, isDirectory: true)
        if FileSystem.contents(of: lists).isEmpty { try? FileSystem.remove(lists) }
        return (freed, listsMissing)
    }

    /// Removes a tree a failed transaction placed but never recorded, its list, and the
    /// objects only it linked.
    func discard(_ tree: StoreTransaction.PlacedTree) async {
        let objects = self.objects
        _ = try? await FileSystem.offload {
            if let staged = tree.stagedTree { try? FileSystem.remove(staged) }
            try? FileSystem.remove(tree.destination)
            try? FileSystem.remove(tree.listURL)
            return objects.release(tree.files.map(\.sha256))
        }
    }
}
