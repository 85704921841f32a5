import Foundation
import HotCore
import HotServerKit
import HotTestServers
import HotTesting
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// PostgreSQL from Debian's package, started in a temporary data directory as its own
/// (non-root) user, on a port of its own on 127.0.0.1; stopped by ``stop()``.
final class PostgresServer: @unchecked Sendable {
    static let binaries: URL? = {
        let root = URL(fileURLWithPath: "/usr/lib/postgresql")
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []).sorted {
            (Int($0) ?? 0) > (Int($1) ?? 0)
        }
        return versions.map { root.appendingPathComponent($0).appendingPathComponent("bin") }
            .first { FileManager.default.isExecutableFile(atPath: $0.appendingPathComponent("initdb").path) }
    }()

    /// Runs where Debian's server is installed, and under CI=true whatever happens, so CI fails
    /// instead of skipping.
    static var runs: Bool {
        binaries != nil || ProcessInfo.processInfo.environment["CI"] == "true"
    }
    static let skipReason: Comment =
        "skipped: no PostgreSQL under /usr/lib/postgresql (apt-get install postgresql; scripts/ensure-deps test installs it). Under CI=true its absence fails"

    let directory: URL
    let port: Int
    let asUser: [String]
    var url: String { "postgres://hot@127.0.0.1:\(port)/hot" }

    private init(directory: URL, port: Int, asUser: [String]) {
        self.directory = directory
        self.port = port
        self.asUser = asUser
    }

    static func start() async throws -> PostgresServer {
        let bin = try #require(binaries, "no PostgreSQL binaries under /usr/lib/postgresql")
        // PostgreSQL refuses to run as root: then it runs as the `postgres` user the package made.
        let asUser = getuid() == 0 ? ["runuser", "-u", "postgres", "--"] : []
        let directory = URL(fileURLWithPath: "/tmp/hot-pg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        if !asUser.isEmpty { try await Subprocess.check("chown", ["postgres:postgres", directory.path]) }
        let data = directory.appendingPathComponent("data").path
        // The server's log, and the tools' output (opened by this process, before `runuser`).
        let log = directory.appendingPathComponent("log").path
        let tools = directory.appendingPathComponent("tools.log").path
        func run(_ tool: String, _ arguments: [String]) async throws {
            try await spawn(asUser + [bin.appendingPathComponent(tool).path] + arguments, log: tools)
        }
        try await run("initdb", ["-D", data, "-U", "hot", "--auth=trust", "-E", "UTF8"])
        // A free port: bind 0, read it, release it.
        let port = try freePort()
        try await run(
            "pg_ctl",
            ["-D", data, "-w", "-l", log, "-o", "-h 127.0.0.1 -p \(port) -k \(directory.path) -F", "start"]
        )
        try await run("createdb", ["-h", "127.0.0.1", "-p", "\(port)", "-U", "hot", "hot"])
        return PostgresServer(directory: directory, port: port, asUser: asUser)
    }

    func stop() async {
        guard let bin = Self.binaries else { return }
        let pgctl = bin.appendingPathComponent("pg_ctl").path
        let data = directory.appendingPathComponent("data").path
        try? await Self.spawn(asUser + [pgctl, "-D", data, "-m", "fast", "-w", "stop"], log: "/dev/null")
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs a command to its end, its output appended to `log`, and throws when it fails.
    ///
    /// Not `Subprocess`: Foundation's `Process` waits for the child's exit through its SIGCHLD
    /// handling, which never saw `runuser` exit once `pg_ctl` had left the server running, and
    /// the test hung. Here the thread waits for the pid itself. The child gets no descriptor
    /// of this process but 0, 1 and 2, so the server, which outlives it, holds no pipe another
    /// test reads to its end.
    static func spawn(_ command: [String], log: String) async throws {
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Result { try spawnAndWait(command, log: log) })
            }.start()
        }
        guard status == 0 else {
            let tail = (try? String(contentsOfFile: log, encoding: .utf8))?.suffix(2000) ?? ""
            throw HotUpdateError(
                .internalInconsistency,
                "\(command.joined(separator: " ")) exited \(status): \(tail)"
            )
        }
    }

    private static func spawnAndWait(_ command: [String], log: String) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for fd in open.compactMap({ Int32($0) }) where fd > 2 {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
        let arguments: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for argument in arguments { free(argument) } }
        var pid: pid_t = 0
        let spawned = posix_spawnp(&pid, command[0], &actions, nil, arguments, environ)
        guard spawned == 0 else {
            throw HotUpdateError(.fileSystem, "cannot run \(command[0]): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else { throw HotUpdateError(.fileSystem, "waitpid: \(errno)") }
        }
        // Exited: the status; killed: 128 + the signal.
        return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    static func freePort() throws -> Int {
        let socket = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0
            }
        }
        guard bound else { throw HotUpdateError(.fileSystem, "cannot find a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

@Suite("The collector over PostgreSQL", .enabled(if: PostgresServer.runs, PostgresServer.skipReason))
struct PostgresTests {
    @Test("the same schema: batches stored once, bad ones refused, the report, two collectors on one database")
    func collectorOverPostgres() async throws {
        let postgres = try await PostgresServer.start()
        do {
            try await exercise(postgres)
        } catch {
            await postgres.stop()
            throw error
        }
        await postgres.stop()
    }

    func exercise(_ postgres: PostgresServer) async throws {
        let first = try await ServerProcess.start(["collect", "--db", postgres.url])
        defer { first.stop() }
        // A second collector on the same database: the migration runs once.
        let second = try await ServerProcess.start(["collect", "--db", postgres.url])
        defer { second.stop() }
        let now = ISO8601DateFormatter().string(from: Date())
        func batch(client: String, kind: String, version: String) -> Data {
            Data(
                #"{"batch":"\#(UUID().uuidString.lowercased())","client":"\#(client)","channel":"beta","appVersion":"5.2","sentAt":"\#(now)","events":[{"kind":"install","date":"\#(now)","packageID":"app","version":"\#(version)"},{"kind":"\#(kind)","date":"\#(now)","packageID":"app","version":"\#(version)","bytes":10}]}"#
                    .utf8
            )
        }
        for index in 0..<6 {
            let body = batch(
                client: UUID().uuidString.lowercased(),
                kind: index < 4 ? "confirm" : "rollback",
                version: "3"
            )
            let target = (index % 2 == 0 ? first : second).url.appendingPathComponent("collect")
            #expect(try await post(body, to: target) == 204)
            if index == 0 { #expect(try await post(body, to: second.url.appendingPathComponent("collect")) == 200) }
        }
        #expect(try await post(Data(#"{"events":[]}"#.utf8), to: first.url.appendingPathComponent("collect")) == 400)
        let versions = try await report(postgres.url)
        let v3 = try #require(entry(versions, "app", "3"))
        #expect(v3["channel"] as? String == "beta")
        #expect(v3["devices"] as? Int == 6)
        #expect(v3["installed"] as? Int == 6)
        #expect(v3["confirmed"] as? Int == 4)
        #expect(v3["rolledBack"] as? Int == 2)
        #expect(v3["confirmedLaunches"] as? Int == 4)
        let rate = try #require(v3["failureRate"] as? Double)
        #expect(abs(rate - 2.0 / 6.0) < 1e-9)

        // The library's view of the same rows agrees with SQLite's for the same batches.
        let sqlitePath = try scratch("pg-compare").appendingPathComponent("t.db").path
        let sqlite = try await openTelemetryDatabase("sqlite:" + sqlitePath)
        let pg = try await openTelemetryDatabase(postgres.url)
        let client = UUID().uuidString.lowercased()
        let parsed = try TelemetryBatch.parse(batch(client: client, kind: "rollback", version: "4"))
        #expect(try await sqlite.store(parsed))
        #expect(try await pg.store(parsed))
        #expect(try await !pg.store(parsed))
        let fromSQLite = try await HealthReport.load(from: sqlite).health(package: "app", version: "4", channel: "beta")
        let fromPostgres = try await HealthReport.load(from: pg).health(package: "app", version: "4", channel: "beta")
        #expect(fromSQLite?.rolledBack == 1)
        #expect(fromSQLite?.rolledBack == fromPostgres?.rolledBack)
        #expect(fromSQLite?.bytes == fromPostgres?.bytes)
        await sqlite.close()
        await pg.close()
    }
}
