import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

/// `hot sync` against the older servers' formats, over nginx on 127.0.0.1.
@Suite("hot sync with older servers")
struct OlderServerCommandLineTests {
    /// The state `hot status --json` gives each package.
    static func states(_ root: URL) async throws -> [String: String] {
        let status = try await CommandLineTests.run(["status", "--root", root.path, "--json"])
        let document = try JSONDecoder().decode(CommandLineTests.StatusDocument.self, from: Data(status.stdout.utf8))
        return Dictionary(uniqueKeysWithValues: document.packages.map { ($0.id, $0.state) })
    }

    @Test("--format patchlist installs an RSA-signed patch list and refuses one signed by another key")
    func patchList() async throws {
        let server = try await SignedPatchListTests.Server()
        let login = try await server.patch("fix-login", file: "fix-login-1", script: "fixLogin(1)")
        let banner = try await server.patch("banner", file: "banner-1", script: "banner()")
        try server.publish([login, banner])
        let nginx = try await NginxServer.start(root: server.directory)
        let root = try makeTemporaryDirectory("store")
        let publicKey = server.directory.appendingPathComponent("server.pub").path
        let list = nginx.baseURL.appendingPathComponent("patches.json").absoluteString

        let missingKey = try await CommandLineTests.run([
            "sync", "--manifest", list, "--root", root.path, "--format", "patchlist",
        ])
        #expect(missingKey.status != 0)
        #expect(missingKey.stderr.contains("--rsa-key"))

        let synced = try await CommandLineTests.run(
            [
                "sync", "--manifest", list, "--root", root.path, "--format", "patchlist", "--rsa-key", publicKey,
                "--quiet",
            ])
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(
            synced.stdout.split(separator: "\n").sorted() == [
                "banner\tadd\tok\t\(banner["md5"] ?? "")", "fix-login\tadd\tok\t\(login["md5"] ?? "")",
            ]
        )
        let installed = try readTree(root.appendingPathComponent("packages/fix-login/\(login["md5"] ?? "")"))
        #expect(installed == ["main.js": Data("fixLogin(1)".utf8)])

        // The same entries signed by another key: refused whole, nothing changes.
        let other = try await PatchServerKey.make(in: server.directory, name: "other")
        let forged = try await server.patch("fix-login", file: "fix-login-2", script: "steal()", signer: other)
        try server.publish([forged, banner])
        let refused = try await CommandLineTests.run(
            [
                "sync", "--manifest", list, "--root", root.path, "--format", "patchlist", "--rsa-key", publicKey,
                "--quiet",
            ])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("fix-login"))
        #expect(nginx.requestCount(for: "/patches/fix-login-2.zip") == 0)
        #expect(try await Self.states(root) == ["banner": "installed", "fix-login": "installed"])
        #expect(try readTree(root.appendingPathComponent("packages/fix-login/\(login["md5"] ?? "")")) == installed)
        await nginx.stop()
    }

    @Test(
        "--format offline posts the installed modules; an inactive module is disabled with its files kept, then enabled"
    )
    func offlineCheck() async throws {
        let server = try OfflinePackageTests.Server()
        let home = try await server.module("home-1", pages: ["index.html": "home 1"])
        let active: [String: Any] = [
            "moduleId": "10010", "moduleVer": "1", "packageUrl": "/packages/home-1.zip", "packageMD5": home.hex,
        ]
        try server.answer([active])
        let nginx = try await NginxServer.start(
            root: server.directory,
            options: .init(locations: [OfflinePackageTests.checkLocation])
        )
        let root = try makeTemporaryDirectory("store")
        let check = nginx.baseURL.appendingPathComponent("offline/check").absoluteString
        let arguments = [
            "sync", "--manifest", check, "--root", root.path, "--format", "offline", "--app-code", "SomeApp",
            "--app-version", "1.2.0", "--quiet",
        ]

        let incomplete = try await CommandLineTests.run(Array(arguments.dropLast(3)))
        #expect(incomplete.status != 0)
        #expect(incomplete.stderr.contains("--app-code and --app-version"))

        let first = try await CommandLineTests.run(arguments)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout == "10010\tadd\tok\t1\n")
        // nginx answers only a JSON POST there (403 or 415 otherwise).
        #expect(nginx.requestCount(for: "/offline/check") == 1)

        try server.answer([["moduleId": "10010", "isActive": false]])
        let disabled = try await CommandLineTests.run(arguments)
        #expect(disabled.stdout == "10010\tdisable\tok\t1\n", "\(disabled.stderr)")
        #expect(try await Self.states(root) == ["10010": "disabled"])
        #expect(try readTree(root.appendingPathComponent("packages/10010/1")) == ["index.html": Data("home 1".utf8)])
        let resolved = try await CommandLineTests.run(["resolve", "index.html", "--root", root.path])
        #expect(resolved.status != 0)

        try server.answer([active])
        let enabled = try await CommandLineTests.run(arguments)
        #expect(enabled.stdout == "10010\tenable\tok\t1\n", "\(enabled.stderr)")
        #expect(try await Self.states(root) == ["10010": "installed"])
        #expect(nginx.requestCount(for: "/packages/home-1.zip") == 1)
        await nginx.stop()
    }
}
