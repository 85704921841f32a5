import Foundation

/// Fans events out to any number of subscribers and keeps the overall progress.
///
/// Publishing never waits: each subscriber has an `AsyncStream` that buffers the newest
/// events up to its limit and drops the oldest beyond it, so a slow subscriber misses
/// old progress rather than stalling downloads. Continuations are yielded to outside the
/// lock.
final class EventHub: Sendable {
    private struct State {
        var subscribers: [UUID: AsyncStream<UpdateEvent>.Continuation] = [:]
        var running: [String: UpdateEvent.PackageProgress] = [:]
        var finished: [String: UpdateEvent.PackageProgress] = [:]
        var transient: [String: PackageState] = [:]

        var overall: UpdateEvent.OverallProgress {
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
    }

    private let state = Locked(State())

    /// A new subscription buffering the newest `limit` events.
    func subscribe(bufferingNewest limit: Int) -> AsyncStream<UpdateEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: UpdateEvent.self,
            bufferingPolicy: .bufferingNewest(max(1, limit))
        )
        let id = UUID()
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            self.state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
        }
        state.withLock { $0.subscribers[id] = continuation }
        return stream
    }

    /// Sends `event` to every subscriber.
    func publish(_ event: UpdateEvent) {
        let targets = state.withLock { Array($0.subscribers.values) }
        for continuation in targets { continuation.yield(event) }
    }

    /// Publishes a state change, remembering it while it is transient.
    func publish(_ id: String, _ version: String?, _ state: PackageState, _ error: HotUpdateError? = nil) {
        self.state.withLock { $0.transient[id] = state.isTransient ? state : nil }
        publish(.state(UpdateEvent.StateChange(id: id, version: version, state: state, error: error)))
    }

    /// The transient state a package is in (downloading, verifying), if any.
    func transientState(of id: String) -> PackageState? {
        state.withLock { $0.transient[id] }
    }

    /// A flight for `key` started.
    func begin(_ key: String, _ progress: UpdateEvent.PackageProgress) {
        let overall = state.withLock { state in
            state.running[key] = progress
            return state.overall
        }
        publish(.progress(progress))
        publish(.overall(overall))
    }

    /// A flight advanced.
    func advance(_ key: String, _ progress: UpdateEvent.PackageProgress) {
        let overall: UpdateEvent.OverallProgress? = state.withLock { state in
            guard state.running[key] != nil else { return nil }
            state.running[key] = progress
            return state.overall
        }
        guard let overall else { return }
        publish(.progress(progress))
        publish(.overall(overall))
    }

    /// A flight ended; once none runs, the overall progress starts again from zero.
    func end(_ key: String) {
        let overall: UpdateEvent.OverallProgress? = state.withLock { state in
            guard let last = state.running.removeValue(forKey: key) else { return nil }
            state.finished[key + "#\(state.finished.count)"] = last
            let overall = state.overall
            if state.running.isEmpty { state.finished.removeAll() }
            return overall
        }
        if let overall { publish(.overall(overall)) }
    }

    /// Ends every subscription.
    func finishAll() {
        let targets = state.withLock { state in
            defer { state.subscribers.removeAll() }
            return Array(state.subscribers.values)
        }
        for continuation in targets { continuation.finish() }
    }
}

extension EventHub {
    /// What a flight's fetch reports, published as that flight's progress (``begin(_:_:)``
    /// under `key`): bytes received, the verifying state, files unpacked.
    func progressObserver(
        id: String,
        version: String,
        key: String,
        tracker: Locked<UpdateEvent.PackageProgress>
    ) -> FetchObserver {
        FetchObserver(
            received: { [self] bytes, expected in
                advance(
                    key,
                    tracker.withLock {
                        $0.bytesReceived = bytes
                        $0.bytesExpected = expected
                        return $0
                    }
                )
            },
            verifying: { [self] in publish(id, version, .verifying) },
            unpacked: { [self] step in
                advance(
                    key,
                    tracker.withLock {
                        $0.filesUnpacked = step.entriesCompleted
                        $0.filesTotal = step.entriesTotal
                        return $0
                    }
                )
            }
        )
    }
}
