import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Playwright from PyPI with Debian's `chromium-headless-shell`: where both are, and under
/// `CI=true` whatever happens (their absence then fails).
enum PlaywrightBrowser {
    static let available: Bool = {
        guard HeadlessBrowser.path != nil else { return false }
        return Subprocess.pythonImports("playwright.async_api")
    }()

    static var suiteRuns: Bool { available || ProcessInfo.processInfo.environment["CI"] == "true" }

    static let skipReason: Comment = """
        no Playwright (pip install playwright) or no chromium-headless-shell; scripts/ensure-deps test \
        installs both. Under CI=true their absence fails
        """
}

/// A single-page app as today's bundlers emit it, installed with the real `hot pack` and
/// `hot sync`, served by `hot serve-web`.
struct ServedApp: Sendable {
    static let online = "https://m.example.com/home/"
    let store: URL
    let source: URL
    let files: [String: Data]
    /// The installed copy of index.html.
    let installedIndex: URL

    /// Seconds of sound in the `<video>`'s file (a WAV: Chromium's media element plays it,
    /// and seeks in it with range requests, as in a WebM).
    static let clipSeconds = 20

    /// The app's files: a module script importing a chunk and loading another with
    /// `import()`, a `crossorigin` font, JSON fetched beside the page, `localStorage`, a
    /// media element that seeks, a module worker, a web app manifest.
    static func appFiles() throws -> [String: Data] {
        var files: [String: Data] = [:]
        files["index.html"] = Data(
            """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>Served app</title>
            <link rel="manifest" href="site.webmanifest">
            <link rel="preload" href="assets/font-7e1f.ttf" as="font" type="font/ttf" crossorigin>
            <link rel="stylesheet" href="assets/index-2b9c.css">
            <script type="module" src="assets/index-4f3a.js"></script>
            </head><body><h1>Served app</h1>
            <video id="clip" src="media/clip.wav" preload="auto" muted></video>
            <p id="state">loading</p></body></html>
            """.utf8
        )
        files["assets/index-2b9c.css"] = Data(
            """
            @font-face { font-family: "AppFont"; src: url("font-7e1f.ttf") format("truetype"); }
            h1 { font-family: "AppFont", sans-serif; }

            """.utf8
        )
        files["assets/shared-9d0e.js"] = Data("export const base = 40;\n".utf8)
        files["assets/chunk-3c4d.js"] = Data(
            "import { base } from './shared-9d0e.js';\nexport function compute() { return base + 2; }\n".utf8
        )
        files["assets/worker-5a6b.js"] = Data(
            "self.onmessage = (event) => { self.postMessage(event.data * 2); };\n".utf8
        )
        files["assets/index-4f3a.js"] = Data(
            """
            import { base } from './shared-9d0e.js';
            const within = (promise, label) => Promise.race([
              promise, new Promise((resolve) => setTimeout(() => resolve('timeout: ' + label), 8000)),
            ]);
            async function run() {
              const results = { base };
              results.imported = await within(import('./chunk-3c4d.js').then((m) => m.compute()), 'import');
              results.json = await within(fetch(new URL('../data/config.json', import.meta.url)).then((r) => r.json()).then((j) => j.greeting), 'fetch');
              const visits = Number(localStorage.getItem('visits') || '0') + 1;
              localStorage.setItem('visits', String(visits));
              results.visits = Number(localStorage.getItem('visits'));
              results.font = await within(document.fonts.load('16px AppFont').then((faces) =>
                faces.length > 0 ? faces[0].status : 'no face'), 'font');
              results.worker = await within(new Promise((resolve, reject) => {
                const worker = new Worker(new URL('./worker-5a6b.js', import.meta.url), { type: 'module' });
                worker.onmessage = (event) => resolve(event.data);
                worker.onerror = (event) => reject(new Error('worker: ' + event.message));
                worker.postMessage(21);
              }), 'worker');
              const clip = document.getElementById('clip');
              results.seek = await within(new Promise((resolve, reject) => {
                const seek = () => { clip.addEventListener('seeked', () => resolve(clip.currentTime), { once: true }); clip.currentTime = 12; };
                clip.addEventListener('error', () => reject(new Error('media error ' + (clip.error && clip.error.code))));
                if (clip.readyState >= 1) seek(); else clip.addEventListener('loadedmetadata', seek, { once: true });
              }), 'seek');
              results.duration = clip.duration;
              window.__results = results;
              document.getElementById('state').textContent = 'done';
            }
            run().catch((error) => { window.__results = { error: String(error) }; }).finally(() => { window.__done = true; });

            """.utf8
        )
        files["data/config.json"] = Data(#"{"greeting": "hello from the package"}"#.utf8)
        files["site.webmanifest"] = Data(
            #"{"name": "Served app", "start_url": "./index.html", "display": "standalone", "icons": []}"#.utf8
        )
        let fonts = [
            "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",
        ]
        guard let font = fonts.first(where: { FileManager.default.fileExists(atPath: $0) }) else {
            throw HotUpdateError(.notFound, "no DejaVu font: scripts/ensure-deps test installs fonts-dejavu-core")
        }
        files["assets/font-7e1f.ttf"] = try Data(contentsOf: URL(fileURLWithPath: font))
        files["media/clip.wav"] = wav(seconds: clipSeconds)
        return files
    }

    /// A mono 8 kHz 8-bit PCM WAV of a tone.
    static func wav(seconds: Int) -> Data {
        let rate = 8_000
        let count = rate * seconds
        var data = Data()
        func append32(_ value: Int) { withUnsafeBytes(of: UInt32(value).littleEndian) { data.append(contentsOf: $0) } }
        func append16(_ value: Int) { withUnsafeBytes(of: UInt16(value).littleEndian) { data.append(contentsOf: $0) } }
        data.append(contentsOf: Array("RIFF".utf8))
        append32(36 + count)
        data.append(contentsOf: Array("WAVEfmt ".utf8))
        append32(16)
        append16(1)
        append16(1)
        append32(rate)
        append32(rate)
        append16(1)
        append16(8)
        data.append(contentsOf: Array("data".utf8))
        append32(count)
        var samples = [UInt8](repeating: 128, count: count)
        for index in 0..<count { samples[index] = index % 16 < 8 ? 160 : 96 }
        data.append(contentsOf: samples)
        return data
    }

    /// Packs `files` with `hot pack`, installs them with `hot sync` and finds the installed
    /// index.html.
    static func install(_ files: [String: Data], id: String = "web") async throws -> ServedApp {
        let source = try makeTemporaryDirectory("served-app")
        try writeTree(files, under: source)
        let repo = try makeTemporaryDirectory("served-repo")
        let store = try makeTemporaryDirectory("served-store")
        let packed = try await CommandLineTests.run([
            "pack", source.path, "--id", id, "--version", "1", "--repo", repo.path,
        ])
        guard packed.status == 0 else { throw HotUpdateError(.internalInconsistency, "hot pack: \(packed.stderr)") }
        let synced = try await CommandLineTests.run([
            "sync", "--manifest", repo.appendingPathComponent("manifest.json").absoluteString, "--root", store.path,
            "--allow-unsigned",
        ])
        guard synced.status == 0 else { throw HotUpdateError(.internalInconsistency, "hot sync: \(synced.stderr)") }
        let status = try await CommandLineTests.run(["status", "--root", store.path, "--json"])
        let document = try JSONDecoder().decode(CommandLineTests.StatusDocument.self, from: Data(status.stdout.utf8))
        guard let path = document.packages.first(where: { $0.id == id })?.path else {
            throw HotUpdateError(.internalInconsistency, "no installed \(id): \(status.stdout)")
        }
        return ServedApp(
            store: store,
            source: source,
            files: files,
            installedIndex: URL(fileURLWithPath: path).appendingPathComponent("index.html")
        )
    }

    /// The app, installed once for the suites of this process.
    static func shared() async throws -> ServedApp {
        try await SharedApp.instance.app()
    }
}

/// Installs the app once per test process.
actor SharedApp {
    static let instance = SharedApp()
    private var installing: Task<ServedApp, any Error>?

    func app() async throws -> ServedApp {
        if let installing { return try await installing.value }
        let task = Task { try await ServedApp.install(try ServedApp.appFiles()) }
        installing = task
        return try await task.value
    }
}

/// `hot serve-web`, running until ``stop()``.
final class WebPreview: @unchecked Sendable {
    let process: ChildProcess
    let base: URL
    let pid: Int32
    private let log: Lines

    /// What it printed on stderr (`--log`: one line per request).
    var requests: [String] { log.lines() }

    /// Starts `hot serve-web` on a free port and waits (at most 30 s) for its first line.
    static func start(store: URL, extra: [String] = []) async throws -> WebPreview {
        let process = try ChildProcess(
            try CommandLineTests.hotExecutable().path,
            ["serve-web", "--root", store.path, "--module", "web=\(ServedApp.online)", "--port", "0", "--log"] + extra,
            standardOutput: .pipe,
            standardError: .pipe
        )
        let log = Lines()
        if let errors = process.standardError {
            Thread {
                while true {
                    let chunk = errors.availableData
                    if chunk.isEmpty { return }
                    log.append(chunk)
                }
            }.start()
        }
        let line: String? = await withCheckedContinuation { continuation in
            let once = Once(continuation)
            // The deadline: a server that prints nothing in 30 s is killed, and the read ends.
            Thread {
                Thread.sleep(forTimeInterval: 30)
                if once.resume(nil) { process.kill() }
            }.start()
            Thread {
                guard let output = process.standardOutput else {
                    _ = once.resume(nil)
                    return
                }
                _ = once.resume(ChildProcess.readLine(output))
                // Whatever else it prints is read and dropped, so it never blocks on the pipe.
                while !output.availableData.isEmpty {}
            }.start()
        }
        guard let line, let start = line.range(of: "http://127.0.0.1:"),
            let end = line[start.upperBound...].firstIndex(of: "/"), let port = Int(line[start.upperBound..<end]),
            let base = URL(string: "http://127.0.0.1:\(port)/home/")
        else {
            process.kill()
            await process.exit()
            throw HotUpdateError(
                .internalInconsistency,
                "hot serve-web did not start: \(line ?? "no output"); \(log.lines())"
            )
        }
        return WebPreview(process: process, base: base, log: log)
    }

    private init(process: ChildProcess, base: URL, log: Lines) {
        self.process = process
        self.base = base
        self.pid = process.pid
        self.log = log
    }

    /// The server's peak resident memory so far, in bytes (`VmHWM`).
    func peakMemory() throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { throw HotUpdateError(.internalInconsistency, "no VmHWM in /proc/\(pid)/status") }
        return kilobytes * 1024
    }

    /// Stops the server with SIGKILL.
    func stop() {
        process.kill()
        process.waitUntilExit()
    }

    /// Resumes a continuation once, from whichever thread comes first.
    final class Once: @unchecked Sendable {
        private let lock = NSLock()
        private var continuation: CheckedContinuation<String?, Never>?
        init(_ continuation: CheckedContinuation<String?, Never>) { self.continuation = continuation }
        func resume(_ value: String?) -> Bool {
            lock.lock()
            let pending = continuation
            continuation = nil
            lock.unlock()
            pending?.resume(returning: value)
            return pending != nil
        }
    }

    /// Lines of text gathered from another thread.
    final class Lines: @unchecked Sendable {
        private let lock = NSLock()
        private var data = Data()
        func append(_ chunk: Data) {
            lock.lock()
            data.append(chunk)
            lock.unlock()
        }
        func lines() -> [String] {
            lock.lock()
            defer { lock.unlock() }
            return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
        }
    }
}

/// One HTTP exchange on a raw socket, for requests curl would normalise (`..`, a NUL byte).
func rawHTTP(_ request: String, port: Int) throws -> String {
    try Loopback.exchange(request, port: port)
}

/// The status line's code of a raw answer.
func statusCode(_ answer: String) -> Int? {
    answer.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) }
}

@Suite("Web modules served in Chromium", .enabled(if: PlaywrightBrowser.suiteRuns, PlaywrightBrowser.skipReason))
struct WebServeBrowserTests {
    struct Visit: Decodable {
        var errors: [String]
        var failed: [String]
        var first: Results?
        var second: Results?
    }

    struct Results: Decodable {
        var base: Int?
        var imported: Int?
        var json: String?
        var visits: Int?
        var font: String?
        var worker: Int?
        var seek: Double?
        var duration: Double?
        var error: String?
    }

    static let script = """
        import asyncio, json, sys
        from playwright.async_api import async_playwright

        chromium, file_url, served_url, online_url, served_base, online_base = sys.argv[1:7]

        async def visit(browser, url, route=False):
            context = await browser.new_context()
            page = await context.new_page()
            errors, failed = [], []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("requestfailed", lambda r: failed.append(r.url + " " + str(r.failure)))
            if route:
                # What a scheme handler does: every request for the module's online address is
                # answered by the responder (here through hot serve-web).
                async def handle(r):
                    target = served_base + r.request.url[len(online_base):]
                    response = await r.fetch(url=target)
                    await r.fulfill(response=response)
                await context.route(online_base + "**", handle)
            # From a file URL the module script never runs: no point waiting long for it.
            wait = 5000 if url.startswith("file:") else 30000
            async def results():
                try:
                    await page.wait_for_function("window.__done === true", timeout=wait)
                except Exception as error:
                    errors.append("no results: " + str(error).splitlines()[0])
                return await page.evaluate("window.__results || null")
            await page.goto(url)
            first = await results()
            await page.reload()
            second = await results()
            await context.close()
            return {"errors": errors, "failed": failed, "first": first, "second": second}

        async def main():
            async with async_playwright() as p:
                browser = await p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--autoplay-policy=no-user-gesture-required"])
                out = {
                    "file": await visit(browser, file_url),
                    "served": await visit(browser, served_url),
                    "routed": await visit(browser, online_url, route=True),
                }
                await browser.close()
                print(json.dumps(out))

        asyncio.run(main())
        """

    @Test(
        "the app opened from its file URL fails; served by hot serve-web and routed to the responder, every feature works with 0 failed requests and 0 console errors"
    )
    func appInChromium() async throws {
        let app = try await ServedApp.shared()
        let preview = try await WebPreview.start(store: app.store)
        defer { preview.stop() }
        let work = try makeTemporaryDirectory("served-playwright")
        let script = work.appendingPathComponent("visit.py")
        try Data(Self.script.utf8).write(to: script)
        let output = try await Subprocess.run(
            "python3",
            [
                script.path, try #require(HeadlessBrowser.path), app.installedIndex.absoluteString,
                preview.base.appendingPathComponent("index.html").absoluteString, ServedApp.online + "index.html",
                preview.base.absoluteString, ServedApp.online,
            ]
        )
        #expect(output.status == 0, "\(output.stderr)")
        let visits = try JSONDecoder().decode([String: Visit].self, from: Data(output.stdout.utf8))

        // From the file URL (origin null): the module script and the font are refused.
        let file = try #require(visits["file"])
        print("web serve: file URL: \(file.errors.count) console errors, \(file.failed.count) failed requests")
        #expect(file.errors.count + file.failed.count > 0, "\(file)")
        #expect(file.first == nil || file.first?.imported != 42, "\(file)")

        for way in ["served", "routed"] {
            let visit = try #require(visits[way])
            print("web serve: \(way): \(visit.errors.count) console errors, \(visit.failed.count) failed requests")
            #expect(visit.errors.isEmpty, "\(way): \(visit.errors)")
            #expect(visit.failed.isEmpty, "\(way): \(visit.failed)")
            for (load, results) in [("first", visit.first), ("second", visit.second)] {
                let results = try #require(results, "\(way) \(load)")
                #expect(results.error == nil, "\(way) \(load): \(results.error ?? "")")
                #expect(results.base == 40, "\(way) \(load): the static import")
                #expect(results.imported == 42, "\(way) \(load): the dynamic import")
                #expect(results.json == "hello from the package", "\(way) \(load): fetch")
                #expect(results.font == "loaded", "\(way) \(load): the crossorigin font")
                #expect(results.worker == 42, "\(way) \(load): the worker")
                #expect(abs((results.seek ?? -1) - 12) < 0.5, "\(way) \(load): the seek")
                #expect(abs((results.duration ?? -1) - Double(ServedApp.clipSeconds)) < 0.5, "\(way) \(load): duration")
            }
            // localStorage kept across the reload.
            #expect(visit.second?.visits == (visit.first?.visits ?? 0) + 1, "\(way)")
        }
        // The media element read its file in ranges.
        #expect(preview.requests.contains { $0.hasPrefix("GET /home/media/clip.wav 206") }, "\(preview.requests)")
    }
}

@Suite("hot serve-web over HTTP")
struct WebServeHTTPTests {
    /// curl's status, headers and body for `url`.
    static func curl(_ url: URL, _ arguments: [String] = []) async throws -> (status: Int, headers: String, body: Data)
    {
        let work = try makeTemporaryDirectory("curl")
        let body = work.appendingPathComponent("body")
        let headers = work.appendingPathComponent("headers")
        let output = try await Subprocess.check(
            "curl",
            ["-sS", "--max-time", "60", "-o", body.path, "-D", headers.path, "-w", "%{http_code}"] + arguments
                + [url.absoluteString]
        )
        // curl writes no body file for an answer without a body (304, HEAD).
        let bytes = FileManager.default.fileExists(atPath: body.path) ? try Data(contentsOf: body) : Data()
        return (Int(output.stdout) ?? -1, try String(contentsOf: headers, encoding: .utf8), bytes)
    }

    static func header(_ name: String, in headers: String) -> String? {
        headers.split(separator: "\r\n").first { $0.lowercased().hasPrefix(name.lowercased() + ":") }.map {
            $0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces)
        }
    }

    @Test("every file of the app is served byte for byte with its type and recorded SHA-256 as ETag")
    func everyFile() async throws {
        let app = try await ServedApp.shared()
        let preview = try await WebPreview.start(store: app.store)
        defer { preview.stop() }
        for (path, data) in app.files {
            let answer = try await Self.curl(preview.base.appendingPathComponent(path))
            #expect(answer.status == 200, "\(path)")
            #expect(answer.body == data, "\(path)")
            let digest = try await Subprocess.check("sha256sum", [app.source.appendingPathComponent(path).path])
            let hex = String(digest.stdout.prefix(64))
            #expect(Self.header("ETag", in: answer.headers) == "\"\(hex)\"", "\(path)")
        }
        let page = try await Self.curl(preview.base)
        #expect(Self.header("Content-Type", in: page.headers) == "text/html; charset=utf-8")
        #expect(page.body == app.files["index.html"])
    }

    @Test("a 100 MB video fetched in ranges comes back byte for byte; hot serve-web's peak memory stays under 64 MB")
    func largeVideoInRanges() async throws {
        let source = try makeTemporaryDirectory("served-video")
        let video = source.appendingPathComponent("media/film.mp4")
        try FileManager.default.createDirectory(
            at: video.deletingLastPathComponent(),
            withIntermediateDirectories: true
        )
        try await Subprocess.check("sh", ["-c", "head -c 104857600 /dev/urandom > '\(video.path)'"])
        try Data("<!doctype html><video src=media/film.mp4></video>".utf8).write(
            to: source.appendingPathComponent("index.html")
        )
        let files = try readTree(source)
        let app = try await ServedApp.install(files)
        let preview = try await WebPreview.start(store: app.store)
        defer { preview.stop() }
        let size = 104_857_600
        let part = 8 * 1024 * 1024
        let url = preview.base.appendingPathComponent("media/film.mp4")
        let expected = try FileHandle(forReadingFrom: video)
        defer { try? expected.close() }
        var start = 0
        while start < size {
            let end = min(size, start + part) - 1
            let answer = try await Self.curl(url, ["-H", "Range: bytes=\(start)-\(end)"])
            #expect(answer.status == 206)
            #expect(Self.header("Content-Range", in: answer.headers) == "bytes \(start)-\(end)/\(size)")
            try expected.seek(toOffset: UInt64(start))
            #expect(answer.body == expected.readData(ofLength: end - start + 1), "bytes \(start)-\(end)")
            start = end + 1
        }
        // And whole, in one response.
        let whole = try await Subprocess.check(
            "sh",
            ["-c", "curl -sS --max-time 120 '\(url.absoluteString)' | sha256sum"]
        )
        let local = try await Subprocess.check("sha256sum", [video.path])
        #expect(whole.stdout.prefix(64) == local.stdout.prefix(64))
        let peak = try preview.peakMemory()
        print("web serve: hot serve-web peak memory after 100 MB in ranges and whole: \(peak / 1024) KiB")
        #expect(peak <= 64 * 1024 * 1024)
    }

    @Test("a repeated request with If-None-Match gets 304 and no body")
    func notModified() async throws {
        let app = try await ServedApp.shared()
        let preview = try await WebPreview.start(store: app.store)
        defer { preview.stop() }
        let url = preview.base.appendingPathComponent("assets/index-4f3a.js")
        let first = try await Self.curl(url)
        let tag = try #require(Self.header("ETag", in: first.headers))
        let second = try await Self.curl(url, ["-H", "If-None-Match: \(tag)"])
        #expect(second.status == 304)
        #expect(second.body.isEmpty)
    }

    @Test("a range past the end gets 416 with the size")
    func rangePastEnd() async throws {
        let app = try await ServedApp.shared()
        let preview = try await WebPreview.start(store: app.store)
        defer { preview.stop() }
        let size = try #require(app.files["media/clip.wav"]).count
        let answer = try await Self.curl(
            preview.base.appendingPathComponent("media/clip.wav"),
            ["-H", "Range: bytes=\(size)-"]
        )
        #expect(answer.status == 416)
        #expect(Self.header("Content-Range", in: answer.headers) == "bytes */\(size)")
    }

    @Test("a malformed range gets the whole file")
    func malformedRange() async throws {
        let app = try await ServedApp.shared()
        let preview = try await WebPreview.start(store: app.store)
        defer { preview.stop() }
        let answer = try await Self.curl(
            preview.base.appendingPathComponent("data/config.json"),
            ["-H", "Range: bytes=z-1"]
        )
        #expect(answer.status == 200)
        #expect(answer.body == app.files["data/config.json"])
    }

    @Test("a path that climbs out of the module gets 400, never a file from outside")
    func climbingOut() async throws {
        let app = try await ServedApp.shared()
        let preview = try await WebPreview.start(store: app.store)
        defer { preview.stop() }
        let port = try #require(preview.base.port)
        for target in ["/home/../../etc/passwd", "/home/%2e%2e/%2e%2e/etc/passwd", "/home/assets/../../../x"] {
            let answer = try rawHTTP(
                "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                port: port
            )
            #expect(statusCode(answer) == 400, "\(target): \(answer.prefix(200))")
            #expect(!answer.contains("root:"))
        }
    }

    @Test("a NUL byte gets 400")
    func nulByte() async throws {
        let app = try await ServedApp.shared()
        let preview = try await WebPreview.start(store: app.store)
        defer { preview.stop() }
        let port = try #require(preview.base.port)
        let encoded = try rawHTTP(
            "GET /home/index.html%00.png HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            port: port
        )
        #expect(statusCode(encoded) == 400)
        let raw = try rawHTTP(
            "GET /home/index.html\u{0}.png HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            port: port
        )
        #expect(statusCode(raw) == 400)
    }

    @Test("a connection carries requests until one says close; HTTP/1.0 closes unless it keeps alive")
    func connectionPersistence() async throws {
        let app = try await ServedApp.shared()
        let preview = try await WebPreview.start(store: app.store)
        defer { preview.stop() }
        let port = try #require(preview.base.port)
        let config = try #require(app.files["data/config.json"])
        func answers(_ text: String) -> Int {
            text.components(separatedBy: "HTTP/1.1 ").count - 1
        }
        // Three requests sent at once: the first two kept alive, the third closes in capitals.
        // Header names in any case; the range header still applies.
        let pipelined = try rawHTTP(
            "GET /home/data/config.json HTTP/1.1\r\nHost: x\r\n\r\n"
                + "GET /home/data/config.json HTTP/1.1\r\nHOST: x\r\nrAnGe: bytes=0-3\r\n\r\n"
                + "GET /home/index.html HTTP/1.1\r\nHost: x\r\nCONNECTION: Close\r\n\r\n"
                + "GET /home/index.html HTTP/1.1\r\nHost: x\r\n\r\n",
            port: port
        )
        #expect(answers(pipelined) == 3, "\(pipelined.prefix(400))")
        #expect(pipelined.contains("HTTP/1.1 206 Partial Content\r\n"))
        #expect(pipelined.contains("Content-Range: bytes 0-3/\(config.count)\r\n"))
        #expect(pipelined.hasSuffix(String(decoding: try #require(app.files["index.html"]), as: UTF8.self)))
        // HTTP/1.0 closes after one answer unless it asks for keep-alive (in any case).
        let plain = try rawHTTP(
            "GET /home/index.html HTTP/1.0\r\n\r\nGET /home/index.html HTTP/1.0\r\n\r\n",
            port: port
        )
        #expect(answers(plain) == 1)
        let kept = try rawHTTP(
            "GET /home/index.html HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\nGET /home/index.html HTTP/1.0\r\n\r\n",
            port: port
        )
        #expect(answers(kept) == 2)
        // Not HTTP/1.x, or a request line with a space too many: 400, and the connection closes.
        for line in ["GET /home/index.html HTTP/2.0", "GET  /home/index.html HTTP/1.1", "GET /home/index.html"] {
            let answer = try rawHTTP("\(line)\r\nHost: x\r\n\r\n", port: port)
            #expect(statusCode(answer) == 400, "\(line): \(answer.prefix(200))")
        }
    }

    @Test("an encoded slash gets 400")
    func encodedSlash() async throws {
        let app = try await ServedApp.shared()
        let preview = try await WebPreview.start(store: app.store)
        defer { preview.stop() }
        let port = try #require(preview.base.port)
        let slash = try rawHTTP(
            "GET /home/assets%2Findex-4f3a.js HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            port: port
        )
        #expect(statusCode(slash) == 400)
    }

    @Test("a method other than GET or HEAD gets 405; HEAD gets the headers alone")
    func methods() async throws {
        let app = try await ServedApp.shared()
        let preview = try await WebPreview.start(store: app.store)
        defer { preview.stop() }
        let url = preview.base.appendingPathComponent("index.html")
        for method in ["POST", "PUT", "DELETE"] {
            let answer = try await Self.curl(url, ["-X", method])
            #expect(answer.status == 405, "\(method)")
            #expect(Self.header("Allow", in: answer.headers) == "GET, HEAD")
        }
        let head = try await Self.curl(url, ["-I"])
        #expect(head.status == 200)
        #expect(Self.header("Content-Length", in: head.headers) == String(try #require(app.files["index.html"]).count))
    }

    @Test("an address of another module gets 404 naming why: the app loads it from the network")
    func anotherModule() async throws {
        let app = try await ServedApp.shared()
        let preview = try await WebPreview.start(store: app.store)
        defer { preview.stop() }
        let port = try #require(preview.base.port)
        let other = try #require(URL(string: "http://127.0.0.1:\(port)/promo/index.html"))
        let answer = try await Self.curl(other)
        #expect(answer.status == 404)
        #expect(Self.header("X-Hot-Fallback", in: answer.headers) == "notAModulePage")
        let missing = try await Self.curl(preview.base.appendingPathComponent("not-in-package.js"))
        #expect(missing.status == 404)
        #expect(Self.header("X-Hot-Fallback", in: missing.headers) == "fileMissing")
    }

    @Test("a module the server turned off is not served: 404 naming why")
    func moduleTurnedOff() async throws {
        let app = try await ServedApp.shared()
        let preview = try await WebPreview.start(store: app.store, extra: ["--inactive", "web"])
        defer { preview.stop() }
        let answer = try await Self.curl(preview.base.appendingPathComponent("index.html"))
        #expect(answer.status == 404)
        #expect(Self.header("X-Hot-Fallback", in: answer.headers) == "inactive")
    }
}
