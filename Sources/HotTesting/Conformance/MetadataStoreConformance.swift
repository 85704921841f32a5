import Foundation
import HotCore

/// The conformance suite of `MetadataStore`, through its public API.
///
/// The checks, each a ``ConformanceCheck``:
/// - a store never committed to loads `StoreSnapshot.empty`;
/// - a committed snapshot loads back equal, field for field, from the same store and from a
///   store reopened over the same storage;
/// - a commit replaces the whole snapshot (packages dropped from it are gone, nothing is merged);
/// - only relative paths are stored: a snapshot holding an absolute or escaping path is
///   refused with a `HotUpdateError` and the stored snapshot stays the previous one;
/// - concurrent commits of different snapshots leave exactly one of them, complete, and loads
///   running meanwhile each see one complete snapshot;
/// - stored data that cannot be read loads as `HotUpdateError.Code.storeCorrupt` (when the
///   subject says how to damage its data, see ``Subject/corrupt``).
///
/// The factory receives a fresh empty directory per check, removed when the check ends: a
/// store that keeps files puts them there, an in-memory store ignores it.
///
/// ```swift
/// let suite = MetadataStoreConformance { directory in
///     let store = FileMetadataStore(root: directory)
///     return MetadataStoreConformance.Subject(
///         store: store,
///         reopen: { FileMetadataStore(root: directory) },
///         corrupt: { try Data("{ not json".utf8).write(to: store.fileURL) })
/// }
/// ```
public struct MetadataStoreConformance: Sendable {
    /// A store under test, and how to reach its storage again.
    public struct Subject: Sendable {
        /// The store the checks commit to and load from.
        public var store: any MetadataStore
        /// Opens another store over the same storage, as the next launch of an app would;
        /// nil when there is no storage beyond ``store`` itself (it is then used again).
        public var reopen: (@Sendable () throws -> any MetadataStore)?
        /// Damages the stored data so it cannot be read (garbage in the file); nil when the
        /// store's data cannot be damaged from outside: the "corrupt data is a typed error"
        /// check then passes without testing anything.
        public var corrupt: (@Sendable () throws -> Void)?

        /// Creates a subject.
        ///
        /// - Parameters:
        ///   - store: The store under test.
        ///   - reopen: Opens another store over the same storage; nil to reuse `store`.
        ///   - corrupt: Damages the stored data; nil when it cannot be damaged.
        public init(
            store: any MetadataStore,
            reopen: (@Sendable () throws -> any MetadataStore)? = nil,
            corrupt: (@Sendable () throws -> Void)? = nil
        ) {
            self.store = store
            self.reopen = reopen
            self.corrupt = corrupt
        }
    }

    /// Makes the subject of one check in a fresh empty directory.
    public let makeSubject: @Sendable (_ directory: URL) async throws -> Subject

    /// Creates the suite.
    ///
    /// - Parameter makeSubject: Makes a store over empty storage in the directory given;
    ///   called once per check.
    public init(makeSubject: @escaping @Sendable (_ directory: URL) async throws -> Subject) {
        self.makeSubject = makeSubject
    }

    static let suite = "MetadataStore"

    /// Every check of the suite.
    public var checks: [ConformanceCheck] {
        [
            check("empty store loads empty", "load() of a store never committed to returns StoreSnapshot.empty") {
                subject in
                let loaded = try await subject.store.load()
                try Conformance.require(
                    loaded == .empty,
                    "load() returned \(Self.summary(loaded)), not the empty snapshot"
                )
            },
            check(
                "round trip",
                "a committed snapshot loads back equal, from the same store and from one reopened over its storage"
            ) { subject in
                let snapshot = Self.sample(generation: 7, packages: 3)
                try await subject.store.commit(snapshot)
                let loaded = try await subject.store.load()
                try Self.requireEqual(loaded, snapshot, "load() after commit")
                let reopened = try subject.reopen?() ?? subject.store
                let again = try await reopened.load()
                try Self.requireEqual(again, snapshot, "load() from a reopened store")
            },
            check("commit replaces", "a commit replaces the whole snapshot; nothing of the previous one is merged in") {
                subject in
                try await subject.store.commit(Self.sample(generation: 1, packages: 4))
                var smaller = Self.sample(generation: 2, packages: 1)
                smaller.manifestOrder = nil
                try await subject.store.commit(smaller)
                try Self.requireEqual(try await subject.store.load(), smaller, "load() after the second commit")
                let reopened = try subject.reopen?() ?? subject.store
                try Self.requireEqual(try await reopened.load(), smaller, "load() from a reopened store")
            },
            check(
                "relative paths only",
                "a snapshot with an absolute or escaping path is refused with a HotUpdateError and the stored snapshot stays the previous one"
            ) { subject in
                let good = Self.sample(generation: 3, packages: 2)
                try await subject.store.commit(good)
                for bad in ["/var/mobile/Containers/Data/packages/p0/1", "../outside/p0/1", "packages/../../p0/1"] {
                    var snapshot = Self.sample(generation: 4, packages: 2)
                    snapshot.packages["p0"]?.active?.path = bad
                    try await Conformance.expectError([.invalidArgument, .storeCorrupt], "commit of path '\(bad)'") {
                        try await subject.store.commit(snapshot)
                    }
                    try Self.requireEqual(
                        try await subject.store.load(),
                        good,
                        "load() after the refused commit of '\(bad)'"
                    )
                }
            },
            check(
                "concurrent commits leave one complete snapshot",
                "concurrent commits leave exactly one of the committed snapshots, and concurrent loads each see a complete one"
            ) { subject in
                let store = subject.store
                let count = 16
                let committed = (1...count).map { Self.sample(generation: $0, packages: 5, tag: "g\($0)") }
                let observed = try await withThrowingTaskGroup(of: StoreSnapshot?.self) { group in
                    for snapshot in committed {
                        group.addTask {
                            try await store.commit(snapshot)
                            return nil
                        }
                        group.addTask { try await store.load() }
                    }
                    var loads: [StoreSnapshot] = []
                    for try await case let snapshot? in group { loads.append(snapshot) }
                    return loads
                }
                for snapshot in observed where snapshot != .empty && !committed.contains(snapshot) {
                    throw Violation(
                        "a load during the commits returned a snapshot no commit wrote: \(Self.summary(snapshot))"
                    )
                }
                let final = try await store.load()
                try Conformance.require(
                    committed.contains(final),
                    "after the commits the store holds a snapshot no commit wrote: \(Self.summary(final))"
                )
                let reopened = try subject.reopen?() ?? store
                try Self.requireEqual(try await reopened.load(), final, "load() from a reopened store")
            },
            check(
                "corrupt data is a typed error",
                "stored data that cannot be read makes load() throw HotUpdateError storeCorrupt"
            ) { subject in
                guard let corrupt = subject.corrupt else { return }
                try await subject.store.commit(Self.sample(generation: 1, packages: 2))
                try corrupt()
                let reopened = try subject.reopen?() ?? subject.store
                try await Conformance.expectError([.storeCorrupt], "load() of damaged data") {
                    try await reopened.load()
                }
            },
        ]
    }

    private func check(
        _ name: String,
        _ contract: String,
        _ body: @escaping @Sendable (Subject) async throws -> Void
    ) -> ConformanceCheck {
        let make = makeSubject
        return ConformanceCheck(suite: Self.suite, name: name, contract: contract) {
            try await Conformance.withScratch(Self.suite) { directory in
                let subject = try await make(directory)
                try await body(subject)
            }
        }
    }

    /// A snapshot with `packages` records, each with an active and a previous version, dates
    /// on whole seconds (every store format keeps them), a non-ASCII error message, the
    /// manifest order set. `tag` marks every record, so a mix of two snapshots shows.
    static func sample(generation: Int, packages: Int, tag: String = "t") -> StoreSnapshot {
        var snapshot = StoreSnapshot(generation: generation)
        let base = Date(timeIntervalSince1970: 1_700_000_000 + Double(generation) * 3600)
        for index in 0..<packages {
            let id = "p\(index)"
            let active = InstalledVersion(
                version: "\(generation).\(index)",
                path: "packages/\(id)/\(generation).\(index)",
                archiveSize: Int64(1000 * (index + 1)),
                sha256: String(repeating: "ab", count: 32),
                md5: nil,
                sourceURL: "https://cdn.example.com/\(tag)/\(id).zip",
                installedAt: base + Double(index)
            )
            let previous = InstalledVersion(
                version: "0.\(index)",
                path: "packages/\(id)/0.\(index)",
                archiveSize: 10,
                sha256: nil,
                md5: String(repeating: "cd", count: 16),
                sourceURL: "file:///bundle/\(id).zip",
                installedAt: base - 86_400
            )
            snapshot.packages[id] = PackageRecord(
                id: id,
                state: index % 2 == 0 ? .installed : .failed,
                active: active,
                previous: [previous],
                lastError: index % 2 == 0 ? nil : "échec du téléchargement (\(tag)) 下载失败",
                lastErrorCode: index % 2 == 0 ? nil : HotUpdateError.Code.digestMismatch.description
            )
        }
        snapshot.manifestOrder = (0..<packages).map { "p\($0)" }.reversed()
        return snapshot
    }

    static func requireEqual(_ actual: StoreSnapshot, _ expected: StoreSnapshot, _ what: String) throws {
        guard actual != expected else { return }
        var differences: [String] = []
        if actual.schema != expected.schema { differences.append("schema \(actual.schema) != \(expected.schema)") }
        if actual.generation != expected.generation {
            differences.append("generation \(actual.generation) != \(expected.generation)")
        }
        if actual.manifestOrder != expected.manifestOrder {
            differences.append("manifestOrder \(String(describing: actual.manifestOrder))")
        }
        for id in Set(actual.packages.keys).union(expected.packages.keys).sorted()
        where actual.packages[id] != expected.packages[id] {
            differences.append("package \(id): \(String(describing: actual.packages[id]))")
        }
        throw Violation("\(what) returned a different snapshot: \(differences.joined(separator: "; "))")
    }

    static func summary(_ snapshot: StoreSnapshot) -> String {
        "generation \(snapshot.generation) with packages \(snapshot.packages.keys.sorted())"
            + " (sources \(snapshot.packages.values.compactMap { $0.active?.sourceURL }.sorted()))"
    }
}
