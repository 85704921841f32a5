import Foundation

/// Work coalesced by key, in the manner of Nuke's `TaskPool`: however many callers ask for
/// the same key at once, the work runs once and every caller gets its result. A caller that
/// is cancelled leaves at once (with `CancellationError`); the work is cancelled only when
/// every caller has left. Work that finished is forgotten: the next request starts afresh.
///
/// ```swift
/// let pool = TaskPool<String, Data>()
/// async let a = pool.join("k") { try await download() }   // one download …
/// async let b = pool.join("k") { try await download() }   // … for both
/// ```
actor TaskPool<Key: Hashable & Sendable, Value: Sendable> {
    /// One piece of work and the callers waiting for it.
    private final class Entry {
        let number: Int
        var task: Task<Void, Never>?
        var waiters: [Int: CheckedContinuation<Value, any Error>] = [:]
        var nextWaiter = 0

        init(number: Int) {
            self.number = number
        }
    }

    private var entries: [Key: Entry] = [:]
    private var counter = 0

    init() {}

    /// Waits for the work for `key`, starting `work` when none runs.
    ///
    /// - Throws: What `work` throws; `CancellationError` when the caller is cancelled; the
    ///   error given to ``cancel(where:error:)``.
    func join(_ key: Key, work: @escaping @Sendable () async throws -> Value) async throws -> Value {
        let entry = entries[key] ?? start(key, work)
        entry.nextWaiter += 1
        let waiter = entry.nextWaiter
        let number = entry.number
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                if Task.isCancelled {
                    continuation.resume(throwing: CancellationError())
                    if entry.waiters.isEmpty { abandon(key, entry) }
                } else {
                    entry.waiters[waiter] = continuation
                }
            }
        } onCancel: {
            Task { await self.leave(key, number: number, waiter: waiter) }
        }
    }

    /// How many callers wait for the work for `key` (0 when none runs).
    func subscriberCount(for key: Key) -> Int {
        entries[key]?.waiters.count ?? 0
    }

    /// The keys whose work runs now.
    var runningKeys: [Key] { Array(entries.keys) }

    /// Stops the work for every key that `matches`, for every caller: the callers throw
    /// `error(key)` at once, and this returns when the work has ended.
    func cancel(where matches: (Key) -> Bool, error: (Key) -> any Error) async {
        var stopped: [Task<Void, Never>] = []
        for (key, entry) in entries where matches(key) {
            entries[key] = nil
            entry.task?.cancel()
            if let task = entry.task { stopped.append(task) }
            let failure = error(key)
            for continuation in entry.waiters.values { continuation.resume(throwing: failure) }
            entry.waiters.removeAll()
        }
        for task in stopped { await task.value }
    }

    private func start(_ key: Key, _ work: @escaping @Sendable () async throws -> Value) -> Entry {
        counter += 1
        let entry = Entry(number: counter)
        entries[key] = entry
        let number = entry.number
        entry.task = Task {
            let result: Result<Value, any Error>
            do {
                result = .success(try await work())
            } catch {
                result = .failure(error)
            }
            self.land(key, number: number, result)
        }
        return entry
    }

    /// A cancelled caller leaves; the last one to leave stops the work.
    private func leave(_ key: Key, number: Int, waiter: Int) {
        guard let entry = entries[key], entry.number == number,
            let continuation = entry.waiters.removeValue(forKey: waiter)
        else { return }
        continuation.resume(throwing: CancellationError())
        if entry.waiters.isEmpty { abandon(key, entry) }
    }

    private func abandon(_ key: Key, _ entry: Entry) {
        guard entries[key] === entry else { return }
        entries[key] = nil
        entry.task?.cancel()
    }

    /// Hands the result to every caller still waiting.
    private func land(_ key: Key, number: Int, _ result: Result<Value, any Error>) {
        guard let entry = entries[key], entry.number == number else { return }
        entries[key] = nil
        for continuation in entry.waiters.values { continuation.resume(with: result) }
        entry.waiters.removeAll()
    }
}
