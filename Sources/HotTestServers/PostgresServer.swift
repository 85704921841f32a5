import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// PostgreSQL from Debian's package (`apt-get install postgresql`) for tests and benchmarks:
/// a new cluster in a temporary data directory, listening on a free port of 127.0.0.1, with
/// the role `hot` and the databases asked for; stopped, and its directory removed, by
/// ``stop()``. The server refuses to run as root: as root it runs as the `postgres` user the
/// package made.
///
/// ```swift
/// let postgres = try await PostgresServer.start(databases: ["hot"])
/// // … connect to postgres.url("hot") …
/// await postgres.stop()
/// ```
///
/// The tools run through `posix_spawn` and a wait on their pid, not Foundation's `Process`,
/// whose SIGCHLD handling never saw `runuser` exit once `pg_ctl` had left the server
/// running. Each gets no descriptor of this process but 0, 1 and 2, so the server, which
/// outlives its starter, holds no pipe a test reads to its end.
public final class PostgresServer: Sendable {
    /// The `bin` directory of the newest PostgreSQL installed under `/usr/lib/postgresql`,
    /// or nil when there is none.
    public static let binaries: URL? = {
        let root = URL(fileURLWithPath: "/usr/lib/postgresql")
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []).sorted {
            (Int($0) ?? 0) > (Int($1) ?? 0)
        }
        return versions.map { root.appendingPathComponent($0).appendingPathComponent("bin") }
            .first { FileManager.default.isExecutableFile(atPath: $0.appendingPathComponent("initdb").path) }
    }()

    /// The directory holding the cluster (`data/`), its log and the tools' output.
    public let directory: URL
    /// The port on 127.0.0.1.
    public let port: Int
    private let bin: URL
    private let asUser: [String]

    private init(directory: URL, port: Int, bin: URL, asUser: [String]) {
        self.directory = directory
        self.port = port
        self.bin = bin
        self.asUser = asUser
    }

    /// The URL of `database`, for the role `hot` (no password: the cluster trusts local
    /// connections).
    public func url(_ database: String) -> String { "postgres://hot@127.0.0.1:\(port)/\(database)" }

    /// Starts a cluster with `databases`, blocking until it answers (a thread of its own).
    ///
    /// - Throws: `HotUpdateError.Code.notFound` when PostgreSQL is not installed; a failing
    ///   tool's error with the end of its output otherwise.
    ///
    /// - Parameters:
    ///   - databases: The databases to create, owned by `hot`.
    ///   - durable: Whether the server flushes its writes (a benchmark's figures); tests run
    ///     it without (`-F`), faster.
    public static func start(databases: [String], durable: Bool = false) async throws -> PostgresServer {
        try await onThread { try startBlocking(databases: databases, durable: durable) }
    }

    /// ``start(databases:durable:)`` for code that is not async (a benchmark's main line).
    public static func startBlocking(databases: [String], durable: Bool = false) throws -> PostgresServer {
        guard let bin = binaries else {
            throw HotUpdateError(
                .notFound,
                "no PostgreSQL under /usr/lib/postgresql (apt-get install postgresql)"
            )
        }
        let asUser = getuid() == 0 ? ["runuser", "-u", "postgres", "--"] : []
        let directory = URL(fileURLWithPath: "/tmp/hot-pg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        if getuid() == 0 {
            guard let user = getpwnam("postgres") else {
                throw HotUpdateError(.notFound, "no postgres user to run the server as")
            }
            guard chown(directory.path, user.pointee.pw_uid, user.pointee.pw_gid) == 0 else {
                throw HotUpdateError(.fileSystem, "cannot give \(directory.path) to postgres: errno \(errno)")
            }
        }
        let data = directory.appendingPathComponent("data").path
        // The server's log, and the tools' output (opened by this process, before `runuser`).
        let log = directory.appendingPathComponent("log").path
        let tools = directory.appendingPathComponent("tools.log").path
        func run(_ tool: String, _ arguments: [String]) throws {
            try runToEnd(asUser + [bin.appendingPathComponent(tool).path] + arguments, log: tools)
        }
        try run("initdb", ["-D", data, "-U", "hot", "--auth=trust", "-E", "UTF8"])
        let port = try NginxServer.freePort()
        let options = "-h 127.0.0.1 -p \(port) -k \(directory.path)" + (durable ? "" : " -F")
        try run("pg_ctl", ["-D", data, "-w", "-l", log, "-o", options, "start"])
        let server = PostgresServer(directory: directory, port: port, bin: bin, asUser: asUser)
        do {
            for database in databases {
                try run("createdb", ["-h", "127.0.0.1", "-p", "\(port)", "-U", "hot", database])
            }
        } catch {
            server.stopBlocking()
            throw error
        }
        return server
    }

    /// Stops the server and removes its directory.
    public func stop() async {
        _ = try? await Self.onThread { self.stopBlocking() }
    }

    /// ``stop()`` for code that is not async.
    public func stopBlocking() {
        let pgctl = bin.appendingPathComponent("pg_ctl").path
        let data = directory.appendingPathComponent("data").path
        try? Self.runToEnd(asUser + [pgctl, "-D", data, "-m", "fast", "-w", "stop"], log: "/dev/null")
        try? FileManager.default.removeItem(at: directory)
    }

    private static func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }

    /// Runs `command` to its end, its output appended to `log`; throws when it fails.
    private static func runToEnd(_ command: [String], log: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        InheritedDescriptors.closeAll(in: &actions)
        let arguments: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for argument in arguments { free(argument) } }
        var pid: pid_t = 0
        let spawned = posix_spawnp(&pid, command[0], &actions, nil, arguments, environ)
        guard spawned == 0 else {
            throw HotUpdateError(.fileSystem, "cannot run \(command[0]): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else { throw HotUpdateError(.fileSystem, "waitpid: errno \(errno)") }
        }
        guard status == 0 else {
            // Exited: the status; killed: 128 + the signal.
            let code = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            let tail = (try? String(contentsOfFile: log, encoding: .utf8))?.suffix(2000) ?? ""
            throw HotUpdateError(.internalInconsistency, "\(command.joined(separator: " ")) exited \(code): \(tail)")
        }
    }
}
