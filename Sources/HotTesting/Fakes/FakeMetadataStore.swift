import HotCore

/// A `MetadataStore` in memory, with failure injection, for the engine's unit tests.
///
/// ```swift
/// let store = FakeMetadataStore()
/// await store.failNextCommits(1)
/// ```
public actor FakeMetadataStore: MetadataStore {
    private var stored: StoreSnapshot
    private var commits = 0
    private var failuresLeft = 0

    /// Creates a store holding `initial`.
    public init(initial: StoreSnapshot = .empty) {
        stored = initial
    }

    /// The last committed snapshot.
    public var snapshot: StoreSnapshot { stored }
    /// How many commits succeeded.
    public var commitCount: Int { commits }

    /// Makes the next `count` commits fail with `HotUpdateError.Code.fileSystem` (a full disk).
    public func failNextCommits(_ count: Int) {
        failuresLeft = count
    }

    public func load() async throws -> StoreSnapshot { stored }

    public func commit(_ snapshot: StoreSnapshot) async throws {
        if failuresLeft > 0 {
            failuresLeft -= 1
            throw HotUpdateError(.fileSystem, "no space left on device (injected)")
        }
        stored = snapshot
        commits += 1
    }
}
