import Foundation

/// Receives what the engine does: checks, downloads, installs, launch confirmations,
/// rollbacks and blocks.
///
/// Telemetry is off unless an app sets ``UpdaterConfiguration/telemetry``. The engine calls
/// ``record(_:)`` from its own tasks, after the step it reports and never inside a store
/// transaction: an implementation must return at once (queue the event, send it later) and
/// must not call back into the ``Updater``.
///
/// ```swift
/// var configuration = UpdaterConfiguration(root: root, transport: transport, unarchiver: unarchiver,
///                                          verifier: verifier, store: store)
/// configuration.telemetry = try HTTPTelemetryReporter(url: collectorURL, transport: transport, root: root)
/// ```
public protocol TelemetryReporter: Sendable {
    /// Takes one event. Called from any task; must not block or throw.
    ///
    /// - Parameter event: What happened.
    func record(_ event: TelemetryEvent)
}

extension TelemetryEvent {
    /// The random identifier a telemetry reporter sends with its events: created once per
    /// install under the store root, never derived from the device.
    ///
    /// Deleting the store root (or the file) makes a new one, as reinstalling the app does.
    ///
    /// ```swift
    /// let clientID = try TelemetryEvent.ClientID.load(root: root)  // the same value at every launch
    /// ```
    public enum ClientID {
        /// The file under the store root that holds the identifier.
        public static let fileName = "telemetry-id"

        /// The identifier kept under `root`, created (a random UUID) when there is none or the
        /// file does not hold one. Two processes creating it at once agree on one value.
        ///
        /// - Parameter root: The store root.
        /// - Returns: The identifier, a lowercase UUID.
        /// - Throws: ``HotUpdateError/Code/fileSystem`` when it can be neither read nor written.
        public static func load(root: URL) throws -> String {
            try ClientIDFile(root: root, name: fileName).load()
        }
    }
}
