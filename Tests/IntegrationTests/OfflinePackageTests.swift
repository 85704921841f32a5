import Foundation
import HotArchive
import HotAssets
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import HotTransport
import HotVerify
import Testing

/// The H5 offline-package check over nginx on 127.0.0.1: the client POSTs its module
/// versions, nginx answers from a file (its static module refuses POST with 405, which
/// `error_page 405 =200` turns into the answer), the modules install through the `Updater`
/// and the web resolver serves them.
@Suite("Offline-package check over nginx")
struct OfflinePackageTests {
    /// Only a JSON POST to `/offline/check` gets the answer in `answers/check.json`.
    static let checkLocation = NginxServer.Location(
        """
        location = /offline/check {
            if ($request_method != POST) { return 403; }
            if ($http_content_type != "application/json") { return 415; }
            error_page 405 =200 /answers/check.json;
        }
        """
    )

    struct Server {
        let directory: URL

        init() throws {
            directory = try makeTemporaryDirectory("h5-server")
            try writeTree(["offline/check": Data("static files refuse POST".utf8)], under: directory)
        }

        /// Zips a module's pages as `packages/<name>.zip` and returns the archive's MD5.
        func module(_ name: String, pages: [String: String]) async throws -> Digest {
            let archive = try await zipFiles(
                pages.mapValues { Data($0.utf8) },
                to: directory.appendingPathComponent("packages/\(name).zip")
            )
            return try md5(of: archive)
        }

        func answer(_ modules: [[String: Any]]) throws {
            let data = try JSONSerialization.data(
                withJSONObject: ["resultCode": 0, "resultData": modules],
                options: [.sortedKeys]
            )
            try writeTree(["answers/check.json": data], under: directory)
        }

        func answer(raw: String) throws {
            try writeTree(["answers/check.json": Data(raw.utf8)], under: directory)
        }
    }

    static let app = OfflinePackageManifestSource.App(appCode: "SomeApp", appVersion: "1.2.0", platform: "ios")
    static let modules = [
        WebModule(id: "10010", onlineBase: URL(string: "https://m.example.com/home/")!),
        WebModule(id: "10020", onlineBase: URL(string: "https://m.example.com/promo/")!),
    ]

    func source(_ nginx: NginxServer, _ updater: Updater) -> OfflinePackageManifestSource {
        OfflinePackageManifestSource(
            url: nginx.baseURL.appendingPathComponent("offline/check"),
            transport: httpTransport(),
            app: Self.app,
            snapshot: { try await updater.currentSnapshot() }
        )
    }

    /// A server answering with module 10010 version 1 (nginx also answers 500 at
    /// `/offline/broken`), and a store where it is installed.
    func installedHome1() async throws -> (Server, Digest, NginxServer, Updater) {
        let server = try Server()
        let home1 = try await server.module("home-1", pages: ["index.html": "home 1"])
        try server.answer([
            ["moduleId": "10010", "moduleVer": "1", "packageUrl": "/packages/home-1.zip", "packageMD5": home1.hex]
        ])
        let nginx = try await NginxServer.start(
            root: server.directory,
            options: .init(locations: [Self.checkLocation, .status(500, at: "/offline/broken")])
        )
        let updater = makeUpdater(root: try makeTemporaryDirectory("store"), using: httpTransport())
        try await updater.sync(from: source(nginx, updater)).throwIfFailed()
        return (server, home1, nginx, updater)
    }

    func webResolver(_ updater: Updater, inactive: Set<String> = []) async throws -> WebModuleResolver {
        WebModuleResolver(
            modules: Self.modules,
            installed: try await updater.installedPackages(),
            inactiveModuleIDs: inactive
        )
    }

    @Test(
        "full and patch modules install (patch as the full package), disabled ones fall back online, versions are reported"
    )
    func walk() async throws {
        let server = try Server()
        let home1 = try await server.module("home-1.0.4", pages: ["index.html": "home 1.0.4", "js/app.js": "app()"])
        let promo1 = try await server.module("promo-1.0.2", pages: ["index.html": "promo 1.0.2"])
        try server.answer([
            [
                "moduleId": "10010", "moduleVer": "1.0.4", "packageUrl": "/packages/home-1.0.4.zip",
                "packageMD5": home1.hex, "mode": 1, "isActive": true,
            ],
            [
                "moduleId": "10020", "moduleVer": "1.0.2", "packageUrl": "/packages/promo-1.0.2.zip",
                "packageMD5": promo1.hex, "patchUrl": "/packages/promo.patch", "patchMD5": home1.hex, "mode": 2,
                "isActive": true,
            ],
        ])
        let nginx = try await NginxServer.start(root: server.directory, options: .init(locations: [Self.checkLocation]))
        let root = try makeTemporaryDirectory("store")
        let updater = makeUpdater(root: root, using: httpTransport())
        let source = source(nginx, updater)

        let first = try await source.check()
        #expect(first.reported.isEmpty)
        #expect(first.modules.map(\.requestedMode) == [.full, .patch])
        try await updater.apply(first.manifest).throwIfFailed()
        #expect(try await activeVersions(updater) == ["10010": "1.0.4", "10020": "1.0.2"])
        #expect(nginx.requestCount(for: "/packages/promo.patch") == 0)

        let resolver = try await webResolver(updater)
        guard case .local(let page) = resolver.resolve(URL(string: "https://m.example.com/home/js/app.js?v=2#top")!)
        else {
            Issue.record("the installed page did not resolve locally")
            return
        }
        #expect(try String(contentsOf: page.fileURL, encoding: .utf8) == "app()")
        #expect(page.fileURL.query == "v=2")
        #expect(page.fileURL.fragment == "top")
        #expect(page.fileURL.path.hasPrefix(page.readAccessRoot.path + "/"))
        #expect(page.version == "1.0.4")

        // The server disables promo: nothing is downloaded or removed, the store marks it
        // disabled, its pages go online.
        try server.answer([
            [
                "moduleId": "10010", "moduleVer": "1.0.4", "packageUrl": "/packages/home-1.0.4.zip",
                "packageMD5": home1.hex, "mode": 1, "isActive": true,
            ],
            ["moduleId": "10020", "isActive": false],
        ])
        let second = try await source.check()
        #expect(
            second.reported == [
                .init(moduleId: "10010", moduleVer: "1.0.4", isActive: true),
                .init(moduleId: "10020", moduleVer: "1.0.2", isActive: true),
            ]
        )
        #expect(second.inactiveModuleIDs == ["10020"])
        #expect(second.manifest.disabledPackageIDs == ["10020"])
        let report = try await updater.apply(second.manifest)
        #expect(report.packages.filter { $0.change != .unchanged }.map(\.id) == ["10020"])
        #expect(report.packages.first { $0.id == "10020" }?.change == .disable)
        #expect(try await updater.state(of: "10020") == .disabled)
        #expect(try await activeVersions(updater) == ["10010": "1.0.4", "10020": "1.0.2"])
        #expect(try await updater.installedPackages().map(\.id) == ["10010"])
        let promoTree = try readTree(root.appendingPathComponent("packages/10020/1.0.2"))
        #expect(promoTree == ["index.html": Data("promo 1.0.2".utf8)])
        let disabled = try await webResolver(updater, inactive: second.inactiveModuleIDs)
        let promoURL = URL(string: "https://m.example.com/promo/")!
        #expect(disabled.resolve(promoURL) == .online(promoURL, reason: .inactive))
        if case .local = disabled.resolve(URL(string: "https://m.example.com/home/")!) {
        } else {
            Issue.record("the active module stopped resolving locally")
        }
        // The next check reports it inactive; a sync (not only apply) disables it the same way.
        let third = try await source.check()
        #expect(third.reported.last == .init(moduleId: "10020", moduleVer: "1.0.2", isActive: false))
        #expect(try await updater.sync(from: source).changedAnything == false)

        // Activated again at the installed version: enabled without a download.
        try server.answer([
            [
                "moduleId": "10020", "moduleVer": "1.0.2", "packageUrl": "/packages/promo-1.0.2.zip",
                "packageMD5": promo1.hex, "mode": 1, "isActive": true,
            ]
        ])
        let enabled = try await updater.sync(from: source)
        #expect(enabled.packages.map(\.change) == [.enable])
        #expect(try await updater.state(of: "10020") == .installed)
        guard case .local(let promoPage) = try await webResolver(updater).resolve(promoURL) else {
            Issue.record("the enabled module did not resolve locally")
            return
        }
        #expect(try String(contentsOf: promoPage.fileURL, encoding: .utf8) == "promo 1.0.2")
        #expect(nginx.requestCount(for: "/packages/home-1.0.4.zip") == 1)
        #expect(nginx.requestCount(for: "/packages/promo-1.0.2.zip") == 1)
        await nginx.stop()
    }

    @Test("a wrong packageMD5 fails that module and keeps the version installed before")
    func wrongMD5() async throws {
        let (server, home1, nginx, updater) = try await installedHome1()

        _ = try await server.module("home-2", pages: ["index.html": "home 2"])
        try server.answer([
            ["moduleId": "10010", "moduleVer": "2", "packageUrl": "/packages/home-2.zip", "packageMD5": home1.hex]
        ])
        let report = try await updater.sync(from: source(nginx, updater))
        #expect(report.failures.map(\.id) == ["10010"])
        #expect(report.failures.first?.error?.code == .digestMismatch)
        #expect(try await activeVersions(updater) == ["10010": "1"])
        #expect(try await installedTree(updater, "10010") == ["index.html": Data("home 1".utf8)])
        await nginx.stop()
    }

    @Test(
        "a malformed answer or a server error fails the check, a malformed module is refused alone, and nothing changes"
    )
    func badAnswers() async throws {
        let (server, _, nginx, updater) = try await installedHome1()

        try server.answer(raw: "<html>maintenance</html>")
        let refusal = await #expect(throws: HotUpdateError.self) {
            try await updater.sync(from: source(nginx, updater))
        }
        #expect(refusal?.code == .manifestInvalid)
        // A malformed module fails alone: it is refused, nothing else changes.
        try server.answer(raw: #"{"resultData": [{"moduleId": "10010", "packageUrl": "x.zip"}]}"#)
        let check = try await source(nginx, updater).check()
        #expect(check.refused.map(\.packageID) == ["10010"])
        #expect(check.manifest.packages.isEmpty)
        try await updater.apply(check.manifest).throwIfFailed()
        var broken = source(nginx, updater)
        broken.url = nginx.baseURL.appendingPathComponent("offline/broken")
        let error = await #expect(throws: HotUpdateError.self) { try await updater.sync(from: broken) }
        #expect(error?.code == .httpStatus)
        #expect(try await activeVersions(updater) == ["10010": "1"])
        #expect(try await installedTree(updater, "10010") == ["index.html": Data("home 1".utf8)])
        await nginx.stop()
    }

    @Test(
        "mode patch: the delta from the installed version installs, a patch that fails its MD5 falls back to the full package and the report says so"
    )
    func patchMode() async throws {
        let (server, _, nginx, updater) = try await installedHome1()
        let verifier = CryptoVerifier()
        let pages: [String: [String: String]] = [
            "1": ["index.html": "home 1"],
            "2": ["index.html": "home 2", "js/app.js": String(repeating: "app(); ", count: 2_000)],
            "3": ["index.html": "home 3", "js/app.js": String(repeating: "app(); ", count: 2_000)],
        ]
        /// Zips version `to`, writes the delta from `from` and answers in patch mode.
        func publish(_ to: String, from: String, patchMD5: String? = nil) async throws -> (zip: String, delta: String) {
            let fullMD5 = try await server.module("home-\(to)", pages: pages[to] ?? [:])
            let work = try makeTemporaryDirectory("h5-delta")
            try writeTree((pages[from] ?? [:]).mapValues { Data($0.utf8) }, under: work.appendingPathComponent("base"))
            try writeTree((pages[to] ?? [:]).mapValues { Data($0.utf8) }, under: work.appendingPathComponent("target"))
            let packages = server.directory.appendingPathComponent("packages")
            let delta = packages.appendingPathComponent("home-\(from)-\(to).delta")
            try DeltaWriter.write(
                packageID: "10010",
                base: DeltaWriter.Side(
                    version: from,
                    sha256: try verifier.digest(
                        ofFile: packages.appendingPathComponent("home-\(from).zip"),
                        using: .sha256
                    ).hex,
                    directory: work.appendingPathComponent("base")
                ),
                target: DeltaWriter.Side(
                    version: to,
                    sha256: try verifier.digest(
                        ofFile: packages.appendingPathComponent("home-\(to).zip"),
                        using: .sha256
                    ).hex,
                    directory: work.appendingPathComponent("target")
                ),
                to: delta,
                verifier: verifier
            )
            try server.answer([
                [
                    "moduleId": "10010", "moduleVer": to, "packageUrl": "/packages/home-\(to).zip",
                    "packageMD5": fullMD5.hex,
                    "patchUrl": "/packages/\(delta.lastPathComponent)",
                    "patchMD5": patchMD5 ?? (try md5(of: delta)).hex, "mode": 2, "isActive": true,
                ],
                // The seed's sample: an inactive module with a patchMD5 that is not one refuses nothing.
                ["moduleId": "10020", "patchMD5": "", "mode": 2, "isActive": false],
            ])
            return ("/packages/home-\(to).zip", "/packages/\(delta.lastPathComponent)")
        }

        let two = try await publish("2", from: "1")
        let report = try await updater.sync(from: source(nginx, updater))
        try report.throwIfFailed()
        #expect(report.packages.first { $0.id == "10010" }?.delta?.baseVersion == "1")
        #expect(report.deltaFallbacks.isEmpty)
        #expect(nginx.requestCount(for: two.delta) == 1)
        #expect(nginx.requestCount(for: two.zip) == 0)
        #expect(try await activeVersions(updater) == ["10010": "2"])
        #expect(try await installedTree(updater, "10010") == (pages["2"] ?? [:]).mapValues { Data($0.utf8) })

        let three = try await publish("3", from: "2", patchMD5: String(repeating: "0", count: 32))
        let fallback = try await updater.sync(from: source(nginx, updater))
        try fallback.throwIfFailed()
        #expect(fallback.deltaFallbacks.first?.deltaFallback?.code == .digestMismatch)
        #expect(nginx.requestCount(for: three.delta) == 1)
        #expect(nginx.requestCount(for: three.zip) == 1)
        #expect(try await installedTree(updater, "10010") == (pages["3"] ?? [:]).mapValues { Data($0.utf8) })
        await nginx.stop()
    }
}
