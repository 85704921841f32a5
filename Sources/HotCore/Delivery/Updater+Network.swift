import Foundation
import Logging

/// The network a download waits for (see ``NetworkPolicy``).
extension Updater {
    /// Tells the updater what the network is like now; downloads the policy holds back on a
    /// metered network (``UpdaterConfiguration/network``) wait until a sync on an unmetered
    /// one. On Apple platforms HotTransport's `NetworkPathObserver` calls this for every path
    /// `NWPathMonitor` reports; elsewhere the app sets it.
    ///
    /// ```swift
    /// updater.setNetworkConditions(.metered)
    /// ```
    public nonisolated func setNetworkConditions(_ conditions: NetworkConditions) {
        delivery.value.withLock { $0.network = conditions }
    }

    /// The network's state as last told (``UpdaterConfiguration/initialNetwork`` until then).
    public nonisolated var networkConditions: NetworkConditions {
        delivery.value.withLock { $0.network }
    }

    /// Whether `offered` waits for an unmetered network now.
    nonisolated func waitsForNetwork(_ offered: PackageDescriptor) -> Bool {
        configuration.network.waits(offered, on: networkConditions)
    }

    /// The outcome of a sync's download the network holds back, or nil when it may go.
    func networkWait(_ entry: UpdatePlan.PackagePlan, _ offered: PackageDescriptor) -> SyncReport.PackageOutcome? {
        guard waitsForNetwork(offered) else { return nil }
        let size = offered.size.map(String.init) ?? "unknown"
        let network = networkConditions
        let metadata: Logger.Metadata = ["package": "\(offered.id)", "size": "\(size)", "network": "\(network)"]
        logger.info("waiting for an unmetered network", metadata: metadata)
        hub.publish(offered.id, offered.version, .waitingForNetwork)
        var outcome = SyncReport.PackageOutcome(entry, active: entry.installed?.version)
        outcome.isWaitingForNetwork = true
        return outcome
    }

    /// How many downloads wait for a free slot (for tests).
    package nonisolated var queuedDownloads: Int { slots.waiting }
}
