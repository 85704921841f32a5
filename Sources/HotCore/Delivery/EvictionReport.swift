import Foundation

/// What an eviction of on-demand packs did.
public struct EvictionReport: Sendable, Hashable {
    /// The packs evicted, least recently used first.
    public var evicted: [String]
    /// The bytes of their files (shared files are freed only when nothing else links them:
    /// see ``garbage``).
    public var bytes: Int64
    /// The versions deleted and the objects freed.
    public var garbage: GarbageReport

    /// Creates a report.
    public init(evicted: [String], bytes: Int64, garbage: GarbageReport) {
        self.evicted = evicted
        self.bytes = bytes
        self.garbage = garbage
    }
}
