import Foundation

/// What an updater keeps for delivery modes in this process: the network's state, the packs
/// held open.
final class DeliveryState: Sendable {
    struct Value: Sendable {
        var network: NetworkConditions
        /// Open holds by package (``Updater/beginUsing(packageID:)``).
        var holds: [String: Int] = [:]
    }

    let value: Locked<Value>

    init(network: NetworkConditions) {
        value = Locked(Value(network: network))
    }
}
