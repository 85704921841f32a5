import Foundation

/// Fans events out to any number of subscribers and keeps the overall progress.
///
/// Publishing never waits: each subscriber has an `AsyncStream` that buffers the newest
/// events up to its limit and drops the oldest beyond it, so a slow subscriber misses
/// old progress rather than stalling downloads. Continuations are yielded to outside the
/// lock.
final class EventHub: @unchecked Sendable {
    private let lock = NSLock()
    private var subscribers: [UUID: AsyncStream<UpdateEvent>.Continuation] = [:]
    private var running: [String: UpdateEvent.PackageProgress] = [:]
    private var finished: [String: UpdateEvent.PackageProgress] = [:]
    private var transient: [String: PackageState] = [:]

    /// A new subscription buffering the newest `limit` events.
    func subscribe(bufferingNewest limit: Int) -> AsyncStream<UpdateEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: UpdateEvent.self,
            bufferingPolicy: .bufferingNewest(max(1, limit))
        )
        let id = UUID()
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            self.lock.withLock { _ = self.subscribers.removeValue(forKey: id) }
        }
        lock.withLock { subscribers[id] = continuation }
        return stream
    }

    /// Sends `event` to every subscriber.
    func publish(_ event: UpdateEvent) {
        let targets = lock.withLock { Array(subscribers.values) }
        for continuation in targets { continuation.yield(event) }
    }

    /// Publishes a state change, remembering it while it is transient.
    func publish(_ id: String, _ version: String?, _ state: PackageState, _ error: HotUpdateError? = nil) {
        lock.withLock { transient[id] = state.isTransient ? state : nil }
        publish(.state(UpdateEvent.StateChange(id: id, version: version, state: state, error: error)))
    }

    /// The transient state a package is in (downloading, verifying), if any.
    func transientState(of id: String) -> PackageState? {
        lock.withLock { transient[id] }
    }

    /// A flight for `key` started.
    func begin(_ key: String, _ progress: UpdateEvent.PackageProgress) {
        let overall = lock.withLock {
            running[key] = progress
            return overallLocked()
        }
        publish(.progress(progress))
        publish(.overall(overall))
    }

    /// A flight advanced.
    func advance(_ key: String, _ progress: UpdateEvent.PackageProgress) {
        let overall: UpdateEvent.OverallProgress? = lock.withLock {
            guard running[key] != nil else { return nil }
            running[key] = progress
            return overallLocked()
        }
        guard let overall else { return }
        publish(.progress(progress))
        publish(.overall(overall))
    }

    /// A flight ended; once none runs, the overall progress starts again from zero.
    func end(_ key: String) {
        let overall: UpdateEvent.OverallProgress? = lock.withLock {
            guard let last = running.removeValue(forKey: key) else { return nil }
            finished[key + "#\(finished.count)"] = last
            let overall = overallLocked()
            if running.isEmpty { finished.removeAll() }
            return overall
        }
        if let overall { publish(.overall(overall)) }
    }

    private func overallLocked() -> UpdateEvent.OverallProgress {
        var received: Int64 = 0
        var expected: Int64 = 0
        for progress in Array(running.values) + Array(finished.values) {
            received += progress.bytesReceived
            expected += progress.bytesExpected ?? 0
        }
        return UpdateEvent.OverallProgress(
            packagesTotal: running.count + finished.count,
            packagesFinished: finished.count,
            bytesReceived: received,
            bytesExpected: expected
        )
    }

    /// Ends every subscription.
    func finishAll() {
        let targets = lock.withLock {
            defer { subscribers.removeAll() }
            return Array(subscribers.values)
        }
        for continuation in targets { continuation.finish() }
    }
}
