import Foundation
import HotCore
import Logging
import NIOCore
import PostgresNIO
import SQLiteNIO

/// A value bound to or read from a statement.
public enum SQLValue: Sendable, Hashable {
    case int(Int64)
    case double(Double)
    case text(String)
    case null

    /// The value as an integer (0 for null).
    public var int: Int64 {
        switch self {
        case .int(let value): value
        case .double(let value): Int64(value)
        case .text(let value): Int64(value) ?? 0
        case .null: 0
        }
    }

    /// The value as a number (0 for null).
    public var double: Double {
        switch self {
        case .int(let value): Double(value)
        case .double(let value): value
        case .text(let value): Double(value) ?? 0
        case .null: 0
        }
    }

    /// The value as text (empty for null).
    public var text: String {
        switch self {
        case .int(let value): String(value)
        case .double(let value): String(value)
        case .text(let value): value
        case .null: ""
        }
    }

    /// Text, or null when nil.
    public static func optional(_ text: String?) -> SQLValue { text.map { .text($0) } ?? .null }
}

/// Runs statements; `?` marks each bound value, in order, whatever the database.
public protocol SQLExecutor: Sendable {
    /// Runs `sql` and returns its rows, each a list of values in the order of its columns.
    func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [[SQLValue]]
}

extension SQLExecutor {
    /// Runs `body` on this connection between `begin` and `COMMIT`, or `ROLLBACK` when it
    /// throws.
    func runTransaction<T: Sendable>(
        begin: String,
        _ body: @Sendable (any SQLExecutor) async throws -> T
    ) async throws -> T {
        _ = try await rows(begin, [])
        do {
            let result = try await body(self)
            _ = try await rows("COMMIT", [])
            return result
        } catch {
            _ = try? await rows("ROLLBACK", [])
            throw error
        }
    }
}

/// The telemetry database: SQLite (one file) or PostgreSQL, with the same schema.
public protocol TelemetryDatabase: SQLExecutor {
    /// Which SQL dialect the few statements that differ use.
    var isPostgres: Bool { get }
    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    func transaction<T: Sendable>(_ body: @Sendable (any SQLExecutor) async throws -> T) async throws -> T
    /// Closes the connections.
    func close() async
}

/// Opens the database a `--db` URL names and brings its schema up to date:
/// `sqlite:PATH` or `postgres://user[:password]@host[:port]/database`.
public func openTelemetryDatabase(
    _ url: String,
    logger: Logger = Logger(label: "hot-server.db")
) async throws
    -> any TelemetryDatabase
{
    let database: any TelemetryDatabase
    if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
        database = try PostgresTelemetryDatabase(url: url, logger: logger)
    } else if url.hasPrefix("sqlite:") {
        var path = String(url.dropFirst("sqlite:".count))
        if path.hasPrefix("//") { path = String(path.dropFirst(2)) }
        database = try await SQLiteTelemetryDatabase.open(path: path, logger: logger)
    } else {
        throw HotUpdateError(
            .invalidArgument,
            "--db takes sqlite:PATH or postgres://user@host:port/database, not '\(url)'"
        )
    }
    try await Schema.migrate(database)
    return database
}

/// The schema and its versioned migrations: each runs once, in order, recorded in
/// `schema_migrations`.
public enum Schema {
    /// The newest schema version.
    public static let version = 2

    static func migrations(postgres: Bool) -> [[String]] {
        let serial = postgres ? "BIGSERIAL PRIMARY KEY" : "INTEGER PRIMARY KEY AUTOINCREMENT"
        return [
            [
                """
                CREATE TABLE batches (
                    id TEXT PRIMARY KEY, client TEXT NOT NULL, channel TEXT NOT NULL, app_version TEXT NOT NULL,
                    sent_at DOUBLE PRECISION NOT NULL, received_at DOUBLE PRECISION NOT NULL, events INTEGER NOT NULL)
                """,
                """
                CREATE TABLE events (
                    batch_id TEXT NOT NULL, seq INTEGER NOT NULL, client TEXT NOT NULL, channel TEXT NOT NULL,
                    app_version TEXT NOT NULL, kind TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, package TEXT,
                    version TEXT, manifest_version BIGINT, bytes BIGINT, delivery TEXT, restored_version TEXT,
                    error_code TEXT, PRIMARY KEY (batch_id, seq))
                """,
                "CREATE INDEX events_version ON events (channel, package, version, kind)",
                """
                CREATE TABLE actions (
                    id \(serial), at DOUBLE PRECISION NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL,
                    channel TEXT NOT NULL, package TEXT NOT NULL, version TEXT NOT NULL, detail TEXT NOT NULL,
                    outcome TEXT NOT NULL)
                """,
            ],
            // 2: the receipt time of each event beside the device's own; each client's
            // enrolment, counted per source network; each network's storage per day. Clients
            // seen before are enrolled at their first batch.
            [
                "ALTER TABLE events ADD COLUMN received_at DOUBLE PRECISION",
                "UPDATE events SET received_at = (SELECT received_at FROM batches WHERE batches.id = events.batch_id)",
                "ALTER TABLE batches ADD COLUMN network TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE batches ADD COLUMN refused INTEGER NOT NULL DEFAULT 0",
                """
                CREATE TABLE clients (
                    client TEXT PRIMARY KEY, network TEXT NOT NULL, first_seen DOUBLE PRECISION NOT NULL,
                    enrolled_at DOUBLE PRECISION)
                """,
                """
                INSERT INTO clients (client, network, first_seen, enrolled_at)
                SELECT client, '', MIN(received_at), MIN(received_at) FROM batches GROUP BY client
                """,
                "CREATE INDEX clients_enrolment ON clients (network, enrolled_at)",
                """
                CREATE TABLE network_usage (
                    network TEXT NOT NULL, day BIGINT NOT NULL, bytes BIGINT NOT NULL, batches BIGINT NOT NULL,
                    PRIMARY KEY (network, day))
                """,
            ],
        ]
    }

    /// Applies the migrations the database lacks.
    public static func migrate(_ database: any TelemetryDatabase) async throws {
        _ = try await database.rows(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)",
            []
        )
        let all = migrations(postgres: database.isPostgres)
        try await database.transaction { sql in
            if database.isPostgres {
                // Two collectors starting at once migrate one after the other.
                _ = try await sql.rows("LOCK TABLE schema_migrations IN EXCLUSIVE MODE", [])
            }
            let applied = Set(try await sql.rows("SELECT version FROM schema_migrations", []).map { $0[0].int })
            for (index, statements) in all.enumerated() where !applied.contains(Int64(index + 1)) {
                for statement in statements { _ = try await sql.rows(statement, []) }
                _ = try await sql.rows(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                    [.int(Int64(index + 1)), .double(Date().timeIntervalSince1970)]
                )
            }
        }
    }
}

/// One at a time, in order: a lock `await` can wait on.
actor AsyncLock {
    private var held = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func lock() async {
        if !held {
            held = true
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func unlock() {
        if waiters.isEmpty {
            held = false
        } else {
            waiters.removeFirst().resume()
        }
    }
}

/// SQLite through sqlite-nio: one connection, in WAL mode, used by one statement or
/// transaction at a time.
public final class SQLiteTelemetryDatabase: TelemetryDatabase {
    private let connection: SQLiteConnection
    private let lock = AsyncLock()
    public var isPostgres: Bool { false }

    private init(connection: SQLiteConnection) { self.connection = connection }

    /// Opens (or creates) the database file at `path`.
    public static func open(path: String, logger: Logger) async throws -> SQLiteTelemetryDatabase {
        let connection = try await SQLiteConnection.open(storage: .file(path: path), logger: logger)
        let database = SQLiteTelemetryDatabase(connection: connection)
        _ = try await database.rows("PRAGMA journal_mode=WAL", [])
        _ = try await database.rows("PRAGMA synchronous=NORMAL", [])
        _ = try await database.rows("PRAGMA busy_timeout=10000", [])
        return database
    }

    private struct Unlocked: SQLExecutor {
        let connection: SQLiteConnection
        func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [[SQLValue]] {
            let rows = try await connection.query(sql, binds.map(Self.data))
            return rows.map { row in
                row.columns.map { column in
                    switch column.data {
                    case .integer(let value): .int(Int64(value))
                    case .float(let value): .double(value)
                    case .text(let value): .text(value)
                    case .blob, .null: .null
                    }
                }
            }
        }

        static func data(_ value: SQLValue) -> SQLiteData {
            switch value {
            case .int(let value): .integer(Int(value))
            case .double(let value): .float(value)
            case .text(let value): .text(value)
            case .null: .null
            }
        }
    }

    public func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [[SQLValue]] {
        await lock.lock()
        defer { Task { await lock.unlock() } }
        return try await Unlocked(connection: connection).rows(sql, binds)
    }

    public func transaction<T: Sendable>(_ body: @Sendable (any SQLExecutor) async throws -> T) async throws -> T {
        await lock.lock()
        defer { Task { await lock.unlock() } }
        return try await Unlocked(connection: connection).runTransaction(begin: "BEGIN IMMEDIATE", body)
    }

    public func close() async { try? await connection.close() }
}

/// PostgreSQL through postgres-nio's pooled client: several collectors may share one database.
public final class PostgresTelemetryDatabase: TelemetryDatabase {
    private let client: PostgresClient
    private let runner: Task<Void, Never>
    public var isPostgres: Bool { true }

    /// Connects to `postgres://user[:password]@host[:port]/database`.
    public init(url: String, logger: Logger) throws {
        guard let components = URLComponents(string: url), let host = components.host, let user = components.user
        else {
            throw HotUpdateError(.invalidArgument, "'\(url)' is not postgres://user[:password]@host[:port]/database")
        }
        let database = String(components.path.drop { $0 == "/" })
        var configuration = PostgresClient.Configuration(
            host: host,
            port: components.port ?? 5432,
            username: user,
            password: components.password,
            database: database.isEmpty ? nil : database,
            tls: .disable
        )
        configuration.options.maximumConnections = 8
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        runner = Task { await client.run() }
    }

    private struct Connection: SQLExecutor {
        let connection: PostgresConnection
        func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [[SQLValue]] {
            try await PostgresTelemetryDatabase.run(sql, binds) { query in
                try await connection.query(query, logger: Logger(label: "hot-server.db"))
            }
        }
    }

    static func run(
        _ sql: String,
        _ binds: [SQLValue],
        _ query: (PostgresQuery) async throws -> PostgresRowSequence
    )
        async throws -> [[SQLValue]]
    {
        // `?` → `$1`, `$2`…
        var text = ""
        var index = 0
        for character in sql {
            if character == "?" {
                index += 1
                text += "$\(index)"
            } else {
                text.append(character)
            }
        }
        var bindings = PostgresBindings(capacity: binds.count)
        for value in binds {
            switch value {
            case .int(let value): bindings.append(value)
            case .double(let value): bindings.append(value)
            case .text(let value): bindings.append(value)
            case .null: bindings.appendNull()
            }
        }
        var result: [[SQLValue]] = []
        for try await row in try await query(PostgresQuery(unsafeSQL: text, binds: bindings)) {
            var values: [SQLValue] = []
            for cell in row {
                guard cell.bytes != nil else {
                    values.append(.null)
                    continue
                }
                switch cell.dataType {
                case .int2, .int4, .int8: values.append(.int(try cell.decode(Int64.self)))
                case .float4, .float8: values.append(.double(try cell.decode(Double.self)))
                case .numeric: values.append(.double(Double(try cell.decode(String.self)) ?? 0))
                default: values.append(.text(try cell.decode(String.self)))
                }
            }
            result.append(values)
        }
        return result
    }

    public func rows(_ sql: String, _ binds: [SQLValue]) async throws -> [[SQLValue]] {
        try await Self.run(sql, binds) { query in try await client.query(query) }
    }

    public func transaction<T: Sendable>(_ body: @Sendable (any SQLExecutor) async throws -> T) async throws -> T {
        try await client.withConnection { connection in
            try await Connection(connection: connection).runTransaction(begin: "BEGIN", body)
        }
    }

    public func close() async { runner.cancel() }
}

/// How the collector admits clients and bytes from each source network (``SourceNetwork``).
///
/// Enrolment: a client id is *enrolled* when the collector first sees it, unless its network
/// has enrolled ``enrolmentsPerNetwork`` ids within the last ``enrolmentWindow``; an id not
/// enrolled is enrolled by a later batch once there is room. Only devices enrolled before a
/// release started count for its rollout (see ``VersionHealth/established``), so a script
/// that makes up client ids gets a bounded number of votes per network and per window, and
/// none on a release already out.
///
/// Storage: a network may store ``bytesPerNetworkPerDay`` bytes of batches a UTC day (and
/// the batches it has in flight when it reaches them); past it its batches are answered 429
/// until the next day.
public struct IntakePolicy: Sendable, Hashable {
    /// New client ids enrolled per network within ``enrolmentWindow``.
    public var enrolmentsPerNetwork = 100
    /// The window of ``enrolmentsPerNetwork``, in seconds.
    public var enrolmentWindow: TimeInterval = 3600
    /// Bytes of batches a network may store a UTC day.
    public var bytesPerNetworkPerDay: Int64 = 256 * 1024 * 1024

    /// The defaults: 100 enrolments a network an hour; 256 MiB a network a day.
    public init() {}
}

/// A network has stored its budget for the day (``IntakePolicy/bytesPerNetworkPerDay``).
public struct StorageBudgetExceeded: Error, Sendable, Hashable {
    /// The network.
    public var network: String
    /// Seconds until its budget is renewed.
    public var retryAfter: Int
}

extension TelemetryDatabase {
    /// Stores a checked batch, once: false when a batch with its id is already stored.
    ///
    /// - Parameters:
    ///   - batch: The batch.
    ///   - receivedAt: The collector's time, stored beside each event's device time.
    ///   - network: Where it came from (``SourceNetwork``), for the per-network bounds.
    ///   - bytes: Its size as posted, counted against the network's storage budget.
    ///   - intake: The per-network bounds.
    /// - Throws: ``StorageBudgetExceeded`` (nothing stored), or the database's error.
    public func store(
        _ batch: TelemetryBatch,
        receivedAt: Date = Date(),
        network: String = "",
        bytes: Int = 0,
        intake: IntakePolicy = IntakePolicy()
    ) async throws -> Bool {
        let received = receivedAt.timeIntervalSince1970
        let day = Int64((received / 86_400).rounded(.down))
        // The budget is read before and charged after the batch's transaction, each in a
        // statement of its own: a row every writer of a network updated inside its
        // transaction would make PostgreSQL's writers wait for one another. A network may
        // so go over its budget by the batches it has in flight at once.
        let used = try await rows(
            "SELECT bytes FROM network_usage WHERE network = ? AND day = ?",
            [.text(network), .int(day)]
        )
        if let total = used.first?.first?.int, total >= intake.bytesPerNetworkPerDay {
            throw StorageBudgetExceeded(network: network, retryAfter: max(1, Int(Double(day + 1) * 86_400 - received)))
        }
        let fresh = try await transaction { sql in
            let inserted = try await sql.rows(
                """
                INSERT INTO batches (id, client, channel, app_version, sent_at, received_at, events, network, refused)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING id
                """,
                [
                    .text(batch.id), .text(batch.client), .text(batch.channel), .text(batch.appVersion),
                    .double(batch.sentAt.timeIntervalSince1970), .double(received),
                    .int(Int64(batch.events.count)), .text(network), .int(Int64(batch.refused.count)),
                ]
            )
            guard !inserted.isEmpty else { return false }
            try await Self.enrol(batch.client, network: network, at: received, intake: intake, sql: sql)
            try await Self.insertEvents(batch, receivedAt: received, into: sql)
            return true
        }
        if fresh {
            _ = try await rows(
                """
                INSERT INTO network_usage (network, day, bytes, batches) VALUES (?, ?, ?, 1)
                ON CONFLICT (network, day) DO UPDATE SET bytes = network_usage.bytes + excluded.bytes,
                    batches = network_usage.batches + 1
                """,
                [.text(network), .int(day), .int(Int64(bytes))]
            )
        }
        return fresh
    }

    /// Records `client` as seen, and enrols it when it is not yet and its network has room.
    static func enrol(
        _ client: String,
        network: String,
        at time: Double,
        intake: IntakePolicy,
        sql: any SQLExecutor
    ) async throws {
        let known = try await sql.rows("SELECT enrolled_at FROM clients WHERE client = ?", [.text(client)])
        if let row = known.first, row[0] != .null { return }
        let recent = try await sql.rows(
            "SELECT COUNT(*) FROM clients WHERE network = ? AND enrolled_at >= ?",
            [.text(network), .double(time - intake.enrolmentWindow)]
        )
        let enrolled: SQLValue =
            (recent.first?.first?.int ?? 0) < Int64(intake.enrolmentsPerNetwork) ? .double(time) : .null
        if known.isEmpty {
            _ = try await sql.rows(
                "INSERT INTO clients (client, network, first_seen, enrolled_at) VALUES (?, ?, ?, ?) ON CONFLICT (client) DO NOTHING",
                [.text(client), .text(network), .double(time), enrolled]
            )
        } else if enrolled != .null {
            _ = try await sql.rows(
                "UPDATE clients SET enrolled_at = ?, network = ? WHERE client = ? AND enrolled_at IS NULL",
                [enrolled, .text(network), .text(client)]
            )
        }
    }

    /// The events of `batch` as rows, 200 a statement.
    static func insertEvents(_ batch: TelemetryBatch, receivedAt: Double, into sql: any SQLExecutor) async throws {
        let columns = 15
        var sequence = 0
        for chunk in stride(from: 0, to: batch.events.count, by: 200) {
            let events = batch.events[chunk..<min(chunk + 200, batch.events.count)]
            var binds: [SQLValue] = []
            binds.reserveCapacity(events.count * columns)
            for event in events {
                binds += [
                    .text(batch.id), .int(Int64(sequence)), .text(batch.client), .text(batch.channel),
                    .text(batch.appVersion), .text(event.kind.rawValue), .double(event.date.timeIntervalSince1970),
                    .optional(event.packageID), .optional(event.version),
                    event.manifestVersion.map { .int(Int64($0)) } ?? .null, event.bytes.map { .int($0) } ?? .null,
                    .optional(event.delivery?.rawValue), .optional(event.restoredVersion), .optional(event.errorCode),
                    .double(receivedAt),
                ]
                sequence += 1
            }
            let row = "(" + Array(repeating: "?", count: columns).joined(separator: ", ") + ")"
            _ = try await sql.rows(
                """
                INSERT INTO events (batch_id, seq, client, channel, app_version, kind, at, package, version,
                    manifest_version, bytes, delivery, restored_version, error_code, received_at)
                VALUES \(Array(repeating: row, count: events.count).joined(separator: ", "))
                """,
                binds
            )
        }
    }

    /// Records an action of the console or the rollout command.
    public func recordAction(
        actor: String,
        action: String,
        channel: String,
        package: String,
        version: String,
        detail: String,
        outcome: String,
        at: Date = Date()
    ) async throws {
        _ = try await rows(
            """
            INSERT INTO actions (at, actor, action, channel, package, version, detail, outcome)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .double(at.timeIntervalSince1970), .text(actor), .text(action), .text(channel), .text(package),
                .text(version), .text(detail), .text(outcome),
            ]
        )
    }

    /// The actions recorded, newest first.
    public func actions(limit: Int = 50) async throws -> [RecordedAction] {
        try await rows(
            "SELECT at, actor, action, channel, package, version, detail, outcome FROM actions ORDER BY id DESC LIMIT ?",
            [.int(Int64(limit))]
        ).map {
            RecordedAction(
                at: Date(timeIntervalSince1970: $0[0].double),
                actor: $0[1].text,
                action: $0[2].text,
                channel: $0[3].text,
                package: $0[4].text,
                version: $0[5].text,
                detail: $0[6].text,
                outcome: $0[7].text
            )
        }
    }
}

/// An action the console or `hot-server rollout advance` took, as recorded.
public struct RecordedAction: Sendable, Hashable, Codable {
    /// When.
    public var at: Date
    /// Who: `console` or `rollout`.
    public var actor: String
    /// What: release, rollback, disable, enable, rollout, advance, halt.
    public var action: String
    /// The channel (empty: the root manifest).
    public var channel: String
    /// The package.
    public var package: String
    /// The version concerned.
    public var version: String
    /// More, such as a percentage or the health figures that decided.
    public var detail: String
    /// `ok`, or the error.
    public var outcome: String
}
