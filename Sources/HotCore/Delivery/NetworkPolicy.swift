/// What the network is like now, as the app tells the updater
/// (``Updater/setNetworkConditions(_:)``). On Apple platforms `NWPathMonitor` reports it
/// (HotTransport's `NetworkPathObserver` passes each path on); on Linux it is a setting.
public struct NetworkConditions: Sendable, Hashable, CustomStringConvertible {
    /// The network costs the user per byte, or is limited: cellular, a personal hotspot
    /// (`NWPath.isExpensive`).
    public var isExpensive: Bool
    /// The user asked to save data: Low Data Mode (`NWPath.isConstrained`).
    public var isConstrained: Bool

    /// Creates a value.
    public init(isExpensive: Bool, isConstrained: Bool = false) {
        self.isExpensive = isExpensive
        self.isConstrained = isConstrained
    }

    /// Neither expensive nor constrained: every download goes.
    public static let unmetered = NetworkConditions(isExpensive: false, isConstrained: false)
    /// Expensive (cellular): downloads above the policy's limits wait.
    public static let metered = NetworkConditions(isExpensive: true, isConstrained: false)

    /// Whether downloads above a limit wait: the network is expensive or constrained.
    public var isMetered: Bool { isExpensive || isConstrained }

    public var description: String {
        isMetered ? (isConstrained ? "constrained" : "metered") : "unmetered"
    }
}

/// Which downloads wait for an unmetered network: those larger than a limit set per delivery
/// mode, or per package (which wins). A package whose size the manifest does not give counts
/// as larger than any limit. On an unmetered network nothing waits.
///
/// A download that waits is not a failure: a sync reports it
/// (``SyncReport/PackageOutcome/isWaitingForNetwork``), publishes
/// ``PackageState/waitingForNetwork`` and fetches it at the first sync on an unmetered
/// network; ``Updater/install(id:)`` throws ``HotUpdateError/Code/waitingForNetwork`` for a
/// pack not installed yet, and serves the installed version of one that is.
///
/// ```swift
/// var policy = NetworkPolicy.standard
/// policy.meteredLimits[.prefetch] = 10 << 20     // 10 MiB in the background on cellular
/// policy.packageLimits["maps-europe"] = 0        // never on cellular
/// configuration.network = policy
/// ```
public struct NetworkPolicy: Sendable, Hashable {
    /// The largest download, in bytes, that goes on a metered network, by delivery mode; a
    /// mode without a limit is never held back.
    public var meteredLimits: [DeliveryMode: Int64]
    /// Limits for single packages, overriding their mode's.
    public var packageLimits: [String: Int64]

    /// Creates a policy.
    public init(meteredLimits: [DeliveryMode: Int64], packageLimits: [String: Int64] = [:]) {
        self.meteredLimits = meteredLimits
        self.packageLimits = packageLimits
    }

    /// Launch packages always go; prefetch downloads above 20 MiB and on-demand packs above
    /// 200 MiB wait for an unmetered network.
    public static let standard = NetworkPolicy(meteredLimits: [.prefetch: 20 << 20, .onDemand: 200 << 20])

    /// Nothing ever waits.
    public static let unlimited = NetworkPolicy(meteredLimits: [:])

    /// The limit that applies to `descriptor` on a metered network, or nil for none.
    public func meteredLimit(for descriptor: PackageDescriptor) -> Int64? {
        packageLimits[descriptor.id] ?? meteredLimits[descriptor.delivery.effective]
    }

    /// Whether downloading `descriptor` waits for an unmetered network under `conditions`.
    public func waits(_ descriptor: PackageDescriptor, on conditions: NetworkConditions) -> Bool {
        guard conditions.isMetered, let limit = meteredLimit(for: descriptor) else { return false }
        guard let size = descriptor.size else { return true }
        return size > limit
    }
}
