#if os(Linux) || os(macOS)
import Foundation
import HotCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real nginx serving a directory on `127.0.0.1`, for tests.
///
/// The server runs in the foreground as a child of the test process (`daemon off;
/// master_process off;`), on a free port, with its configuration, pid file, logs and
/// temporary paths in a fresh temporary directory. ``stop()`` ends it; dropping the
/// last reference ends it too, and a watchdog ends it if the test process dies, so
/// it never outlives the tests that started it.
///
/// ```swift
/// let server = try await NginxServer.start(root: directory, options: .init(locations: [
///     .status(404, at: "/gone.zip"),
///     .rateLimited(prefix: "/slow/", bytesPerSecond: 100),
/// ]))
/// defer { server.stopNow() }
/// let url = server.baseURL.appendingPathComponent("package.zip")
/// // … fetch `url` …
/// #expect(server.requestCount(for: "/package.zip") == 1)
/// await server.stop()
/// ```
public final class NginxServer: @unchecked Sendable {
    /// An extra `location` block of the server's configuration.
    public struct Location: Sendable, Hashable {
        /// The block as nginx reads it: `location … { … }`.
        public var block: String

        /// A location written by hand, for scenarios the helpers do not cover.
        ///
        /// - Parameter block: A complete `location` block in nginx syntax.
        public init(_ block: String) { self.block = block }

        /// Answers `path` (matched exactly) with `status` and an empty body.
        ///
        /// - Parameters:
        ///   - status: The HTTP status to return, such as 404 or 500.
        ///   - path: The exact request path, starting with `/`.
        public static func status(_ status: Int, at path: String) -> Location {
            Location("location = \(path) { return \(status); }")
        }

        /// Serves files under `prefix` from the root, sending at most `bytesPerSecond`
        /// after the first `afterBytes` bytes, to simulate a slow or stalled network.
        ///
        /// - Parameters:
        ///   - prefix: The path prefix, starting and ending with `/`.
        ///   - bytesPerSecond: The rate limit (nginx `limit_rate`).
        ///   - afterBytes: How many bytes go at full speed first (nginx `limit_rate_after`).
        public static func rateLimited(prefix: String, bytesPerSecond: Int, afterBytes: Int = 0) -> Location {
            Location(
                "location ^~ \(prefix) { limit_rate \(bytesPerSecond); limit_rate_after \(afterBytes); }"
            )
        }

        /// Serves files under `prefix` from the root as a proxy whose upstream stalls after
        /// the first `afterBytes` bytes of a response: one second later the proxy gives up on
        /// it (`proxy_read_timeout`) and closes the client's connection mid-body, as a proxy's
        /// idle timeout or a dropped connection does. Requests for less than that (a `Range`
        /// for the rest) pass whole, with the upstream's `ETag`, `Last-Modified` and `206`.
        ///
        /// - Parameters:
        ///   - prefix: The path prefix, starting and ending with `/`, such as `/cut/`.
        ///   - afterBytes: How many bytes of a response pass before the cut.
        public static func cutsConnections(prefix: String, afterBytes: Int) -> Location {
            let stalled = "/stalled" + prefix
            return Location(
                "location ^~ \(prefix) { rewrite ^\(prefix)(.*)$ \(stalled)$1 break; "
                    + "proxy_pass http://127.0.0.1:$server_port; proxy_read_timeout 1s; proxy_buffering off; "
                    + "proxy_http_version 1.1; proxy_set_header Connection \"\"; }\n"
                    + "    location ^~ \(stalled) { rewrite ^\(stalled)(.*)$ /$1 break; "
                    + "limit_rate_after \(afterBytes); limit_rate 1; }"
            )
        }

        /// Redirects `path` (matched exactly) to `target`.
        ///
        /// - Parameters:
        ///   - path: The exact request path, starting with `/`.
        ///   - target: The `Location` to send: a path on this server or an absolute URL.
        ///   - status: The redirect status, 301, 302, 303, 307 or 308.
        public static func redirect(from path: String, to target: String, status: Int = 302) -> Location {
            Location("location = \(path) { return \(status) \(target); }")
        }
    }

    /// TLS for the server: it then speaks only HTTPS, with this certificate.
    public struct TLS: Sendable, Hashable {
        /// The server's certificate chain, PEM (the leaf first).
        public var certificate: URL
        /// The certificate's private key, PEM.
        public var key: URL
        /// The protocol versions served, in nginx's words.
        public var protocols: String

        /// Creates TLS settings.
        ///
        /// - Parameters:
        ///   - certificate: The certificate chain, PEM.
        ///   - key: Its private key, PEM.
        ///   - protocols: nginx's `ssl_protocols`, `TLSv1.2 TLSv1.3` by default.
        public init(certificate: URL, key: URL, protocols: String = "TLSv1.2 TLSv1.3") {
            self.certificate = certificate
            self.key = key
            self.protocols = protocols
        }

        /// A certificate a ``TestCertificateAuthority`` issued.
        public init(_ issued: TestCertificateAuthority.Issued) {
            self.init(certificate: issued.certificate, key: issued.key)
        }
    }

    /// How to start the server.
    public struct Options: Sendable, Hashable {
        /// Extra `location` blocks, placed before the default `location /`.
        public var locations: [Location]
        /// HTTPS instead of HTTP, with this certificate; nil for plain HTTP.
        public var tls: TLS?
        /// Where the default `location /` sends requests (a reverse proxy, such as to
        /// ``MotoServer``), keeping their `Host`; nil serves the root's files.
        public var proxyTo: URL?
        /// How long an idle kept-alive connection stays open, in seconds (nginx's
        /// `keepalive_timeout`).
        public var keepAliveSeconds: Int
        /// The nginx executable; nil searches `PATH`, `/usr/sbin` and `/usr/local/sbin`.
        public var executable: URL?
        /// How long to wait for the server to accept connections.
        public var startTimeout: Duration
        /// The port to listen on; nil picks a free one (and picks again when another process
        /// takes it first).
        public var port: Int?

        /// Creates options.
        ///
        /// - Parameters:
        ///   - locations: Extra `location` blocks.
        ///   - executable: The nginx executable, or nil to search for it.
        ///   - startTimeout: How long to wait for the server to accept connections.
        ///   - port: The port, or nil for a free one.
        ///   - tls: HTTPS with this certificate, or nil for plain HTTP.
        ///   - proxyTo: Where to proxy every request not in `locations`, or nil to serve files.
        ///   - keepAliveSeconds: How long an idle connection stays open, 5 seconds by default.
        public init(
            locations: [Location] = [],
            executable: URL? = nil,
            startTimeout: Duration = .seconds(15),
            port: Int? = nil,
            tls: TLS? = nil,
            proxyTo: URL? = nil,
            keepAliveSeconds: Int = 5
        ) {
            self.locations = locations
            self.tls = tls
            self.proxyTo = proxyTo
            self.keepAliveSeconds = keepAliveSeconds
            self.executable = executable
            self.startTimeout = startTimeout
            self.port = port
        }
    }

    /// One line of the access log.
    public struct Request: Sendable, Hashable {
        /// The request method.
        public var method: String
        /// The request path, percent-decoded, without the query.
        public var path: String
        /// The status the server answered.
        public var status: Int
        /// How many body bytes the server sent before the request ended.
        public var bodyBytesSent: Int64
        /// The serial number of the connection the request came on: requests on one
        /// kept-alive connection share it.
        public var connection: Int = 0
        /// The request's `Range` header, when it had one.
        public var range: String?
    }

    /// The address the server listens on, such as `http://127.0.0.1:40123/`
    /// (`https://` with ``Options/tls``).
    public let baseURL: URL
    /// The port the server listens on.
    public let port: Int
    /// The directory holding the configuration, the logs and nginx's temporary files.
    public let workDirectory: URL

    private let process: ChildProcess

    /// The process id of the shell that supervises nginx; nginx and the shell's watcher are
    /// its children. For tests that look at what the server's processes hold.
    public var supervisorProcessID: pid_t { process.pid }
    private let lifeline: Int32
    private let stopped = Locked(false)

    private init(process: ChildProcess, lifeline: Int32, port: Int, workDirectory: URL, secure: Bool) {
        self.process = process
        self.lifeline = lifeline
        self.port = port
        self.workDirectory = workDirectory
        self.baseURL = URL(string: "\(secure ? "https" : "http")://127.0.0.1:\(port)/") ?? URL(fileURLWithPath: "/")
    }

    /// This server's URL for `path` under another host name that resolves to 127.0.0.1, such
    /// as `localhost`.
    ///
    /// - Parameters:
    ///   - host: The host name.
    ///   - path: The path, without a leading `/`.
    public func url(host: String, path: String = "") -> URL {
        let scheme = baseURL.scheme ?? "http"
        return URL(string: "\(scheme)://\(host):\(port)/\(path)") ?? baseURL
    }

    deinit {
        terminate()
        process.reapInBackground()
        try? FileManager.default.removeItem(at: workDirectory)
    }

    /// Starts nginx serving `root` on `127.0.0.1` and returns once it accepts connections.
    ///
    /// - Parameters:
    ///   - root: The directory whose files are served.
    ///   - options: Extra locations and the executable.
    /// - Returns: The running server.
    /// - Throws: `HotUpdateError.Code.notFound` when nginx is not installed (install it with
    ///   `apt-get install nginx-light`), `HotUpdateError.Code.transportFailed` when it does not
    ///   start (the message quotes its error log).
    public static func start(root: URL, options: Options = Options()) async throws -> NginxServer {
        let executable = try options.executable ?? findExecutable()
        var lastError: HotUpdateError?
        // Another process may take the free port between probing and nginx binding it: retry
        // (a port given in the options is not picked again).
        for _ in 0..<(options.port == nil ? 5 : 1) {
            do {
                return try await launch(executable: executable, root: root, options: options)
            } catch let error as HotUpdateError where error.code == .transportFailed && error.message.contains("in use")
            {
                lastError = error
            }
        }
        throw lastError ?? HotUpdateError(.transportFailed, "nginx could not bind a port on 127.0.0.1")
    }

    /// Stops the server and waits until the process has exited. Safe to call more than once.
    public func stop() async {
        terminate()
        for _ in 0..<500 where process.isRunning {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if process.isRunning { killHard() }
        for _ in 0..<200 where process.isRunning {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Stops the server and waits, on the calling thread, until the process has exited (at
    /// most a few seconds: then it is killed). For a `defer`, which runs on every way out of
    /// a test, where a `Task` started there might never run. Safe to call more than once.
    public func stopNow() {
        terminate()
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning, Date() < deadline { usleep(2_000) }
        if process.isRunning { killHard() }
        let hardDeadline = Date().addingTimeInterval(2)
        while process.isRunning, Date() < hardDeadline { usleep(2_000) }
    }

    /// Whether the server process is still running.
    public var isRunning: Bool { process.isRunning }

    /// The requests nginx has finished, in order, read from its access log.
    ///
    /// nginx writes a line when a request ends, which can be a moment after the client
    /// has read the last byte; use ``waitForRequests(path:count:timeout:)`` to wait for it.
    public func requests() -> [Request] {
        let log = workDirectory.appendingPathComponent("access.log")
        guard let text = try? String(contentsOf: log, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: false)
            guard fields.count == 6, let status = Int(fields[1]), let sent = Int64(fields[2]),
                let connection = Int(fields[3])
            else { return nil }
            // `"bytes=100-"`, or `"-"` without a Range header (nginx escapes quotes inside).
            let range = fields[4].dropFirst().dropLast()
            let uri = String(fields[5])
            let rawPath = uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? uri
            let path = rawPath.removingPercentEncoding ?? rawPath
            return Request(
                method: String(fields[0]),
                path: path,
                status: status,
                bodyBytesSent: sent,
                connection: connection,
                range: range.isEmpty || range == "-" ? nil : String(range)
            )
        }
    }

    /// How many finished requests asked for `path` (percent-decoded, query ignored).
    ///
    /// - Parameter path: The request path, starting with `/`.
    public func requestCount(for path: String) -> Int {
        requests().filter { $0.path == path }.count
    }

    /// Waits until at least `count` finished requests for `path` are logged, or `timeout` passes.
    ///
    /// - Parameters:
    ///   - path: The request path, starting with `/`.
    ///   - count: How many requests to wait for.
    ///   - timeout: The longest wait.
    /// - Returns: The requests for `path` logged when the wait ended.
    @discardableResult
    public func waitForRequests(path: String, count: Int, timeout: Duration = .seconds(10)) async -> [Request] {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            let matching = requests().filter { $0.path == path }
            if matching.count >= count || clock.now >= deadline { return matching }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The text of nginx's error log, for failure messages.
    public func errorLog() -> String {
        (try? String(contentsOf: workDirectory.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
    }

    // MARK: - Starting

    private static func findExecutable() throws -> URL {
        let fileManager = FileManager.default
        var directories = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        directories += ["/usr/sbin", "/usr/local/sbin", "/usr/local/bin", "/opt/homebrew/bin"]
        for directory in directories where !directory.isEmpty {
            let candidate = URL(fileURLWithPath: directory).appendingPathComponent("nginx")
            if fileManager.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw HotUpdateError(
            .notFound,
            "nginx is not installed; the HTTP tests need it: install it with `apt-get install nginx-light` "
                + "(Debian, Ubuntu) or `brew install nginx` (macOS)",
            subject: "nginx"
        )
    }

    private static func launch(executable: URL, root: URL, options: Options) async throws -> NginxServer {
        let fileManager = FileManager.default
        let work = fileManager.temporaryDirectory.appendingPathComponent("hot-nginx-\(UUID().uuidString)")
        do {
            for sub in ["", "body", "proxy", "fastcgi", "uwsgi", "scgi"] {
                try fileManager.createDirectory(
                    at: work.appendingPathComponent(sub),
                    withIntermediateDirectories: true
                )
            }
            let port = try options.port ?? freePort()
            let config = configuration(root: root.standardizedFileURL, work: work, port: port, options: options)
            try config.write(to: work.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
            let server = try spawn(executable: executable, work: work, port: port, secure: options.tls != nil)
            try await server.waitUntilAccepting(timeout: options.startTimeout)
            return server
        } catch {
            try? fileManager.removeItem(at: work)
            throw HotUpdateError.wrap(error, as: .transportFailed, "nginx did not start")
        }
    }

    private static func configuration(root: URL, work: URL, port: Int, options: Options) -> String {
        var lines: [String] = []
        lines.append("daemon off;")
        lines.append("master_process off;")
        lines.append("worker_processes 1;")
        if geteuid() == 0, let user = getpwuid(0)?.pointee.pw_name, let group = getgrgid(0)?.pointee.gr_name {
            // Only root may name a user; root's own keeps files of any temporary directory readable.
            lines.append("user \(String(cString: user)) \(String(cString: group));")
        }
        lines.append("pid \(quoted(work.appendingPathComponent("nginx.pid").path));")
        lines.append("error_log \(quoted(work.appendingPathComponent("error.log").path)) warn;")
        lines.append("events { worker_connections 256; }")
        lines.append("http {")
        lines.append(
            "  log_format hot '$request_method $status $body_bytes_sent $connection \"$http_range\" $request_uri';"
        )
        lines.append("  access_log \(quoted(work.appendingPathComponent("access.log").path)) hot;")
        for (directive, sub) in [
            ("client_body_temp_path", "body"), ("proxy_temp_path", "proxy"), ("fastcgi_temp_path", "fastcgi"),
            ("uwsgi_temp_path", "uwsgi"), ("scgi_temp_path", "scgi"),
        ] {
            lines.append("  \(directive) \(quoted(work.appendingPathComponent(sub).path));")
        }
        lines.append("  types { text/html html; text/plain txt; application/json json; application/zip zip; }")
        lines.append("  default_type application/octet-stream;")
        lines.append("  sendfile on;")
        lines.append("  keepalive_timeout \(options.keepAliveSeconds);")
        lines.append("  server {")
        if let tls = options.tls {
            lines.append("    listen 127.0.0.1:\(port) ssl;")
            lines.append("    ssl_certificate \(quoted(tls.certificate.path));")
            lines.append("    ssl_certificate_key \(quoted(tls.key.path));")
            lines.append("    ssl_protocols \(tls.protocols);")
            lines.append("    ssl_session_cache builtin:1000;")
        } else {
            lines.append("    listen 127.0.0.1:\(port);")
        }
        lines.append("    server_name localhost;")
        lines.append("    root \(quoted(root.path));")
        for location in options.locations { lines.append("    \(location.block)") }
        if let upstream = options.proxyTo {
            var target = upstream.absoluteString
            while target.hasSuffix("/") { target.removeLast() }
            lines.append(
                "    location / { proxy_pass \(target); proxy_set_header Host $http_host; "
                    + "proxy_request_buffering off; proxy_buffering off; client_max_body_size 0; "
                    + "proxy_http_version 1.1; }"
            )
        } else {
            lines.append("    location / { }")
        }
        lines.append("  }")
        lines.append("}")
        return lines.joined(separator: "\n") + "\n"
    }

    private static func quoted(_ path: String) -> String {
        "\"" + path.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    /// The shell script that supervises nginx: it reads its standard input (the
    /// lifeline pipe) and kills nginx when that pipe closes, which happens when the
    /// server is stopped or when the test process ends in any way.
    static let supervisor = """
        exec 3<&0 0</dev/null
        "$@" 3<&- &
        pid=$!
        { read -r _ <&3; kill -KILL "$pid" 2>/dev/null; } &
        watcher=$!
        exec 3<&-
        wait "$pid"
        status=$?
        kill "$watcher" 2>/dev/null
        exit "$status"
        """

    private static let spawnLock = NSLock()

    private static func spawn(executable: URL, work: URL, port: Int, secure: Bool) throws -> NginxServer {
        var fds: [Int32] = [-1, -1]
        // The write end must never leak into another child, or the pipe would not close with
        // us: it is close-on-exec, and servers start one at a time so none inherits another's.
        spawnLock.lock()
        defer { spawnLock.unlock() }
        guard pipe(&fds) == 0 else {
            throw HotUpdateError(.fileSystem, "cannot create a pipe: \(String(cString: strerror(errno)))")
        }
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        let arguments = [
            "-c", supervisor, "hot-nginx", executable.path,
            "-p", work.path + "/", "-c", work.appendingPathComponent("nginx.conf").path,
            "-e", work.appendingPathComponent("error.log").path,
        ]
        let child: ChildProcess
        do {
            child = try ChildProcess(
                "/bin/sh",
                arguments,
                standardInput: .descriptor(fds[0]),
                standardOutput: .file(work.appendingPathComponent("stderr.log").path, append: true),
                standardError: .standardOutput
            )
        } catch {
            close(fds[0])
            close(fds[1])
            throw error
        }
        close(fds[0])
        return NginxServer(process: child, lifeline: fds[1], port: port, workDirectory: work, secure: secure)
    }

    private func waitUntilAccepting(timeout: Duration) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        let pidFile = workDirectory.appendingPathComponent("nginx.pid").path
        while true {
            // nginx writes its pid file once it has bound its port: before that, a connection
            // may reach another server on the same port while this one still tries to bind.
            if FileManager.default.fileExists(atPath: pidFile), Self.canConnect(port: port) { return }
            if !process.isRunning || clock.now >= deadline {
                let log =
                    errorLog()
                    + ((try? String(
                        contentsOf: workDirectory.appendingPathComponent("stderr.log"),
                        encoding: .utf8
                    )) ?? "")
                await stop()
                // A bind refused for a held port is the reason, whether nginx gave up retrying
                // or the deadline (on a loaded machine) came first.
                let held = log.contains("Address already in use")
                let message =
                    held
                    ? "nginx did not start (port \(port) is in use): \(log)"
                    : process.isRunning || clock.now >= deadline
                        ? "nginx did not accept connections on port \(port) in time: \(log)"
                        : "nginx did not start (it exited): \(log)"
                throw HotUpdateError(.transportFailed, message, subject: workDirectory.path)
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    // MARK: - Stopping

    private func terminate() {
        let first = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        close(lifeline)
        if let pid = nginxPID() { kill(pid, SIGKILL) }
        try? FileManager.default.removeItem(at: workDirectory.appendingPathComponent("nginx.conf"))
    }

    private func killHard() {
        if let pid = nginxPID() { kill(pid, SIGKILL) }
        if process.isRunning { process.signal(SIGKILL) }
    }

    private func nginxPID() -> pid_t? {
        guard let text = try? String(contentsOf: workDirectory.appendingPathComponent("nginx.pid"), encoding: .utf8),
            let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 0
        else { return nil }
        return pid
    }

    // MARK: - Sockets

    /// A port on 127.0.0.1 that nothing listens on right now.
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, LoopbackSocketType.streamCloseOnExec, 0)
        guard fd >= 0 else { throw HotUpdateError(.transportFailed, "cannot create a socket") }
        defer { close(fd) }
        var address = loopbackAddress(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { throw HotUpdateError(.transportFailed, "cannot bind a socket on 127.0.0.1") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw HotUpdateError(.transportFailed, "cannot read a socket's port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Whether something accepts connections on 127.0.0.1:`port`.
    static func canConnect(port: Int) -> Bool {
        let fd = socket(AF_INET, LoopbackSocketType.streamCloseOnExec, 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopbackAddress(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    static func loopbackAddress(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        #if canImport(Darwin)
        address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}

/// Socket types for `socket(2)`, which Linux and Darwin spell differently.
enum LoopbackSocketType {
    /// A TCP socket that no child process inherits (atomically where the system allows).
    #if canImport(Glibc)
    static let streamCloseOnExec = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
    #else
    static let streamCloseOnExec = SOCK_STREAM
    #endif
}
#endif
