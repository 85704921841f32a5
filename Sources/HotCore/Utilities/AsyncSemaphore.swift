import Foundation

/// Limits how many tasks hold a slot at once. Waiting is cancellable: a cancelled waiter
/// leaves the queue and throws `CancellationError` without taking a slot.
final class AsyncSemaphore: Sendable {
    private struct State {
        var available: Int
        var waiters: [(id: UUID, continuation: CheckedContinuation<Void, any Error>)] = []
    }

    private let state: Locked<State>

    /// Creates a semaphore with `slots` slots (at least one).
    init(slots: Int) {
        state = Locked(State(available: max(1, slots)))
    }

    /// Takes a slot, waiting for one in arrival order.
    ///
    /// - Throws: `CancellationError` when the task is cancelled while it waits.
    func acquire() async throws {
        let id = UUID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case cancelled, acquired, waiting }
                let outcome = state.withLock { state -> Outcome in
                    if Task.isCancelled { return .cancelled }
                    if state.available > 0 {
                        state.available -= 1
                        return .acquired
                    }
                    state.waiters.append((id, continuation))
                    return .waiting
                }
                switch outcome {
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .acquired: continuation.resume()
                case .waiting: break
                }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                state.waiters.firstIndex { $0.id == id }.map { state.waiters.remove(at: $0) }
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Gives a slot back, to the first waiter if any.
    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard !state.waiters.isEmpty else {
                state.available += 1
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        next?.resume()
    }
}
