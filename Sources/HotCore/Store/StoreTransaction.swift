import Foundation

/// One transaction's view of the store: the snapshot as it will be committed, and the trees
/// placed on the way. Only ``Store`` makes one, inside its exclusive lock, and only through
/// one can a record change or a tree be placed.
///
/// Versions are never deleted by hand: a version some record kept before the transaction
/// and no record keeps after it is deleted by the store after the commit.
struct StoreTransaction: Sendable {
    /// A tree moved into `packages/` whose version is recorded by this transaction's commit
    /// and discarded if the transaction fails.
    struct PlacedTree: Sendable {
        /// The staged tree, when it had not moved yet.
        var stagedTree: URL?
        var destination: URL
        var listURL: URL
        var files: [FileList.Entry]
    }

    /// The snapshot as it stands in this transaction.
    private(set) var snapshot: StoreSnapshot
    let layout: StoreLayout
    /// Trees placed, discarded when the transaction fails.
    private(set) var placed: [PlacedTree] = []
    /// File lists of versions written here, known to the store once committed.
    private(set) var remembered: [(String, FileList)] = []
    /// Whether leftovers and unlinked objects are swept after the commit.
    private(set) var sweepsAfterCommit = false

    init(snapshot: StoreSnapshot, layout: StoreLayout) {
        self.snapshot = snapshot
        self.layout = layout
    }

    /// Whether trees were placed: the file system is flushed before the commit names them.
    var placedTrees: Bool { !placed.isEmpty }

    /// The generation this transaction commits as, when it changes anything: what a version
    /// it chooses records as ``InstalledVersion/chosenInGeneration``.
    var committingGeneration: Int { snapshot.generation + 1 }

    /// The record of a package.
    subscript(_ id: String) -> PackageRecord? { snapshot.packages[id] }

    /// Every record, by id.
    var records: [String: PackageRecord] { snapshot.packages }

    /// Changes the record of `id`, creating it with `state` first when the store has none.
    ///
    /// - Returns: What `change` returned.
    @discardableResult
    mutating func update<T>(
        _ id: String,
        creatingAs state: PackageState,
        _ change: (inout PackageRecord) throws -> T
    ) rethrows -> T {
        var record = snapshot.packages[id] ?? PackageRecord(id: id, state: state, active: nil)
        let result = try change(&record)
        snapshot.packages[id] = record
        return result
    }

    /// Changes the record of `id` when the store has one.
    ///
    /// - Returns: What `change` returned, or nil for a package the store does not know.
    @discardableResult
    mutating func updateExisting<T>(_ id: String, _ change: (inout PackageRecord) throws -> T) rethrows -> T? {
        guard var record = snapshot.packages[id] else { return nil }
        let result = try change(&record)
        snapshot.packages[id] = record
        return result
    }

    /// Removes the record of `id`; its versions are deleted after the commit.
    mutating func removeRecord(_ id: String) -> PackageRecord? {
        snapshot.packages.removeValue(forKey: id)
    }

    /// Records the order of the last manifest applied.
    mutating func setManifestOrder(_ ids: [String]) {
        snapshot.manifestOrder = ids
    }

    /// Records the SHA-256 of the catalog this transaction writes (see
    /// ``StoreSnapshot/catalogSHA256``).
    mutating func setCatalogDigest(_ hex: String) {
        snapshot.catalogSHA256 = hex
    }

    /// Notes a tree moved into place: the file system is flushed before the commit, and the
    /// tree discarded if the transaction fails.
    mutating func placed(_ tree: PlacedTree) {
        placed.append(tree)
    }

    /// Notes the file list of a version this transaction wrote, checked whole.
    mutating func remember(_ list: FileList, forVersionPath path: String) {
        remembered.append((path, list))
    }

    /// Asks for a sweep of leftovers and unlinked objects after the commit.
    mutating func sweepAfterCommit() {
        sweepsAfterCommit = true
    }

    /// The versions the store kept in `before` (for a record, or retained for a live launch)
    /// and no longer keeps in `after`, by id.
    static func dropped(from before: StoreSnapshot, to after: StoreSnapshot) -> [(String, [InstalledVersion])] {
        let old = before.keptVersions
        let new = after.keptVersions
        return old.keys.sorted().compactMap { id in
            let kept = Set(new[id]?.map(\.path) ?? [])
            let gone = (old[id] ?? []).filter { !kept.contains($0.path) }
            return gone.isEmpty ? nil : (id, gone)
        }
    }

    /// `next` with ``StoreSnapshot/retained`` set to the versions `before` kept, that no
    /// record of `next` keeps, and whose trees a live launch still runs from.
    ///
    /// - Parameter held: The version paths live launches run from; read only when
    ///   something is dropped or retained.
    static func retaining(
        _ next: StoreSnapshot,
        from before: StoreSnapshot,
        held: () -> Set<String>
    ) -> StoreSnapshot {
        var next = next
        next.retained = nil
        let candidates = dropped(from: before, to: next)
        guard !candidates.isEmpty else { return next }
        let paths = held()
        var retained: [String: [InstalledVersion]] = [:]
        for (id, versions) in candidates {
            let kept = versions.filter { paths.contains($0.path) }
            if !kept.isEmpty { retained[id] = kept }
        }
        next.retained = retained.isEmpty ? nil : retained
        return next
    }
}
