import Foundation
import HotCore

/// Runs blocking file work on threads of its own, so Swift concurrency's
/// cooperative pool is never held up by `pread`, `write` or zlib.
enum BlockingThreads {
    /// Runs `body(worker)` for `count` workers, each on its own thread, and
    /// returns when all have finished.
    static func run(count: Int, _ body: @escaping @Sendable (Int) -> Void) async {
        guard count > 0 else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let latch = Latch(count: count, continuation: continuation)
            for worker in 0..<count {
                let thread = Thread {
                    body(worker)
                    latch.arrive()
                }
                thread.stackSize = 1 << 20
                thread.name = "HotArchive worker \(worker)"
                thread.start()
            }
        }
    }

    /// Runs `body` on a thread of its own and returns its result.
    static func perform<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let box = ResultBox<T>()
        await run(count: 1) { _ in box.set(Result { try body() }) }
        guard let result = box.get() else {
            throw HotUpdateError(.internalInconsistency, "a worker thread finished without a result")
        }
        return try result.get()
    }
}

/// Resumes a continuation when the last of `count` threads arrives.
private final class Latch: @unchecked Sendable {
    private let lock = NSLock()
    private var remaining: Int
    private let continuation: CheckedContinuation<Void, Never>

    init(count: Int, continuation: CheckedContinuation<Void, Never>) {
        self.remaining = count
        self.continuation = continuation
    }

    func arrive() {
        lock.lock()
        remaining -= 1
        let done = remaining == 0
        lock.unlock()
        if done { continuation.resume() }
    }
}

/// A value handed from a worker thread back to the waiting task.
private final class ResultBox<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<T, any Error>?
    func set(_ value: Result<T, any Error>) {
        lock.lock()
        result = value
        lock.unlock()
    }
    func get() -> Result<T, any Error>? {
        lock.lock()
        defer { lock.unlock() }
        return result
    }
}
