#if canImport(Network)
import Dispatch
import HotCore
import Network

/// Tells an updater what the network is like, from `NWPathMonitor`: every path the monitor
/// reports becomes `NetworkConditions` (expensive: cellular or a personal hotspot;
/// constrained: Low Data Mode) passed to `Updater.setNetworkConditions(_:)`. Which downloads
/// wait is decided by HotCore's `NetworkPolicy`, the same code on every platform;
/// this type only reads the path.
///
/// Apple platforms only (the Network framework); on Linux the app sets the conditions itself.
///
/// ```swift
/// let observer = NetworkPathObserver(updater: updater)   // keep it while the updater runs
/// ```
public final class NetworkPathObserver: @unchecked Sendable {
    // NWPathMonitor is thread-safe; it is only started and cancelled here.
    private let monitor = NWPathMonitor()

    /// Starts monitoring and passes each path to `updater`.
    ///
    /// - Parameters:
    ///   - updater: The updater told of each change.
    ///   - queue: Where the monitor reports paths.
    public init(updater: Updater, queue: DispatchQueue = DispatchQueue(label: "HotUpdate.NetworkPathObserver")) {
        monitor.pathUpdateHandler = { path in
            updater.setNetworkConditions(
                NetworkConditions(isExpensive: path.isExpensive, isConstrained: path.isConstrained)
            )
        }
        monitor.start(queue: queue)
    }

    /// Stops monitoring.
    public func cancel() {
        monitor.cancel()
    }

    deinit {
        monitor.cancel()
    }
}
#endif
