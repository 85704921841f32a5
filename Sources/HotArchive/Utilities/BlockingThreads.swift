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
        let box = Locked<Result<T, any Error>?>(nil)
        await run(count: 1) { _ in box.set(Result { try body() }) }
        guard let result = box.value else {
            throw HotUpdateError(.internalInconsistency, "a worker thread finished without a result")
        }
        return try result.get()
    }
}

/// Resumes a continuation when the last of `count` threads arrives.
private final class Latch: Sendable {
    private let remaining: Locked<Int>
    private let continuation: CheckedContinuation<Void, Never>

    init(count: Int, continuation: CheckedContinuation<Void, Never>) {
        self.remaining = Locked(count)
        self.continuation = continuation
    }

    func arrive() {
        let done = remaining.withLock { remaining in
            remaining -= 1
            return remaining == 0
        }
        if done { continuation.resume() }
    }
}
