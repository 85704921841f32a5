import Foundation
import Logging

/// The one owner of a store root's state within a process: the snapshot, the store lock,
/// the file lists read, and every change, as a transaction over the snapshot current at
/// that moment.
///
/// - Reading (``read()``) takes the shared lock briefly and re-reads the metadata only when
///   the store's change counter moved since the last load (another process, or another
///   updater over the same root, committed). It creates nothing and sweeps nothing.
/// - Changing (``transaction(_:)``) runs one step at a time in the process, each under the
///   exclusive lock: the snapshot is re-read when the store changed underneath, the body
///   edits it, and the ledger commits it as the next generation. No process ever writes
///   back a snapshot it read before another process's commit. The first transaction sweeps
///   what interrupted steps left (see ``StoreSweeper``).
/// - Staging entries (``makeStaging()``) are created under the shared lock, each with an
///   owner lock (``StagingOwner``), so a sweep in any process removes only the entries of
///   processes that are gone.
/// - Each commit runs the ``StoreCommitHook``s before the store file is replaced, and has
///   them remove what older generations left after it.
actor StoreLedger {
    let layout: StoreLayout
    let store: any MetadataStore
    let logger: Logger
    let verifier: any Verifier
    /// What commits write besides the snapshot (``UpdaterConfiguration/commitHooks``).
    let hooks: [any StoreCommitHook]

    /// The snapshot last loaded or committed.
    private var snapshot: StoreSnapshot?
    /// The change counter seen when ``snapshot`` was loaded; nil: not known, load again.
    private var counter: UInt64?
    /// Whether this ledger swept the root already.
    private var swept = false
    /// Whether one of this ledger's transactions holds the exclusive lock now.
    private var inTransaction = false
    private var tail: Task<Void, Never>?

    /// File lists read, by version path; dropped when another process changed the store.
    private var fileLists: [String: FileList] = [:]
    /// Version paths whose files passed a check since the store last changed underneath.
    private(set) var checkedVersions: Set<String> = []

    var objects: ObjectStore { ObjectStore(layout: layout) }

    init(
        layout: StoreLayout,
        store: any MetadataStore,
        verifier: any Verifier,
        logger: Logger,
        hooks: [any StoreCommitHook] = []
    ) {
        self.layout = layout
        self.store = store
        self.verifier = verifier
        self.logger = logger
        self.hooks = hooks
    }

    // MARK: - Reading

    /// The snapshot as committed now, under the shared lock. A root that does not exist is
    /// read without a lock and nothing is created.
    func read() async throws -> StoreSnapshot {
        if inTransaction, let snapshot { return snapshot }  // our own writer holds the store
        guard let lock = try await StoreLock.acquire(root: layout.root, mode: .shared, create: false) else {
            let loaded = try await load()
            snapshot = loaded
            counter = nil
            return loaded
        }
        defer { lock.release() }
        return try await current(under: lock)
    }

    /// The last snapshot this ledger saw, without touching the store.
    var cached: StoreSnapshot? { snapshot }

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
        let loaded = try await store.load()
        guard loaded.schema <= StoreSnapshot.currentSchema else {
            throw HotUpdateError(.storeCorrupt, "the store was written by a newer HotUpdate (schema \(loaded.schema))")
        }
        return loaded
    }

    /// The file list of an installed version, read once (until the store changes underneath).
    func fileList(forVersionPath path: String) async throws -> FileList {
        if let cached = fileLists[path] { return cached }
        guard let url = layout.fileListURL(forVersionPath: path) else {
            throw HotUpdateError(.storeCorrupt, "the version path '\(path)' has no file list")
        }
        let list = try await FileSystem.offload { try FileList.read(from: url) }
        fileLists[path] = list
        return list
    }

    /// Remembers the list of a version just written.
    func remember(_ list: FileList, forVersionPath path: String, checked: Bool) {
        fileLists[path] = list
        if checked { checkedVersions.insert(path) }
    }

    /// Forgets what was known of a version path.
    func forget(versionPath path: String) {
        fileLists[path] = nil
        checkedVersions.remove(path)
    }

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
        return try await FileSystem.offload {
            // The lock file is created if missing: staging is the start of a change.
            try FileSystem.createDirectory(root)
            if !FileManager.default.fileExists(atPath: root.appendingPathComponent(StoreLock.fileName).path) {
                try StoreLock.withExclusiveLock(root: root) {}
            }
            guard let lock = try StoreLock.acquireBlocking(root: root, mode: .shared, create: false) else {
                throw HotUpdateError(.fileSystem, "the store lock vanished", subject: root.path)
            }
            defer { lock.release() }
            return try StagingOwner.create(directory)
        }
    }

    // MARK: - Changing

    /// Runs `body` as one transaction: after every earlier transaction of this process,
    /// under the exclusive store lock, over the snapshot committed now. When `body` changed
    /// the snapshot it is committed as the next generation (after a flush of the file system
    /// when ``StoreTransaction/flushesBeforeCommit`` is set); then the transaction's
    /// ``StoreTransaction/afterCommit(_:)`` steps run, still under the lock. When `body` or
    /// the commit fails, its ``StoreTransaction/onFailure(_:)`` steps run and the error is thrown.
    ///
    /// Cancelling the caller before the transaction started withdraws it; once started it
    /// runs to the end.
    func transaction<T: Sendable>(
        _ body: @escaping @Sendable (inout StoreSnapshot, StoreTransaction) async throws -> T
    ) async throws -> T {
        let task = enqueue { try await self.run(body) }
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// Queues a transaction without waiting for it.
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

    private func run<T: Sendable>(
        _ body: @escaping @Sendable (inout StoreSnapshot, StoreTransaction) async throws -> T
    ) async throws -> T {
        guard let lock = try await StoreLock.acquire(root: layout.root, mode: .exclusive, create: true) else {
            throw HotUpdateError(.internalInconsistency, "no store lock after creating it", subject: layout.root.path)
        }
        inTransaction = true
        defer {
            inTransaction = false
            lock.release()
        }
        let before = try await current(under: lock)
        if !swept {
            swept = true
            await sweep(before)
        }
        let transaction = StoreTransaction(layout: layout)
        var next = before
        let result: T
        do {
            result = try await body(&next, transaction)
            if next != before {
                if transaction.flushesBeforeCommit {
                    let root = layout.root
                    try await FileSystem.offload { try FileSystem.syncFileSystem(containing: root) }
                    FaultPoint.reached("after-flush")
                }
                next.generation = before.generation + 1
                await runHooks(previous: before, next: next)
                let bumped = try lock.bumpCounter()
                try await commit(next)
                snapshot = next
                counter = bumped
                await removeHookLeftovers(keeping: next.generation)
            }
        } catch {
            for step in transaction.failureSteps.reversed() { await step() }
            throw error
        }
        for step in transaction.commitSteps { await step() }
        return result
    }

    /// Commits `next`. A commit that throws after its new content was put in place (a failed
    /// flush of the directory after the rename, say) did happen: the reload shows the new
    /// generation, and what it records must not be undone.
    private func commit(_ next: StoreSnapshot) async throws {
        do {
            try await store.commit(next)
        } catch {
            guard let stored = try? await store.load(), stored.generation == next.generation else { throw error }
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

    /// Removes what interrupted steps left; under the exclusive lock.
    private func sweep(_ current: StoreSnapshot) async {
        await store.removeLeftovers()
        await removeHookLeftovers(keeping: current.generation)
        let root = layout.root
        let trustPrefix = ".\(StoreLayout.trustFileName).tmp-"
        for name in FileSystem.contents(of: root) where name.hasPrefix(trustPrefix) {
            try? FileSystem.remove(root.appendingPathComponent(name))
        }
        let sweeper = StoreSweeper(layout: layout, logger: logger)
        let objects = self.objects
        let logger = self.logger
        _ = try? await FileSystem.offload {
            guard sweeper.sweep(current) else { return }
            let freed = objects.sweep()
            if freed.objects > 0 {
                logger.notice("removed objects an interrupted step left", metadata: ["count": "\(freed.objects)"])
            }
        }
    }
}

/// What one transaction asks of the ledger besides the new snapshot.
final class StoreTransaction: @unchecked Sendable {
    let layout: StoreLayout
    private let lock = NSLock()
    private var flush = false
    private var failures: [@Sendable () async -> Void] = []
    private var commits: [@Sendable () async -> Void] = []

    init(layout: StoreLayout) {
        self.layout = layout
    }

    /// Whether the file system is flushed before the commit (trees moved into place must be
    /// on disk before a record names them).
    var flushesBeforeCommit: Bool {
        get { lock.withLock { flush } }
        set { lock.withLock { flush = newValue } }
    }

    /// Runs `step` if the transaction fails (in reverse order of registration).
    func onFailure(_ step: @escaping @Sendable () async -> Void) {
        lock.withLock { failures.append(step) }
    }

    /// Runs `step` after the commit, still under the lock (in order of registration).
    func afterCommit(_ step: @escaping @Sendable () async -> Void) {
        lock.withLock { commits.append(step) }
    }

    var failureSteps: [@Sendable () async -> Void] { lock.withLock { failures } }
    var commitSteps: [@Sendable () async -> Void] { lock.withLock { commits } }
}
