import Foundation

/// A proportion's 95% Wilson score interval: honest for small counts and for 0 or 1.
public struct WilsonInterval: Sendable, Hashable, Codable {
    /// The lower bound.
    public var lower: Double
    /// The upper bound.
    public var upper: Double

    /// The interval of `successes` out of `trials` (0…1 when there are no trials).
    public init(successes: Int, trials: Int, z: Double = 1.959963984540054) {
        guard trials > 0 else {
            lower = 0
            upper = 1
            return
        }
        let n = Double(trials)
        let p = Double(successes) / n
        let z2 = z * z
        let center = (p + z2 / (2 * n)) / (1 + z2 / n)
        let half = z * ((p * (1 - p) / n + z2 / (4 * n * n)).squareRoot()) / (1 + z2 / n)
        lower = successes == 0 ? 0 : max(0, center - half)
        upper = successes == trials ? 1 : min(1, center + half)
    }
}

/// Trial launches of a version: the devices that confirmed it and those that rolled it back.
public struct Trials: Sendable, Hashable, Codable {
    /// Devices that confirmed a launch.
    public var confirmed: Int
    /// Devices that rolled it back.
    public var rolledBack: Int
    /// Confirmed + rolled back.
    public var count: Int
    /// Rolled back / count; 0 with no trial.
    public var failureRate: Double
    /// Its 95% Wilson interval.
    public var failureInterval: WilsonInterval

    /// The figures of `confirmed` and `rolledBack` devices.
    public init(confirmed: Int, rolledBack: Int) {
        self.confirmed = confirmed
        self.rolledBack = rolledBack
        count = confirmed + rolledBack
        failureRate = count == 0 ? 0 : Double(rolledBack) / Double(count)
        failureInterval = WilsonInterval(successes: rolledBack, trials: count)
    }
}

/// The health of one version of a package in a channel, from the events the collector stored.
public struct VersionHealth: Sendable, Hashable, Codable {
    /// The package id.
    public var package: String
    /// The version.
    public var version: String
    /// The channel; empty for a repository's root manifest.
    public var channel: String
    /// Devices (client ids) that sent any event about this version.
    public var devices: Int
    /// Devices that downloaded it.
    public var downloaded: Int
    /// Full downloads, and their bytes.
    public var fullDownloads: Int
    /// Delta downloads.
    public var deltaDownloads: Int
    /// Bytes downloaded, full and delta.
    public var bytes: Int64
    /// Devices that installed it.
    public var installed: Int
    /// Devices that confirmed a launch of it.
    public var confirmed: Int
    /// Confirmed launches (events).
    public var confirmedLaunches: Int
    /// Devices that rolled it back.
    public var rolledBack: Int
    /// Rollbacks (events).
    public var rollbacks: Int
    /// Devices that blocked it.
    public var blocked: Int
    /// Failed steps by error code.
    public var errors: [String: Int]
    /// The trial failure rate: rolled back / (confirmed + rolled back) devices; 0 with no trial.
    public var failureRate: Double
    /// Its 95% Wilson interval.
    public var failureInterval: WilsonInterval
    /// Trials: confirmed + rolled back devices.
    public var trials: Int
    /// Adoption over time: the number of devices that had installed or confirmed the version
    /// by each time (seconds since 1970), one point per device's first event.
    public var adoption: [AdoptionPoint]
    /// The trials of *established* devices only: those the collector enrolled before the
    /// version's first report reached it (``IntakePolicy``), that is devices that ran an
    /// earlier release, or were seen, before this one started. Rollouts are decided on these.
    public var established: Trials
    /// Trials of devices that are not established: ids first seen (or enrolled) after the
    /// version started. Many of them at once is a burst of new client ids; the rollout holds.
    public var newDeviceTrials: Int

    /// Creates an entry from its figures; `established` nil: every trial is established.
    public init(
        package: String,
        version: String,
        channel: String,
        devices: Int,
        downloaded: Int,
        fullDownloads: Int,
        deltaDownloads: Int,
        bytes: Int64,
        installed: Int,
        confirmed: Int,
        confirmedLaunches: Int,
        rolledBack: Int,
        rollbacks: Int,
        blocked: Int,
        errors: [String: Int],
        failureRate: Double,
        failureInterval: WilsonInterval,
        trials: Int,
        adoption: [AdoptionPoint],
        established: Trials? = nil,
        newDeviceTrials: Int = 0
    ) {
        self.package = package
        self.version = version
        self.channel = channel
        self.devices = devices
        self.downloaded = downloaded
        self.fullDownloads = fullDownloads
        self.deltaDownloads = deltaDownloads
        self.bytes = bytes
        self.installed = installed
        self.confirmed = confirmed
        self.confirmedLaunches = confirmedLaunches
        self.rolledBack = rolledBack
        self.rollbacks = rollbacks
        self.blocked = blocked
        self.errors = errors
        self.failureRate = failureRate
        self.failureInterval = failureInterval
        self.trials = trials
        self.adoption = adoption
        self.established = established ?? Trials(confirmed: confirmed, rolledBack: rolledBack)
        self.newDeviceTrials = newDeviceTrials
    }
}

/// A point of an adoption curve.
public struct AdoptionPoint: Sendable, Hashable, Codable {
    /// Seconds since 1970.
    public var time: Double
    /// Devices by then.
    public var devices: Int
}

/// The devices that checked for updates, per channel.
public struct ChannelChecks: Sendable, Hashable, Codable {
    /// The channel; empty for the root manifest.
    public var channel: String
    /// Devices that checked.
    public var devices: Int
    /// Failed checks by error code.
    public var errors: [String: Int]
}

/// What `hot-server report` prints.
public struct HealthReport: Sendable, Hashable, Codable {
    /// One entry per channel, package and version, sorted.
    public var versions: [VersionHealth]
    /// Checks per channel.
    public var checks: [ChannelChecks]
    /// When the report was made.
    public var generatedAt: Date

    /// The entry of a version.
    public func health(package: String, version: String, channel: String = "") -> VersionHealth? {
        versions.first { $0.package == package && $0.version == version && $0.channel == channel }
    }

    /// Reads the figures from the database.
    public static func load(from database: any SQLExecutor, now: Date = Date()) async throws -> HealthReport {
        struct Key: Hashable { var channel: String, package: String, version: String }
        var entries: [Key: VersionHealth] = [:]
        func entry(_ row: [SQLValue]) -> Key {
            let key = Key(channel: row[0].text, package: row[1].text, version: row[2].text)
            if entries[key] == nil {
                entries[key] = VersionHealth(
                    package: key.package,
                    version: key.version,
                    channel: key.channel,
                    devices: 0,
                    downloaded: 0,
                    fullDownloads: 0,
                    deltaDownloads: 0,
                    bytes: 0,
                    installed: 0,
                    confirmed: 0,
                    confirmedLaunches: 0,
                    rolledBack: 0,
                    rollbacks: 0,
                    blocked: 0,
                    errors: [:],
                    failureRate: 0,
                    failureInterval: WilsonInterval(successes: 0, trials: 0),
                    trials: 0,
                    adoption: [],
                    established: Trials(confirmed: 0, rolledBack: 0)
                )
            }
            return key
        }
        for row in try await database.rows(
            """
            SELECT channel, package, version, COUNT(DISTINCT client) FROM events
            WHERE package IS NOT NULL AND version IS NOT NULL GROUP BY channel, package, version
            """,
            []
        ) {
            entries[entry(row)]?.devices = Int(row[3].int)
        }
        for row in try await database.rows(
            """
            SELECT channel, package, version, kind, COUNT(*), COUNT(DISTINCT client) FROM events
            WHERE package IS NOT NULL AND version IS NOT NULL AND (error_code IS NULL OR kind = 'block')
            GROUP BY channel, package, version, kind
            """,
            []
        ) {
            let key = entry(row)
            let events = Int(row[4].int)
            let devices = Int(row[5].int)
            switch row[3].text {
            case "download": entries[key]?.downloaded = devices
            case "install": entries[key]?.installed = devices
            case "confirm":
                entries[key]?.confirmed = devices
                entries[key]?.confirmedLaunches = events
            case "rollback":
                entries[key]?.rolledBack = devices
                entries[key]?.rollbacks = events
            case "block": entries[key]?.blocked = devices
            default: break
            }
        }
        for row in try await database.rows(
            """
            SELECT channel, package, version, COALESCE(delivery, 'full'), COUNT(*), CAST(COALESCE(SUM(bytes), 0) AS BIGINT)
            FROM events WHERE kind = 'download' AND error_code IS NULL AND package IS NOT NULL AND version IS NOT NULL
            GROUP BY channel, package, version, COALESCE(delivery, 'full')
            """,
            []
        ) {
            let key = entry(row)
            if row[3].text == "delta" {
                entries[key]?.deltaDownloads = Int(row[4].int)
            } else {
                entries[key]?.fullDownloads = Int(row[4].int)
            }
            entries[key]?.bytes += row[5].int
        }
        for row in try await database.rows(
            """
            SELECT channel, package, version, error_code, COUNT(*) FROM events
            WHERE error_code IS NOT NULL AND kind <> 'block' AND package IS NOT NULL AND version IS NOT NULL
            GROUP BY channel, package, version, error_code
            """,
            []
        ) {
            entries[entry(row)]?.errors[row[3].text] = Int(row[4].int)
        }
        var firsts: [Key: [Double]] = [:]
        for row in try await database.rows(
            """
            SELECT channel, package, version, client, MIN(at) FROM events
            WHERE kind IN ('install', 'confirm') AND error_code IS NULL AND package IS NOT NULL AND version IS NOT NULL
            GROUP BY channel, package, version, client
            """,
            []
        ) {
            firsts[entry(row), default: []].append(row[4].double)
        }
        for (key, times) in firsts {
            entries[key]?.adoption = times.sorted().enumerated().map { AdoptionPoint(time: $1, devices: $0 + 1) }
        }
        // Established devices: enrolled before the version's first report reached the collector.
        var established: [Key: (confirmed: Int, rolledBack: Int)] = [:]
        for row in try await database.rows(
            """
            SELECT e.channel, e.package, e.version, e.kind, COUNT(DISTINCT e.client) FROM events e
            JOIN (SELECT channel, package, version, MIN(received_at) AS started FROM events
                  WHERE package IS NOT NULL AND version IS NOT NULL GROUP BY channel, package, version) s
              ON s.channel = e.channel AND s.package = e.package AND s.version = e.version
            JOIN clients c ON c.client = e.client
            WHERE e.kind IN ('confirm', 'rollback') AND e.error_code IS NULL AND c.enrolled_at IS NOT NULL
              AND c.enrolled_at < s.started
            GROUP BY e.channel, e.package, e.version, e.kind
            """,
            []
        ) {
            let key = entry(row)
            if row[3].text == "confirm" {
                established[key, default: (0, 0)].confirmed = Int(row[4].int)
            } else {
                established[key, default: (0, 0)].rolledBack = Int(row[4].int)
            }
        }
        for key in entries.keys {
            guard var health = entries[key] else { continue }
            let settled = established[key] ?? (0, 0)
            health.established = Trials(confirmed: settled.confirmed, rolledBack: settled.rolledBack)
            health.newDeviceTrials = max(0, health.confirmed + health.rolledBack - health.established.count)
            health.trials = health.confirmed + health.rolledBack
            health.failureRate = health.trials == 0 ? 0 : Double(health.rolledBack) / Double(health.trials)
            health.failureInterval = WilsonInterval(successes: health.rolledBack, trials: health.trials)
            entries[key] = health
        }
        var checks: [String: ChannelChecks] = [:]
        for row in try await database.rows(
            "SELECT channel, COUNT(DISTINCT client) FROM events WHERE kind = 'check' GROUP BY channel",
            []
        ) {
            checks[row[0].text] = ChannelChecks(channel: row[0].text, devices: Int(row[1].int), errors: [:])
        }
        for row in try await database.rows(
            "SELECT channel, error_code, COUNT(*) FROM events WHERE kind = 'check' AND error_code IS NOT NULL GROUP BY channel, error_code",
            []
        ) {
            checks[row[0].text, default: ChannelChecks(channel: row[0].text, devices: 0, errors: [:])].errors[
                row[1].text
            ] = Int(row[2].int)
        }
        let versions = entries.values.sorted {
            ($0.channel, $0.package, VersionOrder($0.version)) < ($1.channel, $1.package, VersionOrder($1.version))
        }
        return HealthReport(
            versions: versions,
            checks: checks.values.sorted { $0.channel < $1.channel },
            generatedAt: now
        )
    }

    /// The report as JSON: `{"versions": [...], "checks": [...], "generatedAt": ...}`.
    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(self)
    }

    /// The report as a table for a terminal.
    public func text() -> String {
        var lines = [
            "channel\tpackage\tversion\tdevices\tdownloaded\tinstalled\tconfirmed\trolled back\tblocked\tfailure rate (95% interval)\testablished trials (failure rate)\tnew-device trials\terrors"
        ]
        for health in versions {
            let errors = health.errors.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
            lines.append(
                [
                    health.channel.isEmpty ? "-" : health.channel, health.package, health.version,
                    "\(health.devices)",
                    "\(health.downloaded) (\(health.fullDownloads) full, \(health.deltaDownloads) delta, \(health.bytes) B)",
                    "\(health.installed)", "\(health.confirmed)", "\(health.rolledBack)", "\(health.blocked)",
                    String(
                        format: "%.1f%% (%.1f–%.1f%%)",
                        health.failureRate * 100,
                        health.failureInterval.lower * 100,
                        health.failureInterval.upper * 100
                    ),
                    String(format: "%d (%.1f%%)", health.established.count, health.established.failureRate * 100),
                    "\(health.newDeviceTrials)",
                    errors.isEmpty ? "-" : errors,
                ].joined(separator: "\t")
            )
        }
        for check in checks {
            lines.append("checks \(check.channel.isEmpty ? "-" : check.channel): \(check.devices) devices")
        }
        return lines.joined(separator: "\n")
    }
}

/// Versions ordered by their dotted numbers (`10` after `9`), then as text.
struct VersionOrder: Comparable {
    let parts: [String]
    init(_ text: String) { parts = text.split(separator: ".").map(String.init) }
    static func < (left: VersionOrder, right: VersionOrder) -> Bool {
        for (a, b) in zip(left.parts, right.parts) where a != b {
            if let x = Int(a), let y = Int(b) { return x < y }
            return a < b
        }
        return left.parts.count < right.parts.count
    }
}
