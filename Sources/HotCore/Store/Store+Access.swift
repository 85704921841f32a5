import Foundation

/// Work under the store lock that does not change the snapshot: what modules that keep
/// files of their own under the root (a ``StoreCommitHook``'s) need to read them as of the
/// snapshot committed now, or to write them again for it.
extension Store {
    /// Runs `body` with the snapshot committed now, under the shared lock: no process
    /// commits until it returns. When another process holds the exclusive lock beyond the
    /// read patience (``StoreLockWait/readPatience``), `body` runs over the snapshot last
    /// committed, without the lock: a read never waits on a long hold.
    ///
    /// - Returns: What `body` returned; nil, without running it, when the root has no lock
    ///   file (nothing was ever changed there).
    func withSharedLock<T: Sendable>(_ body: @Sendable (StoreSnapshot) async throws -> T) async throws -> T? {
        guard FileManager.default.fileExists(atPath: layout.root.appendingPathComponent(StoreLock.fileName).path) else {
            return nil
        }
        guard let lock = try await sharedLockForReading() else { return try await body(try await loadUnlocked()) }
        defer { lock.release() }
        return try await body(try await current(under: lock))
    }

    /// Runs `body` after this process's earlier transactions, under the exclusive lock,
    /// with the snapshot committed now, which stays as it is: nothing is committed and
    /// nothing swept.
    ///
    /// - Returns: What `body` returned; nil, without running it, when the root has no lock
    ///   file (nothing was ever changed there).
    func withExclusiveLockUnchanged<T: Sendable>(
        _ body: @escaping @Sendable (StoreSnapshot) async throws -> T
    ) async throws -> T? {
        try await enqueue { () async throws -> T? in
            guard
                let lock = try await StoreLock.acquire(
                    root: self.layout.root,
                    mode: .exclusive,
                    create: false,
                    wait: self.lockWait
                )
            else {
                return nil
            }
            defer { lock.release() }
            return try await body(try await self.current(under: lock))
        }
        .value
    }
}

extension Updater {
    /// Runs `body` with the snapshot committed now, under the store's shared lock (see
    /// ``Store/withSharedLock(_:)``); nil when the root has no lock file.
    package nonisolated func withSharedStoreLock<T: Sendable>(
        _ body: @Sendable (StoreSnapshot) async throws -> T
    ) async throws -> T? {
        try await store.withSharedLock(body)
    }

    /// Runs `body` after this process's earlier transactions, under the store's exclusive
    /// lock, with the snapshot committed now, which it does not change (see
    /// ``Store/withExclusiveLockUnchanged(_:)``); nil when the root has no lock file.
    package nonisolated func withExclusiveStoreLock<T: Sendable>(
        _ body: @escaping @Sendable (StoreSnapshot) async throws -> T
    ) async throws -> T? {
        try await store.withExclusiveLockUnchanged(body)
    }

    /// The file list of the installed version at `path` (`packages/<id>/<version>`), read
    /// through the store's cache.
    package nonisolated func cachedFileList(forVersionPath path: String) async throws -> FileList {
        try await store.fileList(forVersionPath: path)
    }
}
