import Foundation

extension Updater {
    /// Hands `event` to the configured reporter; nothing when telemetry is off.
    nonisolated func report(_ event: @autoclosure () -> TelemetryEvent) {
        guard let reporter = configuration.telemetry else { return }
        reporter.record(event())
    }
}
