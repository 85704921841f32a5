import HotCore

/// A third party's adapter, written against HotCore's public API alone: a metadata store
/// that keeps its snapshot in memory, as an app that persists elsewhere (a database, a
/// key-value store) would start.
actor InMemoryMetadataStore: MetadataStore {
    private var stored: StoreSnapshot = .empty

    func load() async throws -> StoreSnapshot { stored }

    func commit(_ snapshot: StoreSnapshot) async throws {
        for record in snapshot.packages.values {
            for version in [record.active].compactMap({ $0 }) + record.previous {
                let components = version.path.split(separator: "/", omittingEmptySubsequences: false)
                guard !version.path.hasPrefix("/"), !components.contains(where: { $0 == ".." || $0.isEmpty }) else {
                    throw HotUpdateError(
                        .invalidArgument,
                        "only paths relative to the store root are stored",
                        packageID: record.id,
                        subject: version.path
                    )
                }
            }
        }
        stored = snapshot
    }
}
