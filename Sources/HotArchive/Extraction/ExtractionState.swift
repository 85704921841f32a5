import Foundation
import HotCore

/// What the workers of one extraction share: the next entry to take, the first
/// failure, cancellation, the byte budget and progress.
///
/// Every field is guarded by `lock`; the user's progress closure is called
/// outside it (under a separate lock that only orders deliveries, so values
/// arrive in increasing order).
final class ExtractionState: @unchecked Sendable {
    private let lock = NSLock()
    private let deliveryLock = NSLock()
    private let archive: String
    private let maxTotalBytes: Int64
    private let progress: (@Sendable (ExtractionReport.Progress) -> Void)?
    private var next = 0
    private var failure: HotUpdateError?
    private var cancelled = false
    private var current: ExtractionReport.Progress
    private var lastDelivered = -1
    private var files: [(Int, ExtractionReport.File)] = []

    init(
        archive: String,
        entriesTotal: Int,
        bytesTotal: Int64,
        maxTotalBytes: Int64,
        progress: (@Sendable (ExtractionReport.Progress) -> Void)?
    ) {
        self.archive = archive
        self.maxTotalBytes = maxTotalBytes
        self.progress = progress
        self.current = ExtractionReport.Progress(
            entriesCompleted: 0,
            entriesTotal: entriesTotal,
            bytesWritten: 0,
            bytesTotal: bytesTotal
        )
    }

    /// The next of `count` pieces of work, or nil when there is none left or the extraction is stopping.
    func claim(of count: Int) -> Int? {
        lock.lock()
        defer { lock.unlock() }
        guard failure == nil, !cancelled, next < count else { return nil }
        next += 1
        return next - 1
    }

    /// Whether workers should stop (a failure or a cancellation).
    var isStopping: Bool {
        lock.lock()
        defer { lock.unlock() }
        return failure != nil || cancelled
    }

    /// Records a failure; the first one is the one reported.
    func fail(_ error: HotUpdateError) {
        lock.lock()
        if failure == nil { failure = error }
        lock.unlock()
    }

    /// Stops the workers because the task was cancelled.
    func cancel() {
        lock.lock()
        cancelled = true
        lock.unlock()
    }

    /// The failure to report, if any, with cancellation last.
    var outcome: HotUpdateError? {
        lock.lock()
        defer { lock.unlock() }
        if let failure { return failure }
        if cancelled { return HotUpdateError(.cancelled, "extraction of '\(archive)' was cancelled", subject: archive) }
        return nil
    }

    /// Counts bytes about to be written against ``ExtractOptions/maxTotalBytes``.
    ///
    /// - Throws: `.limitExceeded` past the limit, `.cancelled` once the extraction is stopping.
    func account(_ count: Int, entry: String) throws {
        lock.lock()
        defer { lock.unlock() }
        if cancelled { throw HotUpdateError(.cancelled, "extraction of '\(archive)' was cancelled", subject: entry) }
        if let failure { throw failure }
        current.bytesWritten += Int64(count)
        if current.bytesWritten > maxTotalBytes {
            throw ArchiveError.limit(
                archive,
                "the extracted bytes exceed the limit of \(maxTotalBytes) bytes",
                entry: entry
            )
        }
    }

    /// Records a finished entry (and a written file) and reports progress.
    func finished(entries: Int = 1, file: (Int, ExtractionReport.File)? = nil) {
        lock.lock()
        current.entriesCompleted += entries
        if let file { files.append(file) }
        lock.unlock()
        deliver()
    }

    /// The files written, in archive order.
    var writtenFiles: [ExtractionReport.File] {
        lock.lock()
        defer { lock.unlock() }
        return files.sorted { $0.0 < $1.0 }.map(\.1)
    }

    private func deliver() {
        guard let progress else { return }
        deliveryLock.lock()
        defer { deliveryLock.unlock() }
        lock.lock()
        let snapshot = current
        lock.unlock()
        guard snapshot.entriesCompleted > lastDelivered else { return }
        lastDelivered = snapshot.entriesCompleted
        progress(snapshot)
    }
}
