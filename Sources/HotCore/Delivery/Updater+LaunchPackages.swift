import Foundation

/// Waiting at launch for the launch packages (``DeliveryMode/launch``).
extension Updater {
    /// Waits until every ``DeliveryMode/launch`` package of the last manifest applied is
    /// installed at the version it offers, or the timeout passes, or their downloads failed:
    /// the app then uses its bundled copy of what is missing. Start the sync first; when no
    /// manifest was applied yet, the wait lasts until a sync records one.
    ///
    /// - Parameter timeout: The longest wait.
    /// - Returns: Whether they are ready, and which are not.
    ///
    /// ```swift
    /// Task { try await updater.sync(from: source) }
    /// let wait = await updater.waitForLaunchPackages(timeout: .seconds(3))
    /// if !wait.isReady { logger.info("launching with bundled \(wait.missing)") }
    /// ```
    public func waitForLaunchPackages(timeout: Duration) async -> LaunchPackagesWait {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        var failed: Set<String> = []
        while true {
            // Subscribed before the check, so no change between the two is missed.
            let events = hub.subscribe(bufferingNewest: 64)
            let missing = await store.missingLaunchPackages()
            if let missing, missing.allSatisfy(failed.contains) {
                return LaunchPackagesWait(isReady: missing.isEmpty, missing: missing, failed: failed.sorted())
            }
            guard ContinuousClock.now < deadline else {
                return LaunchPackagesWait(isReady: false, missing: missing ?? [], failed: failed.sorted())
            }
            let change = await withTaskGroup(of: UpdateEvent.StateChange?.self) { group in
                group.addTask {
                    for await event in events { if case .state(let change) = event { return change } }
                    return nil
                }
                group.addTask {
                    try? await Task.sleep(until: deadline, clock: .continuous)
                    return nil
                }
                let first = await group.next() ?? nil
                group.cancelAll()
                return first
            }
            if let change, change.state == .failed { failed.insert(change.id) }
        }
    }
}
