import Foundation

/// Limits how many tasks hold a slot at once. A free slot goes to the waiter of highest
/// priority, in arrival order among equals. Waiting is cancellable: a cancelled waiter leaves
/// the queue and throws `CancellationError` without taking a slot.
final class AsyncSemaphore: Sendable {
    private struct Waiter {
        var id: UUID
        var priority: Int
        var tag: String?
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var available: Int
        var waiters: [Waiter] = []
    }

    private let state: Locked<State>

    /// Creates a semaphore with `slots` slots (at least one).
    init(slots: Int) {
        state = Locked(State(available: max(1, slots)))
    }

    /// Takes a slot, waiting for one behind every waiter of higher or equal priority that
    /// came first.
    ///
    /// - Parameters:
    ///   - priority: Higher goes first.
    ///   - tag: Names the waiter for ``raise(tag:to:)``.
    /// - Throws: `CancellationError` when the task is cancelled while it waits.
    func acquire(priority: Int = 0, tag: String? = nil) async throws {
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
                    state.waiters.append(Waiter(id: id, priority: priority, tag: tag, continuation: continuation))
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

    /// Raises the priority of the waiters tagged `tag` to at least `priority` (a user now
    /// waits for what a background download queued).
    func raise(tag: String, to priority: Int) {
        state.withLock { state in
            for index in state.waiters.indices where state.waiters[index].tag == tag {
                state.waiters[index].priority = max(state.waiters[index].priority, priority)
            }
        }
    }

    /// How many tasks wait for a slot (for tests).
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Gives a slot back, to the first waiter of the highest priority if any.
    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard let top = state.waiters.map(\.priority).max(),
                let index = state.waiters.firstIndex(where: { $0.priority == top })
            else {
                state.available += 1
                return nil
            }
            return state.waiters.remove(at: index).continuation
        }
        next?.resume()
    }
}
