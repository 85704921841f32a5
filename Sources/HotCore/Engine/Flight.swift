import Foundation

/// What identifies one flight: the package, the version, what is fetched (its strongest
/// digest, else its URL), and, for a repair, the installed tree it repairs.
struct FlightKey: Hashable, Sendable {
    var id: String
    var version: String
    var content: String
    /// The version path a repair flight replaces; nil for an install.
    var repairing: String?

    init(_ descriptor: PackageDescriptor, repairing: String? = nil) {
        id = descriptor.id
        version = descriptor.version
        content = descriptor.strongestDigest.map { "\($0.algorithm):\($0.hex)" } ?? descriptor.url.absoluteString
        self.repairing = repairing
    }

    /// Names the flight's wait for a download slot.
    var slotTag: String { "\(id)\n\(version)\n\(content)\n\(repairing ?? "")" }
}

/// What a flight gives every caller.
struct FlightResult: Sendable {
    /// The version now active.
    var version: InstalledVersion
    /// Bytes downloaded by the flight (0 when the version was already installed).
    var bytesDownloaded: Int64
    /// The delta the flight tried, if any.
    var delta: SyncReport.DeltaUse? = nil
    /// How long each phase of the install took.
    var phases: InstallPhases? = nil
}

/// The newest request for a package in this process.
struct WantedVersion: Sendable {
    var key: FlightKey
    /// The store generation the request had seen when it was asked for.
    var seenGeneration: Int
}
