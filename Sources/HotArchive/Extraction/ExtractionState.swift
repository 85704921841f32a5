import Foundation
import HotCore

/// What the workers of one extraction share: the next entry to take, the first
/// failure, cancellation, the byte budget and progress.
///
/// The shared fields are in one `Locked` state; the user's progress closure is called
/// outside it (under a separate one that only orders deliveries, so values arrive in
/// increasing order).
final class ExtractionState: Sendable {
    private struct State {
        var next = 0
        var failure: HotUpdateError?
        var cancelled = false
        var current: ExtractionReport.Progress
        var files: [(Int, ExtractionReport.File)] = []
    }

    private let state: Locked<State>
    /// The entries count last delivered; held while the progress closure runs.
    private let delivered = Locked(-1)
    private let archive: String
    private let maxTotalBytes: Int64
    private let progress: (@Sendable (ExtractionReport.Progress) -> Void)?

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
        self.state = Locked(
            State(
                current: ExtractionReport.Progress(
                    entriesCompleted: 0,
                    entriesTotal: entriesTotal,
                    bytesWritten: 0,
                    bytesTotal: bytesTotal
                )
            )
        )
    }

    /// The next of `count` pieces of work, or nil when there is none left or the extraction is stopping.
    func claim(of count: Int) -> Int? {
        state.withLock { state in
            guard state.failure == nil, !state.cancelled, state.next < count else { return nil }
            state.next += 1
            return state.next - 1
        }
    }

    /// Whether workers should stop (a failure or a cancellation).
    var isStopping: Bool {
        state.withLock { $0.failure != nil || $0.cancelled }
    }

    /// Records a failure; the first one is the one reported.
    func fail(_ error: HotUpdateError) {
        state.withLock { state in
            if state.failure == nil { state.failure = error }
        }
    }

    /// Stops the workers because the task was cancelled.
    func cancel() {
        state.withLock { $0.cancelled = true }
    }

    /// The failure to report, if any, with cancellation last.
    var outcome: HotUpdateError? {
        let (failure, cancelled) = state.withLock { ($0.failure, $0.cancelled) }
        if let failure { return failure }
        if cancelled { return HotUpdateError(.cancelled, "extraction of '\(archive)' was cancelled", subject: archive) }
        return nil
    }

    /// Counts bytes about to be written against ``ExtractOptions/maxTotalBytes``.
    ///
    /// - Throws: `.limitExceeded` past the limit, `.cancelled` once the extraction is stopping.
    func account(_ count: Int, entry: String) throws {
        let archive = archive
        let maxTotalBytes = maxTotalBytes
        try state.withLock { (state: inout State) throws(HotUpdateError) in
            if state.cancelled {
                throw HotUpdateError(.cancelled, "extraction of '\(archive)' was cancelled", subject: entry)
            }
            if let failure = state.failure { throw failure }
            state.current.bytesWritten += Int64(count)
            if state.current.bytesWritten > maxTotalBytes {
                throw ArchiveError.limit(
                    archive,
                    "the extracted bytes exceed the limit of \(maxTotalBytes) bytes",
                    entry: entry
                )
            }
        }
    }

    /// Records a finished entry (and a written file) and reports progress.
    func finished(entries: Int = 1, file: (Int, ExtractionReport.File)? = nil) {
        state.withLock { state in
            state.current.entriesCompleted += entries
            if let file { state.files.append(file) }
        }
        deliver()
    }

    /// The files written, in archive order.
    var writtenFiles: [ExtractionReport.File] {
        state.withLock { $0.files.sorted { $0.0 < $1.0 }.map(\.1) }
    }

    private func deliver() {
        guard let progress else { return }
        delivered.withLock { last in
            let snapshot = state.withLock { $0.current }
            guard snapshot.entriesCompleted > last else { return }
            last = snapshot.entriesCompleted
            progress(snapshot)
        }
    }
}
