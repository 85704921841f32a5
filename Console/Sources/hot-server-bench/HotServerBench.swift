import ArgumentParser
import Foundation
import HotServerKit
import HotTestServers
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// hot-server-bench: the collector's throughput against direct inserts of the same rows, in
// one run, for SQLite and PostgreSQL; then the collector's peak memory under a flood.
//
//     HOTUPDATE_DEV=1 swift run -c release hot-server-bench [--batches N] [--events N]
//         [--connections N] [--flood-seconds N] [--no-postgres]
//
// The collector is the real `hot-server collect`, a child process (built beside this one),
// posted to over keep-alive HTTP/1.1 connections by threads of this process. The direct
// inserts are the same batches, parsed beforehand, stored by this process through the same
// database code, with as many concurrent writers as there were connections.

/// What a run measures, and how hard.
struct Options: ParsableArguments {
    @Option(help: "Batches posted to the collector (and inserted directly).")
    var batches = 2000

    @Option(help: "Events in each batch.")
    var events = 20

    @Option(help: "Keep-alive connections posting at once (and concurrent direct writers).")
    var connections = 8

    @Option(help: "How long the flood lasts, in seconds.")
    var floodSeconds = 10.0

    @Flag(help: "Skip PostgreSQL.")
    var noPostgres = false

    mutating func validate() throws {
        guard batches > 0, events > 0, connections > 0, floodSeconds > 0 else {
            throw ValidationError("--batches, --events, --connections and --flood-seconds must be positive")
        }
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

// MARK: Batches

/// `count` batches of `events` events each, as the reporter posts them: distinct batch ids,
/// a fleet of clients, install / confirm / rollback / download events.
func makeBatches(count: Int, events: Int, seed: Int) -> [Data] {
    let now = ISO8601DateFormatter().string(from: Date())
    let kinds = ["install", "confirm", "download", "confirm", "rollback"]
    return (0..<count).map { index in
        let client = String(format: "00000000-0000-4000-8000-%012x", (seed << 20) + index % 5000)
        var body = #"{"batch":"\#(UUID().uuidString.lowercased())","client":"\#(client)","#
        body += #""channel":"beta","appVersion":"5.2","sentAt":"\#(now)","events":["#
        for event in 0..<events {
            if event > 0 { body += "," }
            let kind = kinds[(index + event) % kinds.count]
            body += #"{"kind":"\#(kind)","date":"\#(now)","packageID":"app","version":"\#(index % 7)""#
            body += kind == "download" ? #","bytes":\#(1000 + event),"delivery":"full"}"# : "}"
        }
        body += "]}"
        return Data(body.utf8)
    }
}

// MARK: A keep-alive HTTP/1.1 client on a blocking socket

final class Connection {
    private let socket: Int32
    private var buffer: [UInt8] = []

    init(port: Int) throws {
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else { throw BenchError("cannot connect to 127.0.0.1:\(port): errno \(errno)") }
        var one: Int32 = 1
        setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { close(socket) }

    /// Posts `body` to /collect and returns the status.
    func post(_ body: Data) throws -> Int {
        var request = Data(
            "POST /collect HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n"
                .utf8
        )
        request.append(body)
        try request.withUnsafeBytes { raw in
            var sent = 0
            while sent < raw.count {
                let written = send(socket, raw.baseAddress.map { $0 + sent }, raw.count - sent, Int32(MSG_NOSIGNAL))
                guard written > 0 else { throw BenchError("send: errno \(errno)") }
                sent += written
            }
        }
        // The head, then as many body bytes as Content-Length says.
        var headEnd: Int?
        while true {
            if let end = findHeadEnd() {
                headEnd = end
                break
            }
            try fill()
        }
        guard let end = headEnd else { throw BenchError("no response") }
        let head = String(decoding: buffer[..<end], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        guard let statusLine = lines.first, statusLine.split(separator: " ").count >= 2,
            let status = Int(statusLine.split(separator: " ")[1])
        else { throw BenchError("bad status line: \(head.prefix(80))") }
        var length = 0
        for line in lines.dropFirst() where line.lowercased().hasPrefix("content-length:") {
            length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        let total = end + 4 + length
        while buffer.count < total { try fill() }
        buffer.removeFirst(total)
        return status
    }

    private func findHeadEnd() -> Int? {
        guard buffer.count >= 4 else { return nil }
        for index in 0...(buffer.count - 4)
        where buffer[index] == 13 && buffer[index + 1] == 10 && buffer[index + 2] == 13 && buffer[index + 3] == 10 {
            return index
        }
        return nil
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 16384)
        let count = recv(socket, &chunk, chunk.count, 0)
        guard count > 0 else { throw BenchError("the collector closed the connection (errno \(errno))") }
        buffer.append(contentsOf: chunk[..<count])
    }
}

/// A counter threads and tasks share.
final class Shared: Sendable {
    private let mutex: Mutex<Int>
    init(_ value: Int) { mutex = Mutex(value) }
    var value: Int { mutex.withLock { $0 } }
    /// The value, then one more.
    func take() -> Int {
        mutex.withLock { value in
            value += 1
            return value - 1
        }
    }
}

/// What a load run saw.
struct LoadResult {
    var seconds: Double
    var statuses: [Int: Int]
    var requests: Int { statuses.values.reduce(0, +) }
}

/// Posts `bodies` over `connections` keep-alive connections, each thread taking the next body,
/// or, with `until`, the bodies over and over until that time. Waits for every answer.
func load(port: Int, bodies: [Data], connections: Int, until deadline: Double? = nil) throws -> LoadResult {
    let next = Mutex(0)
    let statuses = Mutex([Int: Int]())
    let failure = Mutex<String?>(nil)
    let done = DispatchGroup()
    let start = ProcessInfo.processInfo.systemUptime
    for _ in 0..<connections {
        done.enter()
        Thread {
            defer { done.leave() }
            do {
                let connection = try Connection(port: port)
                var seen: [Int: Int] = [:]
                defer { statuses.withLock { all in all.merge(seen, uniquingKeysWith: +) } }
                while true {
                    let index = next.withLock { value -> Int in
                        value += 1
                        return value - 1
                    }
                    if let deadline {
                        if ProcessInfo.processInfo.systemUptime >= deadline { return }
                    } else if index >= bodies.count {
                        return
                    }
                    let status = try connection.post(bodies[index % bodies.count])
                    seen[status, default: 0] += 1
                }
            } catch {
                failure.withLock { $0 = "\(error)" }
            }
        }.start()
    }
    done.wait()
    if let message = failure.withLock({ $0 }) { throw BenchError(message) }
    return LoadResult(seconds: ProcessInfo.processInfo.systemUptime - start, statuses: statuses.withLock { $0 })
}

// MARK: Processes

/// Runs `command` with posix_spawn; stdout to a pipe when `output`, else to `log`.
func spawn(_ command: [String], log: String = "/dev/null", output: Bool = false) throws -> (pid: pid_t, stdout: Int32?)
{
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    var pipeEnds: [Int32] = [-1, -1]
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    if output {
        guard pipe(&pipeEnds) == 0 else { throw BenchError("pipe: errno \(errno)") }
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    } else {
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
    }
    // The child keeps nothing of ours but 0, 1 and 2 (a server outlives its starter).
    let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    for fd in open.compactMap({ Int32($0) }) where fd > 2 {
        posix_spawn_file_actions_addclose(&actions, fd)
    }
    let arguments: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
    defer { for argument in arguments { free(argument) } }
    var pid: pid_t = 0
    let spawned = posix_spawnp(&pid, command[0], &actions, nil, arguments, environ)
    if output { close(pipeEnds[1]) }
    guard spawned == 0 else { throw BenchError("cannot run \(command[0]): \(String(cString: strerror(spawned)))") }
    return (pid, output ? pipeEnds[0] : nil)
}

/// A running `hot-server collect`.
final class CollectorProcess {
    let pid: pid_t
    let port: Int

    init(executable: String, database: String, extra: [String] = []) throws {
        let (pid, stdout) = try spawn(
            [
                executable, "collect", "--listen", "127.0.0.1:0", "--db", database, "--rate", "1000000", "--burst",
                "1000000", "--network-budget", "1000000000000", "--max-connections-per-network", "1024",
            ]
                + extra,
            output: true
        )
        self.pid = pid
        guard let stdout else { throw BenchError("no pipe") }
        // "listening on http://127.0.0.1:PORT"
        var line = [UInt8]()
        var byte: UInt8 = 0
        while read(stdout, &byte, 1) == 1 {
            if byte == 10 {
                let text = String(decoding: line, as: UTF8.self)
                if text.hasPrefix("listening on "), let port = Int(text.split(separator: ":").last ?? "") {
                    self.port = port
                    // Nothing else is printed on stdout; a thread keeps the pipe drained anyway.
                    Thread {
                        var sink = [UInt8](repeating: 0, count: 4096)
                        while read(stdout, &sink, sink.count) > 0 {}
                        close(stdout)
                    }.start()
                    return
                }
                line = []
            } else {
                line.append(byte)
            }
        }
        throw BenchError("hot-server collect did not start")
    }

    /// Peak resident memory so far (VmHWM), bytes.
    var peakResident: Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            return kilobytes * 1024
        }
        return 0
    }

    func stop() {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    }
}

// MARK: The runs

/// The same batches into one store: through the collector, then straight in.
func compare(
    name: String,
    collectorDatabase: String,
    directDatabase: String,
    options: Options,
    server: String
) async throws -> Double {
    let bodies = makeBatches(count: options.batches, events: options.events, seed: 1)
    let events = Double(options.batches * options.events)

    let collector = try CollectorProcess(executable: server, database: collectorDatabase)
    // A warm-up on its own batches: connections, the schema, the first pages.
    _ = try load(port: collector.port, bodies: makeBatches(count: 50, events: options.events, seed: 2), connections: 2)
    let through = try load(port: collector.port, bodies: bodies, connections: options.connections)
    collector.stop()
    guard through.statuses[204] == options.batches else {
        throw BenchError("\(name): the collector answered \(through.statuses), not \(options.batches) × 204")
    }

    var logger = Logger(label: "hot-server-bench")
    logger.logLevel = .error
    let database = try await openTelemetryDatabase(directDatabase, logger: logger)
    let parsed = try bodies.map { try TelemetryBatch.parse($0) }
    for batch in try makeBatches(count: 50, events: options.events, seed: 3).map({ try TelemetryBatch.parse($0) }) {
        _ = try await database.store(batch)
    }
    let start = ProcessInfo.processInfo.systemUptime
    let stored = Shared(0)
    let next = Shared(0)
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<options.connections {
            group.addTask {
                while true {
                    let index = next.take()
                    guard index < parsed.count else { return }
                    if try await database.store(parsed[index]) { _ = stored.take() }
                }
            }
        }
        try await group.waitForAll()
    }
    let directSeconds = ProcessInfo.processInfo.systemUptime - start
    await database.close()
    guard stored.value == options.batches else { throw BenchError("\(name): direct inserts stored too few") }

    let collectorRate = events / through.seconds
    let directRate = events / directSeconds
    let ratio = collectorRate / directRate
    print(
        name.padding(toLength: 10, withPad: " ", startingAt: 0)
            + String(
                format:
                    " collector %9.0f events/s (%.2f s)   direct %9.0f events/s (%.2f s)   ratio %.2f× (goal ≥ 0.5×)",
                collectorRate,
                through.seconds,
                directRate,
                directSeconds,
                ratio
            )
    )
    return collectorRate
}

/// The collector's peak memory while `10 × connections` connections post full batches back
/// to back, far past what it stores.
func flood(database: String, capacity: Double, options: Options, server: String) throws {
    let bodies = makeBatches(count: 200, events: 1000, seed: 4)
    let collector = try CollectorProcess(executable: server, database: database)
    defer { collector.stop() }
    let before = collector.peakResident
    let deadline = ProcessInfo.processInfo.systemUptime + options.floodSeconds
    let result = try load(
        port: collector.port,
        bodies: bodies,
        connections: options.connections * 10,
        until: deadline
    )
    let peak = collector.peakResident
    let offered = Double(result.requests * 1000) / result.seconds
    let stored = Double((result.statuses[204] ?? 0) * 1000) / result.seconds
    print(
        String(
            format:
                "flood      %d connections, %.0f s: offered %.0f events/s (%.1f× the capacity above), stored %.0f new events/s; answers %@",
            options.connections * 10,
            result.seconds,
            offered,
            offered / capacity,
            stored,
            result.statuses.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
                as NSString
        )
    )
    print(
        String(
            format: "flood      collector peak RSS %.1f MB (%.1f MB before the flood; goal ≤ 200 MB)",
            Double(peak) / 1_048_576,
            Double(before) / 1_048_576
        )
    )
}

@main
struct HotServerBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hot-server-bench",
        abstract: "The collector's throughput against direct inserts, and its peak memory under a flood."
    )

    @OptionGroup var options: Options

    func run() async throws {
        let server = URL(
            fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        )
        .deletingLastPathComponent().appendingPathComponent("hot-server").path
        guard FileManager.default.isExecutableFile(atPath: server) else {
            throw BenchError(
                "no hot-server beside hot-server-bench (\(server)): HOTUPDATE_DEV=1 swift build --product hot-server"
            )
        }
        let scratch = NSTemporaryDirectory() + "hot-server-bench-\(getpid())"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        print(
            "\(options.batches) batches of \(options.events) events over \(options.connections) keep-alive connections; direct: \(options.connections) concurrent writers"
        )
        let capacity = try await compare(
            name: "sqlite",
            collectorDatabase: "sqlite:\(scratch)/collector.db",
            directDatabase: "sqlite:\(scratch)/direct.db",
            options: options,
            server: server
        )
        if !options.noPostgres {
            if PostgresServer.binaries != nil {
                let postgres = try PostgresServer.startBlocking(databases: ["collector", "direct"], durable: true)
                do {
                    _ = try await compare(
                        name: "postgres",
                        collectorDatabase: postgres.url("collector"),
                        directDatabase: postgres.url("direct"),
                        options: options,
                        server: server
                    )
                } catch {
                    postgres.stopBlocking()
                    throw error
                }
                postgres.stopBlocking()
            } else {
                print("postgres   skipped: no PostgreSQL under /usr/lib/postgresql")
            }
        }
        try flood(database: "sqlite:\(scratch)/flood.db", capacity: capacity, options: options, server: server)
    }
}
