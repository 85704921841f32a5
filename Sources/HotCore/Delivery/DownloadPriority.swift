import Foundation

/// How a download waits for a slot: a launch package first, then a pack a user waits for,
/// then updates of installed packages, then prefetching.
enum DownloadPriority: Int, Sendable, Comparable {
    case prefetch = 0
    case update = 1
    case requested = 2
    case launch = 3

    static func < (lhs: DownloadPriority, rhs: DownloadPriority) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The priority of a sync's download.
    static func of(_ change: UpdatePlan.Change, _ offered: PackageDescriptor) -> DownloadPriority {
        if offered.delivery.effective == .launch { return .launch }
        return change == .add && offered.delivery.effective != .onDemand ? .prefetch : .update
    }
}
