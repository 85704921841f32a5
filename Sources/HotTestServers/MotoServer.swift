#if os(Linux) || os(macOS)
import Foundation
import HotCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real S3-compatible server on 127.0.0.1 for tests: moto (`pip install 'moto[server]'`),
/// started on a free port and stopped with the test (or with the test process, however it
/// ends).
///
/// Every request is recorded when its answer starts (method, path, query, status and the
/// headers publishing cares about), in order, so a test reads the upload order from the
/// server's side. ``stall(matching:)`` makes the server hold every matching request
/// without an answer until ``release()``, so a test can kill a client in the middle of a
/// transfer at a point of its choosing.
///
/// Objects are private unless uploaded with a public ACL (`x-amz-acl: public-read`); then
/// anyone reads them at `baseURL/BUCKET/KEY`, as a CDN's origin would serve them.
///
/// ```swift
/// let moto = try await MotoServer.start()
/// try await moto.createBucket("releases")
/// // … hot publish repo s3://releases/app --endpoint \(moto.baseURL) --acl public-read
/// let puts = moto.requests().filter { $0.method == "PUT" }
/// await moto.stop()
/// ```
public final class MotoServer: @unchecked Sendable {
    /// One request the server answered.
    public struct Request: Sendable, Hashable, Decodable {
        /// `GET`, `PUT`, …
        public var method: String
        /// The `Host` header.
        public var host: String
        /// The path, percent-decoded.
        public var path: String
        /// The query string as sent.
        public var query: String
        /// The status answered (503 for a stalled request released without an answer).
        public var status: Int
        /// The request's `If-None-Match`, if any.
        public var ifNoneMatch: String?
        /// The request's `Cache-Control`, if any.
        public var cacheControl: String?
        /// The request's `Content-Type`, if any.
        public var contentType: String?
        /// Whether the request was held by ``MotoServer/stall(matching:)``.
        public var stalled: Bool?
        /// For a request signed with AWS SigV4: whether its signature is the one botocore
        /// computes for it with ``MotoServer/secretAccessKey`` (moto itself checks none).
        public var signatureValid: Bool?
    }

    /// The secret key ``Request/signatureValid`` checks signatures against, whatever the access key.
    public static let secretAccessKey = "hot-test-secret"

    /// `http://127.0.0.1:PORT/`.
    public let baseURL: URL
    /// The port.
    public let port: Int
    /// The directory holding the launcher, the request log and moto's output.
    public let workDirectory: URL

    private let process: ChildProcess
    private let lifeline: Int32
    private let stopped = Locked(false)

    private init(process: ChildProcess, lifeline: Int32, port: Int, workDirectory: URL) {
        self.process = process
        self.lifeline = lifeline
        self.port = port
        self.workDirectory = workDirectory
        baseURL = URL(string: "http://127.0.0.1:\(port)/") ?? URL(fileURLWithPath: "/")
    }

    deinit {
        terminate()
        process.reapInBackground()
        try? FileManager.default.removeItem(at: workDirectory)
    }

    /// Starts moto and returns once it answers.
    ///
    /// - Throws: `HotUpdateError.Code.notFound` when `python3` cannot import moto (install
    ///   it with `pip install 'moto[server]'`, as `scripts/ensure-deps test` does),
    ///   `HotUpdateError.Code.transportFailed` when it does not start.
    public static func start() async throws -> MotoServer {
        let check = try await Subprocess.run("python3", ["-c", "import moto.server, werkzeug"])
        guard check.status == 0 else {
            throw HotUpdateError(
                .notFound,
                "moto is not installed for python3 (pip install 'moto[server]'): \(check.stderr)"
            )
        }
        var lastError: HotUpdateError?
        for _ in 0..<5 {
            let work = FileManager.default.temporaryDirectory.appendingPathComponent("hot-moto-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
            let launcher = work.appendingPathComponent("launch.py")
            try Data(launcherSource.replacingOccurrences(of: "__SECRET__", with: "'\(secretAccessKey)'").utf8)
                .write(to: launcher)
            let port = try NginxServer.freePort()
            let server = try spawn(launcher: launcher, work: work, port: port)
            do {
                try await server.waitUntilAnswering()
                return server
            } catch let error as HotUpdateError {
                lastError = error  // most likely another process took the port
            }
        }
        throw lastError ?? HotUpdateError(.transportFailed, "moto did not start")
    }

    /// Creates a bucket (moto needs no signature for it).
    public func createBucket(_ name: String) async throws {
        try await Subprocess.check(
            "python3",
            [
                "-c",
                "import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], method='PUT'))",
                baseURL.appendingPathComponent(name).absoluteString,
            ]
        )
    }

    /// Holds every request whose `METHOD /path?query` contains `pattern`, unanswered, until
    /// ``release()``.
    public func stall(matching pattern: String) throws {
        try Data(pattern.utf8).write(to: workDirectory.appendingPathComponent("stall"))
    }

    /// Lets stalled requests go: each is answered 503 and never reaches the store.
    public func release() {
        try? FileManager.default.removeItem(at: workDirectory.appendingPathComponent("stall"))
    }

    /// The requests answered so far, in the order their answers started.
    public func requests() -> [Request] {
        guard
            let text = try? String(contentsOf: workDirectory.appendingPathComponent("requests.jsonl"), encoding: .utf8)
        else { return [] }
        return text.split(separator: "\n").compactMap { try? JSONDecoder().decode(Request.self, from: Data($0.utf8)) }
    }

    /// Waits until a recorded request satisfies `predicate`, for at most `timeout`.
    public func waitForRequest(
        timeout: Duration = .seconds(30),
        where predicate: (Request) -> Bool
    ) async -> Request? {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while clock.now < deadline {
            if let found = requests().first(where: predicate) { return found }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// moto's own output (its start-up messages and errors).
    public func output() -> String {
        (try? String(contentsOf: workDirectory.appendingPathComponent("output.log"), encoding: .utf8)) ?? ""
    }

    /// Stops the server and waits until it has exited. Safe to call more than once.
    public func stop() async {
        release()
        terminate()
        for _ in 0..<500 where process.isRunning {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if process.isRunning { process.signal(SIGKILL) }
    }

    /// Stops the server and waits, on the calling thread, until it has exited (at most a few
    /// seconds: then it is killed). For a `defer`, which runs on every way out of a test,
    /// where a `Task` started there might never run. Safe to call more than once.
    public func stopNow() {
        release()
        terminate()
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning, Date() < deadline { usleep(2_000) }
        if process.isRunning { process.signal(SIGKILL) }
        let hardDeadline = Date().addingTimeInterval(2)
        while process.isRunning, Date() < hardDeadline { usleep(2_000) }
    }

    private func terminate() {
        let first = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        close(lifeline)  // the supervisor kills moto when its lifeline closes
    }

    private func waitUntilAnswering() async throws {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(30))
        while clock.now < deadline {
            if NginxServer.canConnect(port: port) { return }
            if !process.isRunning { break }
            try? await Task.sleep(for: .milliseconds(50))
        }
        let log = output()
        await stop()
        throw HotUpdateError(
            .transportFailed,
            "moto did not answer on port \(port): \(log)",
            subject: workDirectory.path
        )
    }

    private static func spawn(launcher: URL, work: URL, port: Int) throws -> MotoServer {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else {
            throw HotUpdateError(.fileSystem, "cannot create a pipe: \(String(cString: strerror(errno)))")
        }
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        let child: ChildProcess
        do {
            child = try ChildProcess(
                "/bin/sh",
                ["-c", NginxServer.supervisor, "hot-moto", "python3", launcher.path, String(port), work.path],
                standardInput: .descriptor(fds[0]),
                standardOutput: .file(work.appendingPathComponent("output.log").path, append: true),
                standardError: .standardOutput
            )
        } catch {
            close(fds[0])
            close(fds[1])
            throw error
        }
        close(fds[0])
        return MotoServer(process: child, lifeline: fds[1], port: port, workDirectory: work)
    }

    /// moto's WSGI application behind a recorder that logs each request as one JSON line
    /// and holds those matching the `stall` file's pattern.
    private static let launcherSource = #"""
        import json, os, re, sys, threading, time, urllib.parse
        from werkzeug.serving import run_simple
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        port, work = int(sys.argv[1]), sys.argv[2]
        app = DomainDispatcherApplication(create_backend_app)
        log = open(os.path.join(work, "requests.jsonl"), "a", buffering=1)
        lock = threading.Lock()
        stall_file = os.path.join(work, "stall")

        def record(entry):
            with lock:
                log.write(json.dumps(entry) + "\n")

        class Recheck(SigV4Auth):
            def _modify_request_before_signing(self, request):
                pass

            def payload(self, request):
                return request.headers["x-amz-content-sha256"]

        def signature_valid(environ, path, query):
            found = re.match(
                r"AWS4-HMAC-SHA256 Credential=([^/]+)/[0-9]+/([^/]+)/s3/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]+)$",
                environ.get("HTTP_AUTHORIZATION", ""))
            if not found:
                return None
            headers = {}
            for name in found.group(3).split(";"):
                special = {"content-type": "CONTENT_TYPE", "content-length": "CONTENT_LENGTH"}
                headers[name] = environ.get(special.get(name, "HTTP_" + name.upper().replace("-", "_")), "")
            url = "http://" + environ.get("HTTP_HOST", "") + path + ("?" + query if query else "")
            request = AWSRequest(method=environ["REQUEST_METHOD"], url=url, headers=headers)
            request.context["timestamp"] = headers.get("x-amz-date", "")
            auth = Recheck(Credentials(found.group(1), __SECRET__), "s3", found.group(2))
            expected = auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)
            return expected == found.group(4)

        def recorder(environ, start_response):
            path = urllib.parse.unquote(environ.get("PATH_INFO", ""))
            query = environ.get("QUERY_STRING", "")
            entry = {
                "method": environ["REQUEST_METHOD"], "host": environ.get("HTTP_HOST", ""), "path": path,
                "query": query, "ifNoneMatch": environ.get("HTTP_IF_NONE_MATCH"),
                "cacheControl": environ.get("HTTP_CACHE_CONTROL"), "contentType": environ.get("CONTENT_TYPE") or None,
                "signatureValid": signature_valid(environ, path, query),
            }
            target = entry["method"] + " " + path + ("?" + query if query else "")
            try:
                with open(stall_file) as f:
                    pattern = f.read().strip()
            except OSError:
                pattern = ""
            if pattern and pattern in target:
                record(dict(entry, status=0, stalled=True))
                while os.path.exists(stall_file):
                    time.sleep(0.05)
                record(dict(entry, status=503, stalled=True))
                start_response("503 Service Unavailable", [("Content-Length", "0")])
                return [b""]

            def recording_start(status, headers, exc_info=None):
                record(dict(entry, status=int(status.split()[0])))
                return start_response(status, headers, exc_info)

            return app(environ, recording_start)

        run_simple("127.0.0.1", port, recorder, threaded=True, use_reloader=False)
        """#
}
#endif
