/// Keeps the record of what is installed, committed atomically.
///
/// A commit either replaces the whole snapshot or leaves the old one: implementations
/// write a temporary file, fsync it, rename it over the old one and fsync the directory.
/// Snapshots hold only paths relative to the store root.
///
/// Implementation: `FileMetadataStore` (in `HotStore`), in JSON or a property list.
///
/// ```swift
/// var snapshot = try await store.load()
/// snapshot.packages["images"] = record
/// try await store.commit(snapshot)
/// ```
public protocol MetadataStore: Sendable {
    /// Reads the last committed snapshot; ``StoreSnapshot/empty`` when nothing was committed yet.
    ///
    /// - Throws: ``HotUpdateError/Code/storeCorrupt`` when the stored data cannot be read.
    func load() async throws -> StoreSnapshot

    /// Replaces the stored snapshot with `snapshot`, atomically and durably.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem`` when it cannot be written; the previous
    ///   snapshot is then still the stored one.
    func commit(_ snapshot: StoreSnapshot) async throws

    /// Removes what an interrupted commit left (temporary files beside the stored one).
    /// The engine calls it under the store's exclusive lock, when no commit can run.
    func removeLeftovers() async

    /// A stamp that changes with every commit, read without loading the snapshot (the stored
    /// file's device, inode, size and modification time), so that a check at launch can tell
    /// that nothing was committed since a sync settled (see ``Updater/sync(from:)``). Nil when
    /// the store cannot tell cheaply: every sync then reads the snapshot.
    func commitStamp() -> String?
}

extension MetadataStore {
    /// Nothing to remove: a store that leaves nothing behind.
    public func removeLeftovers() async {}

    /// No stamp: every sync reads the snapshot.
    public func commitStamp() -> String? { nil }
}
