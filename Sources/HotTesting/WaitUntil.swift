import Foundation
import HotCore

/// Waits for an event a test cannot be told of directly (a queue reaching a length, a
/// process exiting, a file appearing) by polling `condition`, and fails with a message
/// naming the event when `timeout` passes first: a wait in a test never hangs.
///
/// The deadline is generous by default, for machines busy with other work: it bounds a
/// wait, it never decides an outcome.
///
/// ```swift
/// try await waitUntil("three downloads queued") { updater.queuedDownloads >= 3 }
/// ```
///
/// - Parameters:
///   - event: What is awaited, for the failure message.
///   - timeout: The longest wait; two minutes by default.
///   - interval: How long to pause between two polls.
///   - condition: True once the event happened.
/// - Throws: `HotUpdateError.Code.timedOut` naming the event when the deadline passed, and
///   what `condition` throws.
public func waitUntil(
    _ event: @autoclosure () -> String,
    timeout: Duration = .seconds(120),
    interval: Duration = .milliseconds(5),
    _ condition: () async throws -> Bool
) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: timeout)
    while try await !condition() {
        guard clock.now < deadline else {
            throw HotUpdateError(.timedOut, "waited \(timeout) for \(event()), in vain")
        }
        try await Task.sleep(for: interval)
    }
}
