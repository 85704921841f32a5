import Foundation
import HotArchive
import HotAssets
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import HotVerify
import Testing

/// Headless Chromium, found on `PATH` (`chromium-headless-shell`, Debian's package of that
/// name, or `chromium`) or where `HOT_CHROMIUM` says.
enum HeadlessBrowser {
    static let path: String? = {
        let environment = ProcessInfo.processInfo.environment
        if let named = environment["HOT_CHROMIUM"], FileManager.default.isExecutableFile(atPath: named) {
            return named
        }
        let directories = (environment["PATH"] ?? "/usr/bin").split(separator: ":").map(String.init)
        for name in ["chromium-headless-shell", "chromium"] {
            for directory in directories where FileManager.default.isExecutableFile(atPath: "\(directory)/\(name)") {
                return "\(directory)/\(name)"
            }
        }
        return nil
    }()

    /// The suite runs where a browser is installed, and under `CI=true` whatever happens, so
    /// that CI fails instead of skipping it (`scripts/ensure-deps test` installs one).
    static var suiteRuns: Bool { path != nil || ProcessInfo.processInfo.environment["CI"] == "true" }

    static let skipReason: Comment = """
        no headless Chromium (chromium-headless-shell or chromium on PATH, or HOT_CHROMIUM); \
        scripts/ensure-deps test installs Debian's chromium-headless-shell. Under CI=true its absence fails instead
        """

    /// The page's DOM once it has loaded (its `load` event has run), as `--dump-dom` prints it.
    static func dom(of url: URL) async throws -> String {
        guard let path else {
            throw HotUpdateError(.internalInconsistency, "no headless Chromium: \(skipReason)")
        }
        let profile = try makeTemporaryDirectory("chromium-profile")
        defer { try? FileManager.default.removeItem(at: profile) }
        let output = try await Subprocess.check(
            path,
            [
                "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(profile.path)",
                "--virtual-time-budget=5000", "--dump-dom", url.absoluteString,
            ]
        )
        return output.stdout
    }
}

/// The offline pages in a real browser: headless Chromium opens the page the web resolver
/// maps an online URL to, and the DOM it dumps shows that the page's script ran (it writes
/// into the page), that its style sheet applied and its image loaded, all from the package;
/// before and after a patch update, and online (nginx on 127.0.0.1) once the server disables
/// the module.
@Suite(.enabled(if: HeadlessBrowser.suiteRuns, HeadlessBrowser.skipReason))
struct WebPageBrowserTests {
    /// A 24-bit RGB PNG of `width` × `height`.
    static func png(width: Int, height: Int) -> Data {
        func chunk(_ type: String, _ body: Data) -> Data {
            var data = Data()
            withUnsafeBytes(of: UInt32(body.count).bigEndian) { data.append(contentsOf: $0) }
            let typed = Data(type.utf8) + body
            data.append(typed)
            withUnsafeBytes(of: crc32(typed).bigEndian) { data.append(contentsOf: $0) }
            return data
        }
        var header = Data()
        withUnsafeBytes(of: UInt32(width).bigEndian) { header.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(height).bigEndian) { header.append(contentsOf: $0) }
        header.append(contentsOf: [8, 2, 0, 0, 0])
        // Stored deflate blocks inside a zlib stream: a filter byte and the pixels per row.
        let row = [UInt8](repeating: 0, count: 1) + [UInt8](repeating: 0x80, count: width * 3)
        var raw = Data()
        for _ in 0..<height { raw.append(contentsOf: row) }
        var zlib = Data([0x78, 0x01])
        var offset = 0
        repeat {
            let count = min(65_535, raw.count - offset)
            let last: UInt8 = offset + count == raw.count ? 1 : 0
            zlib.append(last)
            zlib.append(contentsOf: [
                UInt8(count & 0xFF), UInt8(count >> 8), UInt8(~count & 0xFF), UInt8((~count >> 8) & 0xFF),
            ])
            zlib.append(raw[offset..<offset + count])
            offset += count
        } while offset < raw.count
        withUnsafeBytes(of: adler32(raw).bigEndian) { zlib.append(contentsOf: $0) }
        return Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) + chunk("IHDR", header) + chunk("IDAT", zlib)
            + chunk("IEND", Data())
    }

    static func crc32(_ data: Data) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in data {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = (crc >> 1) ^ (crc & 1 == 1 ? 0xEDB8_8320 : 0) }
        }
        return ~crc
    }

    static func adler32(_ data: Data) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in data {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        return (b << 16) | a
    }

    /// A module's pages: the HTML names a style sheet, a script and an image; the script, on
    /// `load`, writes which version it is, the heading's computed colour and the image's size
    /// into the page.
    static func pages(version: String, color: String, image: (width: Int, height: Int)) -> [String: Data] {
        [
            "index.html": Data(
                """
                <!doctype html>
                <html><head><meta charset="utf-8"><title>Home</title>
                <link rel="stylesheet" href="css/style.css"><script src="js/app.js"></script></head>
                <body><h1 id="heading">Home</h1><img id="logo" src="img/logo.png"><p id="proof">the script did not run</p></body></html>
                """.utf8
            ),
            "css/style.css": Data("h1 { color: \(color); }\n".utf8),
            "js/app.js": Data(
                """
                window.addEventListener("load", function () {
                  var image = document.getElementById("logo");
                  var color = getComputedStyle(document.getElementById("heading")).color;
                  document.getElementById("proof").textContent =
                    "script \(version); style " + color + "; image " + image.naturalWidth + "x" + image.naturalHeight;
                });

                """.utf8
            ),
            "img/logo.png": png(width: image.width, height: image.height),
        ]
    }

    /// The text the page's script wrote into `<p id="proof">`.
    static func proof(in dom: String) -> String? {
        guard let start = dom.range(of: "<p id=\"proof\">"),
            let end = dom.range(of: "</p>", range: start.upperBound..<dom.endIndex)
        else { return nil }
        return String(dom[start.upperBound..<end.lowerBound])
    }

    @Test(
        "Chromium loads the local page's script, style and image from the package, before and after a patch update; a disabled module's page loads online"
    )
    func pagesInABrowser() async throws {
        let server = try OfflinePackageTests.Server()
        let verifier = CryptoVerifier()
        let versions = [
            "1": Self.pages(version: "1", color: "rgb(1, 2, 3)", image: (7, 5)),
            "2": Self.pages(version: "2", color: "rgb(4, 5, 6)", image: (9, 4)),
        ]
        let packages = server.directory.appendingPathComponent("packages")
        var md5s: [String: Digest] = [:]
        for (version, files) in versions {
            md5s[version] = try md5(
                of: try await zipFiles(files, to: packages.appendingPathComponent("home-\(version).zip"))
            )
        }
        // The online site, where a disabled module's pages load from.
        try writeTree(
            [
                "online/home/index.html": Data(
                    """
                    <!doctype html>
                    <html><head><meta charset="utf-8"><script src="js/online.js"></script></head>
                    <body><p id="proof">the online script did not run</p></body></html>
                    """.utf8
                ),
                "online/home/js/online.js": Data(
                    """
                    window.addEventListener("load", function () {
                      document.getElementById("proof").textContent = "online page from " + location.host;
                    });

                    """.utf8
                ),
            ],
            under: server.directory
        )
        try server.answer([
            [
                "moduleId": "10010", "moduleVer": "1", "packageUrl": "/packages/home-1.zip",
                "packageMD5": md5s["1"]?.hex ?? "", "mode": 1, "isActive": true,
            ]
        ])
        let nginx = try await NginxServer.start(
            root: server.directory,
            options: .init(locations: [OfflinePackageTests.checkLocation])
        )
        let updater = makeUpdater(root: try makeTemporaryDirectory("store"), using: httpTransport())
        let source = OfflinePackageManifestSource(
            url: nginx.baseURL.appendingPathComponent("offline/check"),
            transport: httpTransport(),
            app: OfflinePackageTests.app,
            snapshot: { try await updater.currentSnapshot() }
        )
        let onlineBase = nginx.baseURL.appendingPathComponent("online/home/", isDirectory: true)
        let page = URL(string: "index.html?tab=2", relativeTo: onlineBase)?.absoluteURL ?? onlineBase
        /// As an app resolves a page: from the store's name index.
        func resolve(inactive: Set<String> = []) async throws -> WebPageLocation {
            let resolver = await WebModuleResolver.make(
                modules: [WebModule(id: "10010", onlineBase: onlineBase)],
                updater: updater,
                inactiveModuleIDs: inactive
            )
            #expect(resolver.answersFromNameIndex)
            return resolver.resolve(page)
        }

        // Version 1, installed in full: the page, its script, style and image come from the package.
        try await updater.sync(from: source).throwIfFailed()
        guard case .local(let first) = try await resolve() else {
            Issue.record("version 1's page did not resolve locally")
            return
        }
        #expect(first.version == "1")
        #expect(first.fileURL.isFileURL)
        let firstDOM = try await HeadlessBrowser.dom(of: first.fileURL)
        #expect(Self.proof(in: firstDOM) == "script 1; style rgb(1, 2, 3); image 7x5", "\(firstDOM)")

        // Version 2 as a patch: the delta from the installed version 1, not the full package.
        let work = try makeTemporaryDirectory("h5-browser-delta")
        for (version, files) in versions { try writeTree(files, under: work.appendingPathComponent(version)) }
        func side(_ version: String) throws -> DeltaWriter.Side {
            DeltaWriter.Side(
                version: version,
                sha256: try verifier.digest(
                    ofFile: packages.appendingPathComponent("home-\(version).zip"),
                    using: .sha256
                ).hex,
                directory: work.appendingPathComponent(version)
            )
        }
        let delta = packages.appendingPathComponent("home-1-2.delta")
        try DeltaWriter.write(
            packageID: "10010",
            base: try side("1"),
            target: try side("2"),
            to: delta,
            verifier: verifier
        )
        try server.answer([
            [
                "moduleId": "10010", "moduleVer": "2", "packageUrl": "/packages/home-2.zip",
                "packageMD5": md5s["2"]?.hex ?? "", "patchUrl": "/packages/home-1-2.delta",
                "patchMD5": try md5(of: delta).hex, "mode": 2, "isActive": true,
            ]
        ])
        let patched = try await updater.sync(from: source)
        try patched.throwIfFailed()
        #expect(patched.packages.first { $0.id == "10010" }?.delta?.baseVersion == "1")
        #expect(patched.deltaFallbacks.isEmpty)
        #expect(nginx.requestCount(for: "/packages/home-1-2.delta") == 1)
        #expect(nginx.requestCount(for: "/packages/home-2.zip") == 0)
        guard case .local(let second) = try await resolve() else {
            Issue.record("version 2's page did not resolve locally")
            return
        }
        #expect(second.version == "2")
        let secondDOM = try await HeadlessBrowser.dom(of: second.fileURL)
        #expect(Self.proof(in: secondDOM) == "script 2; style rgb(4, 5, 6); image 9x4", "\(secondDOM)")
        #expect(nginx.requestCount(for: "/online/home/index.html") == 0)

        // The server disables the module: the page opens online, from nginx.
        try server.answer([["moduleId": "10010", "isActive": false]])
        let check = try await source.check()
        #expect(check.inactiveModuleIDs == ["10010"])
        try await updater.apply(check.manifest).throwIfFailed()
        let online = try await resolve(inactive: check.inactiveModuleIDs)
        #expect(online == .online(page, reason: .inactive))
        let onlineDOM = try await HeadlessBrowser.dom(of: online.url)
        let host = "\(nginx.baseURL.host ?? "127.0.0.1"):\(nginx.baseURL.port ?? 80)"
        #expect(Self.proof(in: onlineDOM) == "online page from \(host)", "\(onlineDOM)")
        #expect(nginx.requestCount(for: "/online/home/index.html") == 1)
        #expect(nginx.requestCount(for: "/online/home/js/online.js") == 1)
        await nginx.stop()
    }
}
