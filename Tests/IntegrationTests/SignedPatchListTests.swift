import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import HotTransport
import HotVerify
import Testing

/// The RSA-signed patch list over nginx on 127.0.0.1, with keys and signatures made by
/// `openssl` and patches zipped by `zip`, installed through the `Updater`.
@Suite("Signed patch list over nginx")
struct SignedPatchListTests {
    /// A patch server's directory: zips under `patches/`, the list at `patches.json`.
    struct Server {
        let directory: URL
        let key: PatchServerKey

        init() async throws {
            directory = try makeTemporaryDirectory("patch-server")
            key = try await PatchServerKey.make(in: directory, name: "server")
        }

        /// Zips `script` as `patches/<name>.zip` and returns its list entry, signed by `signer`.
        func patch(
            _ id: String,
            file name: String,
            script: String,
            signer: PatchServerKey? = nil
        ) async throws
            -> [String: String]
        {
            let archive = try await zipFiles(
                ["main.js": Data(script.utf8)],
                to: directory.appendingPathComponent("patches/\(name).zip")
            )
            let digest = try md5(of: archive)
            return [
                "patchId": id, "url": "patches/\(name).zip", "md5": digest.hex,
                "signature": try await (signer ?? key).sign(digest),
            ]
        }

        func publish(_ entries: [[String: String]]) throws {
            try JSONSerialization.data(withJSONObject: entries, options: [.sortedKeys])
                .write(to: directory.appendingPathComponent("patches.json"))
        }

        func publish(raw: String) throws {
            try Data(raw.utf8).write(to: directory.appendingPathComponent("patches.json"))
        }
    }

    func source(_ server: NginxServer, keys: [PublicKey]) -> SignedPatchListManifestSource {
        SignedPatchListManifestSource(
            url: server.baseURL.appendingPathComponent("patches.json"),
            transport: httpTransport(),
            verifier: CryptoVerifier(),
            trustedKeys: keys
        )
    }

    /// A server listing fix-login v1, nginx serving it, and a store where v1 is installed.
    func installedFirstVersion() async throws
        -> (Server, [String: String], NginxServer, Updater, SignedPatchListManifestSource)
    {
        let server = try await Server()
        let v1 = try await server.patch("fix-login", file: "fix-login-1", script: "fixLogin(1)")
        try server.publish([v1])
        let nginx = try await NginxServer.start(root: server.directory)
        let updater = makeUpdater(root: try makeTemporaryDirectory("store"), using: httpTransport())
        let source = source(nginx, keys: [server.key.publicKey])
        try await updater.sync(from: source).throwIfFailed()
        return (server, v1, nginx, updater, source)
    }

    @Test(
        "a correctly signed list installs every patch; an unchanged list downloads nothing; a dropped patch is removed"
    )
    func installs() async throws {
        let server = try await Server()
        let login = try await server.patch("fix-login", file: "fix-login-1", script: "fixLogin(1)")
        let feed = try await server.patch("fix-feed", file: "fix-feed-1", script: "fixFeed(1)")
        try server.publish([login, feed])
        let nginx = try await NginxServer.start(root: server.directory)
        let root = try makeTemporaryDirectory("store")
        let updater = makeUpdater(root: root, using: httpTransport())
        let source = source(nginx, keys: [server.key.publicKey])

        let report = try await updater.sync(from: source)
        #expect(report.failures.isEmpty, "\(report.failures.map { $0.error?.detailedDescription() ?? "" })")
        #expect(try await activeVersions(updater) == ["fix-login": login["md5"], "fix-feed": feed["md5"]])
        #expect(try await installedTree(updater, "fix-login") == ["main.js": Data("fixLogin(1)".utf8)])
        #expect(try await installedTree(updater, "fix-feed") == ["main.js": Data("fixFeed(1)".utf8)])

        let again = try await updater.sync(from: source)
        #expect(!again.changedAnything)
        #expect(nginx.requestCount(for: "/patches/fix-login-1.zip") == 1)

        try server.publish([feed])
        let dropped = try await updater.sync(from: source)
        #expect(dropped.failures.isEmpty)
        #expect(try await activeVersions(updater) == ["fix-feed": feed["md5"]])
        await nginx.stop()
    }

    @Test("the patches' verified key ids are reported, and a second trusted key is accepted (key rotation)")
    func rotation() async throws {
        let server = try await Server()
        let newKey = try await PatchServerKey.make(in: server.directory, name: "next")
        let login = try await server.patch("fix-login", file: "fix-login-1", script: "fixLogin(1)", signer: newKey)
        try server.publish([login])
        let nginx = try await NginxServer.start(root: server.directory)
        let keys = [server.key.publicKey, newKey.publicKey]

        let manifest = try await source(nginx, keys: keys).fetchManifest()
        #expect(manifest.packages.map(\.id) == ["fix-login"])
        let data = try Data(contentsOf: server.directory.appendingPathComponent("patches.json"))
        let patches = try source(nginx, keys: keys).verifiedPatches(in: data)
        #expect(patches.map(\.keyID) == [try CryptoVerifier().keyID(of: newKey.publicKey)])

        let error = await #expect(throws: HotUpdateError.self) {
            try await source(nginx, keys: [server.key.publicKey]).fetchManifest()
        }
        #expect(error?.code == .signatureInvalid)
        await nginx.stop()
    }

    /// Tampered lists: each is refused whole, nothing is downloaded, and the installed patch
    /// stays active and intact.
    enum Tamper: String, CaseIterable, CustomTestStringConvertible {
        case md5SwappedForAnotherPatch, signatureByteFlipped, signatureMissing, signedByUnknownKey, signatureNotBase64
        var testDescription: String { rawValue }
    }

    @Test("a tampered signature refuses the whole list and keeps the installed patch", arguments: Tamper.allCases)
    func tampered(_ tamper: Tamper) async throws {
        let (server, v1, nginx, updater, source) = try await installedFirstVersion()

        let stranger = try await PatchServerKey.make(in: server.directory, name: "stranger")
        var v2 = try await server.patch("fix-login", file: "fix-login-2", script: "evil()")
        let other = try await server.patch("fix-feed", file: "fix-feed-1", script: "fixFeed(1)")
        switch tamper {
        case .md5SwappedForAnotherPatch: v2["signature"] = v1["signature"]
        case .signatureByteFlipped:
            let encoded = try #require(v2["signature"])
            var bytes = try #require(Data(base64Encoded: encoded))
            bytes[17] ^= 0x80
            v2["signature"] = bytes.base64EncodedString()
        case .signatureMissing: v2["signature"] = nil
        case .signedByUnknownKey:
            v2 = try await server.patch("fix-login", file: "fix-login-2", script: "evil()", signer: stranger)
        case .signatureNotBase64: v2["signature"] = "***"
        }
        try server.publish([other, v2])

        let error = await #expect(throws: HotUpdateError.self) { try await updater.sync(from: source) }
        #expect(error?.code == .signatureInvalid)
        #expect(error?.packageID == "fix-login")
        #expect(nginx.requestCount(for: "/patches/fix-login-2.zip") == 0)
        #expect(nginx.requestCount(for: "/patches/fix-feed-1.zip") == 0)
        #expect(try await activeVersions(updater) == ["fix-login": v1["md5"]])
        #expect(try await installedTree(updater, "fix-login") == ["main.js": Data("fixLogin(1)".utf8)])
        await nginx.stop()
    }

    @Test("a correctly signed md5 with a substituted file fails that patch on its digest; the old version stays")
    func substitutedFile() async throws {
        let (server, v1, nginx, updater, source) = try await installedFirstVersion()

        let v2 = try await server.patch("fix-login", file: "fix-login-2", script: "fixLogin(2)")
        try await zipFiles(
            ["main.js": Data("evil()".utf8)],
            to: server.directory.appendingPathComponent("patches/fix-login-2.zip")
        )
        try server.publish([v2])

        let report = try await updater.sync(from: source)
        let failure = try #require(report.failures.first)
        #expect(failure.id == "fix-login")
        #expect(failure.error?.code == .digestMismatch)
        #expect(try await activeVersions(updater) == ["fix-login": v1["md5"]])
        #expect(try await installedTree(updater, "fix-login") == ["main.js": Data("fixLogin(1)".utf8)])
        #expect(try await updater.currentSnapshot().packages["fix-login"]?.state == .failed)
        await nginx.stop()
    }

    @Test(
        "malformed lists are refused with manifestInvalid and change nothing",
        arguments: [
            "not json",
            #"{"list": []}"#,
            #"[{"url": "patches/a.zip", "md5": "\#(String(repeating: "ab", count: 16))", "signature": "AA=="}]"#,
            #"[{"patchId": "../a", "url": "patches/a.zip", "md5": "\#(String(repeating: "ab", count: 16))", "signature": "AA=="}]"#,
            #"[{"patchId": "a", "md5": "\#(String(repeating: "ab", count: 16))", "signature": "AA=="}]"#,
            #"[{"patchId": "a", "url": "patches/a.zip", "md5": "abc", "signature": "AA=="}]"#,
            #"[{"patchId": "a", "url": "patches/a.zip", "signature": "AA=="}]"#,
        ]
    )
    func malformed(body: String) async throws {
        let (server, v1, nginx, updater, source) = try await installedFirstVersion()

        try server.publish(raw: body)
        let error = await #expect(throws: HotUpdateError.self) { try await updater.sync(from: source) }
        #expect(error?.code == .manifestInvalid)
        #expect(try await activeVersions(updater) == ["fix-login": v1["md5"]])
        await nginx.stop()
    }

    @Test("a list larger than the cap is cut off with byteLimitExceeded")
    func oversizedList() async throws {
        let server = try await Server()
        let v1 = try await server.patch("fix-login", file: "fix-login-1", script: "fixLogin(1)")
        try server.publish(Array(repeating: v1, count: 200))
        let nginx = try await NginxServer.start(root: server.directory)
        var source = source(nginx, keys: [server.key.publicKey])
        source.maxBytes = 4096
        let error = await #expect(throws: HotUpdateError.self) { try await source.fetchManifest() }
        #expect(error?.code == .byteLimitExceeded)
        await nginx.stop()
    }
}
