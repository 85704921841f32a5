import Foundation

/// How much room on-demand packs may take, and how long an unused one stays.
///
/// An on-demand pack (``DeliveryMode/onDemand``) unused for ``maxUnusedDays`` is evicted;
/// then, while the packs together take more than ``maxBytes``, the least recently used is
/// evicted, until they fit. Launch and prefetch packages are never evicted, nor a pack that is
/// guarded (``LaunchPolicy/guarded``), that a live launch runs from, that the app holds
/// open (``Updater/beginUsing(packageID:)``), or that this process is downloading. An evicted pack is deleted with every version
/// kept, in one store transaction; the next sync leaves it alone and the next
/// ``Updater/install(id:)`` downloads it again.
///
/// ```swift
/// configuration.onDemandBudget = OnDemandBudget(maxBytes: 500 << 20, maxUnusedDays: 30)
/// ```
public struct OnDemandBudget: Sendable, Hashable {
    /// The most bytes on-demand packs may take on disk (the files of their kept versions); nil
    /// for no byte limit.
    public var maxBytes: Int64?
    /// How many days a pack may stay unused; nil for no limit.
    public var maxUnusedDays: Int?

    /// Creates a budget.
    public init(maxBytes: Int64?, maxUnusedDays: Int? = nil) {
        self.maxBytes = maxBytes.map { max(0, $0) }
        self.maxUnusedDays = maxUnusedDays.map { max(0, $0) }
    }
}

/// The decision of an eviction, apart from the store: which packs go.
package enum EvictionPlan {
    /// An on-demand pack the store holds.
    package struct Candidate: Sendable, Hashable {
        package var id: String
        /// The bytes of its kept versions' files.
        package var bytes: Int64
        /// When it was last used (or installed).
        package var lastUsed: Date
        /// Guarded, held by a live launch, or open in the app: never evicted.
        package var isProtected: Bool

        package init(id: String, bytes: Int64, lastUsed: Date, isProtected: Bool) {
            self.id = id
            self.bytes = bytes
            self.lastUsed = lastUsed
            self.isProtected = isProtected
        }
    }

    /// The packs to evict, least recently used first (ties by id): those unused for longer
    /// than the budget's days, then as many more as it takes to bring the total within its
    /// bytes. Protected packs count toward the total but are never chosen.
    package static func choose(_ candidates: [Candidate], budget: OnDemandBudget, now: Date) -> [Candidate] {
        let ordered = candidates.sorted { ($0.lastUsed, $0.id) < ($1.lastUsed, $1.id) }
        var total = candidates.reduce(Int64(0)) { $0 + $1.bytes }
        var chosen: [Candidate] = []
        for candidate in ordered where !candidate.isProtected {
            let stale = budget.maxUnusedDays.map { now.timeIntervalSince(candidate.lastUsed) > Double($0) * 86_400 }
            let over = budget.maxBytes.map { total > $0 }
            guard stale == true || over == true else { continue }
            chosen.append(candidate)
            total -= candidate.bytes
        }
        return chosen
    }
}
