/// When ``URLSessionTransport`` suspends its task and resumes it: the decision every platform
/// compiles and Linux tests run, so the only Apple-specific part is whether the platform can
/// suspend at all.
///
/// The task is suspended once more than `limit` bytes wait behind the body stream, and
/// resumed once the consumer has brought them down to half of it. FoundationNetworking
/// (Linux) cannot pause a transfer (suspending a running task there restarts it), so there
/// ``platformCanSuspend`` is false and the decision never suspends.
struct BackPressure: Sendable {
    /// Whether this platform's URLSession can hold a running transfer back.
    static var platformCanSuspend: Bool {
        #if canImport(FoundationNetworking)
        return false
        #else
        return true
        #endif
    }

    /// The most bytes that may wait before the task is suspended.
    let limit: Int
    /// Whether suspending is possible (``platformCanSuspend`` outside tests).
    let canSuspend: Bool
    /// Whether the task is suspended now.
    private(set) var suspended = false

    init(limit: Int, canSuspend: Bool = Self.platformCanSuspend) {
        self.limit = limit
        self.canSuspend = canSuspend
    }

    /// After bytes were queued: whether to suspend the task now.
    mutating func shouldSuspend(pendingBytes: Int) -> Bool {
        guard canSuspend, !suspended, pendingBytes > limit else { return false }
        suspended = true
        return true
    }

    /// After bytes were handed to the consumer: whether to resume the task now.
    mutating func shouldResume(pendingBytes: Int) -> Bool {
        guard suspended, pendingBytes <= limit / 2 else { return false }
        suspended = false
        return true
    }
}
