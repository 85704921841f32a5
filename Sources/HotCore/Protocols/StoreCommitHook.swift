import Foundation
import Logging

/// Work the store does in its commits besides recording the snapshot: files under the root
/// that must always describe the committed snapshot, written in the same commit.
///
/// Register hooks in ``UpdaterConfiguration/commitHooks``. In every commit that changes the
/// snapshot, under the store's exclusive lock, after the file system was flushed and before
/// the store file is replaced, each hook's ``willCommit(_:)`` runs in turn with the snapshot
/// before and after; after the commit, and when the first change of a process sweeps the
/// root, each hook's ``removeLeftovers(keeping:root:logger:)`` removes what older generations
/// left. A kill at any moment then leaves the old snapshot with what the hooks wrote for it,
/// or the new one with what they wrote for it: a hook writes one file per generation and
/// keeps the previous generation's for readers that read the snapshot just before a commit.
///
/// A hook cannot stop a commit: it logs its failures and leaves readers to cope with a
/// generation it wrote nothing for. It owns a directory of its own under the root, which
/// the store's sweep leaves alone.
///
/// HotAssets' `NameIndexWriter` is one: it writes the store's name index, which the
/// resolvers made from an updater map at launch.
///
/// ```swift
/// var configuration = UpdaterConfiguration(root: root, transport: transport, unarchiver: unarchiver,
///                                          verifier: verifier, store: store)
/// configuration.commitHooks = [NameIndexWriter()]
/// ```
public protocol StoreCommitHook: Sendable {
    /// Writes what the hook keeps for ``StoreCommitContext/next``, about to be committed as
    /// ``StoreCommitContext/generation``, durably (flushed to disk) before it returns.
    ///
    /// Called under the store's exclusive lock, after the flush and before the store file is
    /// replaced; the commit goes ahead whatever happens here.
    func willCommit(_ commit: StoreCommitContext) async

    /// Removes what the hook wrote for generations other than `generation` and the one
    /// before, and what an interrupted write left. Called under the store's exclusive lock,
    /// after each commit (with the generation committed) and when the first change of a
    /// process sweeps the root (with the generation committed then).
    ///
    /// - Parameters:
    ///   - generation: The store's generation now.
    ///   - root: The store root.
    ///   - logger: The updater's logger.
    func removeLeftovers(keeping generation: Int, root: URL, logger: Logger) async

    /// Whether what the hook keeps for `generation` is gone from `root` (deleted by
    /// something other than the store). It must cost no more than a `stat`: every sync asks
    /// it. When it answers true, the sync runs ``willCommit(_:)`` again for the snapshot
    /// committed now, with ``StoreCommitContext/previous`` and ``StoreCommitContext/next``
    /// both that snapshot, under the exclusive lock.
    func isMissing(generation: Int, root: URL) -> Bool
}

extension StoreCommitHook {
    /// Nothing to remove: a hook that keeps nothing per generation.
    public func removeLeftovers(keeping generation: Int, root: URL, logger: Logger) async {}

    /// Never missing: a hook that keeps nothing per generation.
    public func isMissing(generation: Int, root: URL) -> Bool { false }
}

/// What a ``StoreCommitHook`` is given in a commit: the snapshot before and after, where
/// the store is, and the store's file lists.
public struct StoreCommitContext: Sendable {
    /// The snapshot committed now.
    public let previous: StoreSnapshot
    /// The snapshot about to be committed (its ``StoreSnapshot/generation`` set).
    public let next: StoreSnapshot
    /// The store root.
    public let root: URL
    /// The updater's logger.
    public let logger: Logger
    private let readFileList: @Sendable (String) async throws -> FileList

    /// The generation being committed: `next.generation`.
    public var generation: Int { next.generation }

    /// Creates a context.
    ///
    /// - Parameters:
    ///   - previous: The snapshot committed now.
    ///   - next: The snapshot about to be committed.
    ///   - root: The store root.
    ///   - logger: Where the hook logs.
    ///   - fileList: Reads the file list of an installed version by its path.
    package init(
        previous: StoreSnapshot,
        next: StoreSnapshot,
        root: URL,
        logger: Logger,
        fileList: @escaping @Sendable (String) async throws -> FileList
    ) {
        self.previous = previous
        self.next = next
        self.root = root
        self.logger = logger
        readFileList = fileList
    }

    /// The file list of the installed version at `path` (an ``InstalledVersion/path``,
    /// `packages/<id>/<version>`), read through the store's cache: each list is read from
    /// `filelists/` once until another process changes the store.
    ///
    /// - Throws: ``HotUpdateError/Code/notFound`` when the list does not exist or cannot be
    ///   read; ``HotUpdateError/Code/storeCorrupt`` for a path of another shape or a damaged list.
    public func fileList(forVersionPath path: String) async throws -> FileList {
        try await readFileList(path)
    }
}
