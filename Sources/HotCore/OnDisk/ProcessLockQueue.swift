import Foundation

/// The holders of each store lock inside this process, served in the order they asked.
///
/// `flock(2)` cannot tell the holders of one process apart: two open file descriptions of
/// one lock file conflict as two processes do, and a waiter that polls the lock is served in
/// no order, so a reader could starve behind a stream of writers of its own process and give
/// up as if another process held the lock. Every ``StoreLock`` therefore queues here first,
/// by the lock file's identity (device and inode, so two spellings of one root are one
/// queue): shared holders together, an exclusive one alone, first come first served. Only
/// once its turn has come does it take `flock`, which then waits for other processes alone,
/// and only that wait has a time limit (``StoreLockWait/timeout``): a holder in this process
/// is waited for as long as it holds the lock.
package final class ProcessLockQueue: @unchecked Sendable {
    /// A lock file's identity.
    package struct FileID: Hashable, Sendable {
        /// The device the file is on.
        package var device: UInt64
        /// The file's inode.
        package var inode: UInt64

        /// Creates an identity.
        package init(device: UInt64, inode: UInt64) {
            self.device = device
            self.inode = inode
        }
    }

    /// One lock file's holders and waiters.
    private struct Entry {
        var readers = 0
        var writer = false
        /// Waiters in the order they asked: their tickets and whether they want the lock alone.
        var waiting: [(ticket: UInt64, exclusive: Bool)] = []

        var isIdle: Bool { readers == 0 && !writer && waiting.isEmpty }

        /// Whether the waiter `ticket` may hold the lock now: a writer when no one holds it
        /// and no one asked before it; a reader when no writer holds it and no writer asked
        /// before it.
        func admits(_ ticket: UInt64) -> Bool {
            guard !writer, let index = waiting.firstIndex(where: { $0.ticket == ticket }) else { return false }
            if waiting[index].exclusive { return index == 0 && readers == 0 }
            return !waiting[..<index].contains { $0.exclusive }
        }
    }

    /// The queue of this process.
    package static let shared = ProcessLockQueue()

    private let condition = NSCondition()
    private var entries: [FileID: Entry] = [:]
    private var lastTicket: UInt64 = 0

    /// Waits for this process's earlier holders and waiters of `file` that conflict with
    /// `exclusive`, then counts the caller as a holder until ``leave(_:exclusive:)``.
    /// Blocks the calling thread: call it off the cooperative pool.
    ///
    /// - Parameter deadline: When to stop waiting; nil waits as long as it takes.
    /// - Returns: False when the deadline passed first (the caller holds nothing then).
    package func enter(_ file: FileID, exclusive: Bool, deadline: Date? = nil) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        lastTicket += 1
        let ticket = lastTicket
        entries[file, default: Entry()].waiting.append((ticket, exclusive))
        while true {
            var entry = entries[file] ?? Entry()
            if entry.admits(ticket) {
                entry.waiting.removeAll { $0.ticket == ticket }
                if exclusive { entry.writer = true } else { entry.readers += 1 }
                entries[file] = entry
                // Readers queued behind this one may now hold the lock with it.
                condition.broadcast()
                return true
            }
            if let deadline {
                if Date() >= deadline {
                    entry.waiting.removeAll { $0.ticket == ticket }
                    entries[file] = entry.isIdle ? nil : entry
                    // A writer that gave up may have held back readers behind it.
                    condition.broadcast()
                    return false
                }
                _ = condition.wait(until: deadline)
            } else {
                condition.wait()
            }
        }
    }

    /// Counts the caller no longer as a holder of `file`, and lets the next waiters in.
    package func leave(_ file: FileID, exclusive: Bool) {
        condition.lock()
        defer { condition.unlock() }
        guard var entry = entries[file] else { return }
        if exclusive {
            entry.writer = false
        } else {
            entry.readers = max(0, entry.readers - 1)
        }
        entries[file] = entry.isIdle ? nil : entry
        condition.broadcast()
    }

    /// How many holders and waiters of `file` this process has now (for tests).
    package func occupancy(of file: FileID) -> (holders: Int, waiting: Int) {
        condition.lock()
        defer { condition.unlock() }
        guard let entry = entries[file] else { return (0, 0) }
        return (entry.readers + (entry.writer ? 1 : 0), entry.waiting.count)
    }
}
