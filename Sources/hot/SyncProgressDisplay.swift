import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Shows a sync's events on stderr: on a terminal, one status line redrawn in place with a
/// line above it for every package that ends; otherwise one plain line per state change.
final class SyncProgressDisplay: @unchecked Sendable {
    private let isTerminal: Bool
    private var overall = UpdateEvent.OverallProgress(
        packagesTotal: 0,
        packagesFinished: 0,
        bytesReceived: 0,
        bytesExpected: 0
    )
    private var active: [String: PackageState] = [:]
    private var statusShown = false

    /// A display for stderr, which is a terminal or not.
    init(isTerminal: Bool = isatty(STDERR_FILENO) == 1) {
        self.isTerminal = isTerminal
    }

    /// Consumes `events` until the stream ends or the task is cancelled.
    func run(_ events: AsyncStream<UpdateEvent>) async {
        for await event in events { show(event) }
    }

    func show(_ event: UpdateEvent) {
        switch event {
        case .state(let change):
            let finished = !change.state.isTransient && change.state != .new && change.state != .updateAvailable
            active[change.id] = finished ? nil : change.state
            if isTerminal {
                if finished { permanent(describe(change)) }
                redraw()
            } else {
                write(describe(change) + "\n")
            }
        case .overall(let progress):
            overall = progress
            if isTerminal { redraw() }
        case .progress:
            break
        case .deltaFallback(let fallback):
            let line =
                "\(fallback.id): the delta from \(fallback.baseVersion) was refused (\(fallback.error.message)); fetching the full package"
            if isTerminal {
                permanent(line)
                redraw()
            } else {
                write(line + "\n")
            }
        }
    }

    /// Clears the status line.
    func finish() {
        if isTerminal && statusShown { write("\r\u{1B}[K") }
        statusShown = false
    }

    private func describe(_ change: UpdateEvent.StateChange) -> String {
        var line = "\(change.id)\t\(change.version ?? "-")\t\(change.state)"
        if let error = change.error { line += "\t\(error.message)" }
        return line
    }

    private func permanent(_ line: String) {
        write("\r\u{1B}[K" + line + "\n")
    }

    private func redraw() {
        var line = "[\(overall.packagesFinished)/\(overall.packagesTotal)] "
        line += ByteCount.format(overall.bytesReceived)
        if overall.bytesExpected > 0 { line += " / " + ByteCount.format(overall.bytesExpected) }
        let working = active.filter { $0.value.isTransient }.keys.sorted()
        if !working.isEmpty {
            line += "  " + working.prefix(4).joined(separator: ", ")
            if working.count > 4 { line += " +\(working.count - 4)" }
        }
        write("\r\u{1B}[K" + line)
        statusShown = true
    }

    private func write(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }
}
