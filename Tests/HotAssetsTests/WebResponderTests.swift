import Foundation
import HotAssets
import HotCore
import HotTestServers
import HotTesting
import Testing

/// The responder over a store with a web module installed through the engine (real files,
/// the engine's file lists): what a scheme handler and `hot serve-web` send.
@Suite("Web responder")
struct WebResponderTests {
    static let base = "https://m.example.com/home/"
    static let module = WebModule(id: "web", onlineBase: URL(string: base)!)
    static let video = String((0..<300_000).map { Character(UnicodeScalar(UInt8(65 + $0 % 26))) })
    static let pages: [String: String] = [
        "index.html": "<!doctype html><title>home</title>",
        "assets/app-4f3a.js": "export const answer = 42;\n",
        "assets/style.css": "h1 { color: red }\n",
        "data/config.json": #"{"ok": true}"#,
        "media/clip.webm": video,
        "docs/index.html": "docs",
        "docs/empty/readme.txt": "no index here",
        "file.unknownext": "?",
        "UPPER.PNG": "png",
    ]

    /// A responder over a store holding the module (and `extra` packages), and the store.
    func withResponder(
        inactive: Set<String> = [],
        _ body: (WebResponder, EngineStore) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            try await store.install("web", files: Self.pages)
            try await store.install("other", files: ["index.html": "other"])
            let other = WebModule(id: "other", onlineBase: URL(string: "https://m.example.com/other/")!)
            let missing = WebModule(id: "absent", onlineBase: URL(string: "https://m.example.com/absent/")!)
            let resolver = await WebModuleResolver.make(
                modules: [Self.module, other, missing],
                updater: store.relaunch(),
                inactiveModuleIDs: inactive
            )
            try await body(WebResponder(resolver: resolver), store)
        }
    }

    func response(
        _ responder: WebResponder,
        _ path: String,
        method: String = "GET",
        headers: [String: String] = [:]
    ) throws -> WebResponse {
        let url = try #require(URL(string: Self.base + path))
        guard
            case .response(let response) = responder.respond(to: WebRequest(method: method, url: url, headers: headers))
        else {
            Issue.record("\(path) was sent to the network")
            throw HotUpdateError(.notFound, "no response", subject: path)
        }
        return response
    }

    func body(_ response: WebResponse) throws -> String {
        String(decoding: try response.body.data(), as: UTF8.self)
    }

    @Test("each file comes with its type, length, recorded digest as ETag, cache policy, and its exact bytes")
    func servesFiles() async throws {
        try await withResponder { responder, store in
            let list = try FileList.read(
                from: store.root.appendingPathComponent("filelists/web").appendingPathComponent(
                    try #require(
                        FileManager.default.contentsOfDirectory(
                            atPath: store.root.appendingPathComponent("filelists/web").path
                        ).first
                    )
                )
            )
            let digests = Dictionary(uniqueKeysWithValues: list.files.map { ($0.path, $0.sha256) })
            let expected: [(String, String, String)] = [
                ("", "index.html", "text/html; charset=utf-8"),
                ("assets/app-4f3a.js", "assets/app-4f3a.js", "text/javascript; charset=utf-8"),
                ("assets/style.css", "assets/style.css", "text/css; charset=utf-8"),
                ("data/config.json?x=1", "data/config.json", "application/json; charset=utf-8"),
                ("docs/", "docs/index.html", "text/html; charset=utf-8"),
                ("file.unknownext", "file.unknownext", "application/octet-stream"),
                ("UPPER.PNG", "UPPER.PNG", "image/png"),
            ]
            for (path, file, type) in expected {
                let answer = try response(responder, path)
                #expect(answer.status == 200, "\(path)")
                #expect(answer.header("content-type") == type, "\(path)")
                #expect(try body(answer) == Self.pages[file], "\(path)")
                #expect(answer.header("Content-Length") == String(Self.pages[file]?.utf8.count ?? -1), "\(path)")
                #expect(answer.header("ETag") == "\"\(digests[file] ?? "none")\"", "\(path)")
                #expect(answer.header("Cache-Control") == "no-cache", "\(path)")
                #expect(answer.header("Accept-Ranges") == "bytes", "\(path)")
            }
        }
    }

    @Test("the module's cache policy sets Cache-Control: documents revalidate, hashed assets are kept")
    func cachePolicy() async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            try await store.install("web", files: Self.pages)
            var module = Self.module
            module.cachePolicy = .hashedAssets(maxAge: 600)
            let responder = WebResponder(
                resolver: await WebModuleResolver.make(modules: [module], updater: store.relaunch())
            )
            #expect(try response(responder, "").header("Cache-Control") == "no-cache")
            #expect(try response(responder, "assets/app-4f3a.js").header("Cache-Control") == "max-age=600, immutable")
        }
    }

    @Test("If-None-Match with the file's tag gets 304 and no body; another tag gets the file")
    func notModified() async throws {
        try await withResponder { responder, _ in
            let tag = try #require(try response(responder, "assets/app-4f3a.js").header("ETag"))
            for header in [tag, "W/\(tag)", "\"other\", \(tag)", "*"] {
                let again = try response(responder, "assets/app-4f3a.js", headers: ["If-None-Match": header])
                #expect(again.status == 304, "\(header)")
                #expect(again.body.count == 0)
                #expect(again.header("ETag") == tag)
            }
            let changed = try response(responder, "assets/app-4f3a.js", headers: ["if-none-match": "\"0123\""])
            #expect(changed.status == 200)
            #expect(try body(changed) == Self.pages["assets/app-4f3a.js"])
        }
    }

    @Test("one range gets 206 with its bytes and Content-Range; open and suffix ranges too")
    func ranges() async throws {
        try await withResponder { responder, _ in
            let video = Array(Self.video.utf8)
            let size = video.count
            let cases: [(String, Range<Int>)] = [
                ("bytes=0-99", 0..<100), ("bytes=1000-", 1000..<size), ("bytes=-500", (size - 500)..<size),
                ("bytes=299990-400000", 299_990..<size), ("bytes=0-0", 0..<1), ("bytes=-999999", 0..<size),
            ]
            for (header, range) in cases {
                let answer = try response(responder, "media/clip.webm", headers: ["Range": header])
                #expect(answer.status == 206, "\(header)")
                #expect(answer.header("Content-Type") == "video/webm")
                #expect(
                    answer.header("Content-Range") == "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(size)",
                    "\(header)"
                )
                #expect(answer.header("Content-Length") == String(range.count), "\(header)")
                #expect(try answer.body.data() == Data(video[range]), "\(header)")
            }
        }
    }

    @Test("a range past the end gets 416 naming the size; an empty suffix too")
    func unsatisfiableRange() async throws {
        try await withResponder { responder, _ in
            let size = Self.video.utf8.count
            for header in ["bytes=\(size)-", "bytes=999999999-", "bytes=-0"] {
                let answer = try response(responder, "media/clip.webm", headers: ["Range": header])
                #expect(answer.status == 416, "\(header)")
                #expect(answer.header("Content-Range") == "bytes */\(size)", "\(header)")
            }
        }
    }

    @Test("a malformed range, several ranges, or an If-Range of another version get the whole file")
    func ignoredRanges() async throws {
        try await withResponder { responder, _ in
            let size = Self.video.utf8.count
            for header in [
                "bytes=abc-def", "bytes=5-2", "items=0-9", "bytes=0-9,20-29", "bytes=--1", "bytes=", "bytes=1-2-3",
            ] {
                let answer = try response(responder, "media/clip.webm", headers: ["Range": header])
                #expect(answer.status == 200, "\(header)")
                #expect(answer.header("Content-Range") == nil, "\(header)")
                #expect(answer.body.count == Int64(size), "\(header)")
            }
            let tag = try #require(try response(responder, "media/clip.webm").header("ETag"))
            let current = try response(responder, "media/clip.webm", headers: ["Range": "bytes=0-9", "If-Range": tag])
            #expect(current.status == 206)
            let stale = try response(
                responder,
                "media/clip.webm",
                headers: ["Range": "bytes=0-9", "If-Range": "\"old\""]
            )
            #expect(stale.status == 200)
        }
    }

    @Test("HEAD gets the headers of GET and no body")
    func head() async throws {
        try await withResponder { responder, _ in
            let get = try response(responder, "data/config.json")
            let head = try response(responder, "data/config.json", method: "HEAD")
            #expect(head.status == 200)
            #expect(head.headers == get.headers)
            #expect(head.body.count == 0)
            #expect(try head.body.data().isEmpty)
        }
    }

    @Test("a method other than GET or HEAD gets 405 with Allow")
    func otherMethods() async throws {
        try await withResponder { responder, _ in
            for method in ["POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE"] {
                let answer = try response(responder, "index.html", method: method)
                #expect(answer.status == 405, "\(method)")
                #expect(answer.header("Allow") == "GET, HEAD")
            }
        }
    }

    @Test("a directory named without its final slash is redirected; a directory is never listed")
    func directories() async throws {
        try await withResponder { responder, _ in
            let redirect = try response(responder, "docs?tab=2")
            #expect(redirect.status == 301)
            #expect(redirect.header("Location") == "docs/?tab=2")
            let url = try #require(URL(string: Self.base + "docs/empty/"))
            guard case .network(_, let reason) = responder.respond(to: WebRequest(url: url)) else {
                Issue.record("a directory without an index file was answered")
                return
            }
            #expect(reason == .fileMissing)
        }
    }

    @Test("a path that climbs out of the module gets 400")
    func climbingOut() async throws {
        try await withResponder { responder, _ in
            for path in ["%2E%2E/other/index.html", "..%2Fother/index.html", "assets/..", "a/%2e%2e/%2e%2e/x"] {
                let answer = try response(responder, path)
                #expect(answer.status == 400, "\(path)")
                #expect(try body(answer).contains("leaves the module"))
            }
        }
    }

    @Test("an encoded slash gets 400")
    func encodedSlash() async throws {
        try await withResponder { responder, _ in
            for path in ["assets%2Fapp-4f3a.js", "assets%2fstyle.css", "data%5Cconfig.json"] {
                let status = try response(responder, path).status
                #expect(status == 400, "\(path)")
            }
        }
    }

    @Test("a NUL byte gets 400")
    func nulByte() async throws {
        try await withResponder { responder, _ in
            for path in ["index.html%00.png", "%00", "assets/app-4f3a.js%00"] {
                let status = try response(responder, path).status
                #expect(status == 400, "\(path)")
            }
        }
    }

    @Test("a link out of the module is not served")
    func linkOut() async throws {
        try await withResponder { responder, store in
            let page = try response(responder, "index.html")
            #expect(page.status == 200)
            let outside = store.root.deletingLastPathComponent().appendingPathComponent("secret.txt")
            try Data("secret".utf8).write(to: outside)
            let url = try #require(URL(string: Self.base))
            guard case .local(let local) = responder.resolver.resolve(url) else {
                Issue.record("the index is not local")
                return
            }
            try FileManager.default.createSymbolicLink(
                at: local.readAccessRoot.appendingPathComponent("leak.txt"),
                withDestinationURL: outside
            )
            let leak = try #require(URL(string: Self.base + "leak.txt"))
            switch responder.respond(to: WebRequest(url: leak)) {
            case .response(let answer):
                #expect(answer.status == 400)
                #expect(try body(answer) != "secret")
            case .network(_, let reason):
                #expect(reason == .fileMissing || reason == .unsafePath)
            }
        }
    }

    @Test("another module's address, a module not installed or turned off go to the network with the reason")
    func notThisModule() async throws {
        try await withResponder(inactive: ["other"]) { responder, _ in
            let cases: [(String, OnlineFallbackReason)] = [
                ("https://m.example.com/elsewhere/index.html", .notAModulePage),
                ("https://cdn.example.com/home/index.html", .notAModulePage),
                ("https://m.example.com/absent/index.html", .notInstalled),
                ("https://m.example.com/other/index.html", .inactive),
                ("https://m.example.com/home/missing.js", .fileMissing),
            ]
            for (address, expected) in cases {
                let url = try #require(URL(string: address))
                guard case .network(let online, let reason) = responder.respond(to: WebRequest(url: url)) else {
                    Issue.record("\(address) was answered from the package")
                    continue
                }
                #expect(online == url)
                #expect(reason == expected, "\(address)")
            }
        }
    }

    @Test("a body is read in chunks of the size asked, never whole, and chunk(at:) reads any part")
    func streaming() async throws {
        try await withResponder { responder, _ in
            let answer = try response(responder, "media/clip.webm")
            var chunks: [Int] = []
            var bytes = Data()
            try answer.body.stream(chunkSize: 65_536) { chunk in
                chunks.append(chunk.count)
                bytes.append(contentsOf: chunk)
            }
            #expect(chunks.count == 5)
            #expect(chunks.allSatisfy { $0 <= 65_536 })
            #expect(bytes == Data(Self.video.utf8))
            let part = try answer.body.chunk(at: 299_990, maxLength: 100)
            #expect(part == Data(Self.video.utf8.suffix(10)))
            #expect(try answer.body.chunk(at: 300_000, maxLength: 100).isEmpty)
        }
    }

    @Test("without its file list a file gets a weak ETag of size, time and inode, and still 304")
    func weakTag() async throws {
        try await withResponder { responder, store in
            try store.removeFileLists()
            let fresh = WebResponder(
                resolver: await WebModuleResolver.make(modules: [Self.module], updater: store.relaunch())
            )
            let tag = try #require(try response(fresh, "index.html").header("ETag"))
            #expect(tag.hasPrefix("W/\""))
            #expect(try response(fresh, "index.html", headers: ["If-None-Match": tag]).status == 304)
            // A weak tag never satisfies If-Range: the whole file is sent.
            #expect(try response(fresh, "index.html", headers: ["Range": "bytes=0-1", "If-Range": tag]).status == 200)
            _ = responder
        }
    }

    @Test("the content type table covers what bundlers emit")
    func contentTypes() {
        let expected = [
            "a.html": "text/html; charset=utf-8", "a.js": "text/javascript; charset=utf-8",
            "a.mjs": "text/javascript; charset=utf-8", "a.css": "text/css; charset=utf-8",
            "a.json": "application/json; charset=utf-8", "a.js.map": "application/json; charset=utf-8",
            "a.wasm": "application/wasm", "a.svg": "image/svg+xml; charset=utf-8", "a.png": "image/png",
            "a.jpg": "image/jpeg", "a.webp": "image/webp", "a.avif": "image/avif", "a.gif": "image/gif",
            "a.ico": "image/x-icon", "a.woff": "font/woff", "a.woff2": "font/woff2", "a.ttf": "font/ttf",
            "a.otf": "font/otf", "a.mp3": "audio/mpeg", "a.mp4": "video/mp4", "a.webm": "video/webm",
            "a.txt": "text/plain; charset=utf-8", "site.webmanifest": "application/manifest+json; charset=utf-8",
            "noextension": "application/octet-stream", "dir.d/file": "application/octet-stream",
            "a.JS": "text/javascript; charset=utf-8",
        ]
        for (path, type) in expected { #expect(WebContentType.forPath(path) == type, "\(path)") }
    }

    @Test("a page's address under a scheme handler keeps its host, path, query and fragment")
    func schemeAddress() async throws {
        try await withResponder { responder, _ in
            let url = try #require(URL(string: Self.base + "index.html?x=1#top"))
            guard case .local(let page) = responder.resolver.resolve(url) else {
                Issue.record("not local")
                return
            }
            #expect(page.url(scheme: "app").absoluteString == "app://m.example.com/home/index.html?x=1#top")
            #expect(page.onlineURL == url)
        }
    }
}

/// The loopback server over the responder, through its library API.
@Suite("Web preview server")
struct WebPreviewServerTests {
    @Test("it serves the module at its online path on a free port, logs each request, and run() returns after stop()")
    func servesAndStops() async throws {
        try await WebResponderTests().withResponder { responder, _ in
            let lines = Locked<[String]>([])
            let server = try WebPreviewServer(responder: responder, port: 0) { line in
                lines.withLock { $0.append(line) }
            }
            #expect(server.port > 0)
            let ended = Locked(false)
            let thread = Thread {
                server.run()
                ended.withLock { $0 = true }
            }
            thread.start()
            let answer = try Loopback.exchange(
                "GET /home/data/config.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                port: server.port
            )
            #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(answer.prefix(200))")
            #expect(answer.hasSuffix(#"{"ok": true}"#))
            let missing = try Loopback.exchange(
                "GET /home/no-such-file.js HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                port: server.port
            )
            #expect(missing.hasPrefix("HTTP/1.1 404 "), "\(missing.prefix(200))")
            #expect(missing.contains("X-Hot-Fallback: fileMissing"), "\(missing.prefix(400))")
            let logged = lines.withLock { $0 }
            #expect(logged.count == 2 && logged.first == "GET /home/data/config.json 200", "\(logged)")
            #expect(logged.last?.hasPrefix("GET /home/no-such-file.js 404 (fileMissing") == true, "\(logged)")
            server.stop()
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline, !ended.withLock({ $0 }) {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(ended.withLock { $0 }, "run() did not return after stop()")
            #expect(throws: (any Error).self) { try Loopback.connect(port: server.port, timeout: 1) }
        }
    }
}
