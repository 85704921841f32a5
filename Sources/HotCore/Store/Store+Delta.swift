import Foundation
import Logging

/// What the store knows for a delta: the installed version it applies to, and the bytes of a
/// refused delta kept under `partial/`.
extension Store {
    /// The delta of `descriptor` that applies to the package's active version, with that
    /// version, when it is smaller than the full package (the smallest such); nil when none
    /// applies or the active version is damaged.
    func deltaBase(for descriptor: PackageDescriptor) -> (PackageDescriptor.Delta, InstalledVersion)? {
        guard !descriptor.deltas.isEmpty, let record = cachedRecord(descriptor.id), let active = record.active,
            !record.state.isDamage
        else { return nil }
        let candidates = descriptor.deltas.filter { delta in
            delta.applies(to: active) && (descriptor.size.map { full in (delta.size ?? full) < full } ?? true)
        }
        guard let best = candidates.min(by: { ($0.size ?? .max) < ($1.size ?? .max) }) else { return nil }
        return (best, active)
    }

    /// Removes the bytes of `delta` kept under `partial/`, unless a live download holds them.
    nonisolated func dropPartialDownload(of delta: PackageDescriptor.Delta) async {
        guard let sha256 = delta.sha256, sha256.algorithm == .sha256 else { return }
        let layout = self.layout
        let key = sha256.hex
        if (try? await FileSystem.offload { PartialDownload.remove(layout, key: key) }) == true {
            logger.info("removed the refused delta's partial download", metadata: ["sha256": "\(key)"])
        }
    }
}
