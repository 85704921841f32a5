import Foundation
import HotCore
import HotTestServers
import Testing

/// `hot sign --key pkcs11:…`: a repository signed by keys that stay in a SoftHSM2 token,
/// verified and installed over nginx with the public keys the token exported.
@Suite("hot sign with keys in a PKCS#11 token")
struct PKCS11CommandLineTests {
    /// Every regular file under `directory`, by relative path.
    static func files(under directory: URL) throws -> [String: Data] {
        var files: [String: Data] = [:]
        guard
            let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey])
        else { return files }
        for case let url as URL in walker
        where (try? url.resourceValues(forKeys: [.isRegularFileKey]))?.isRegularFile == true {
            files[String(url.path.dropFirst(directory.path.count))] = try Data(contentsOf: url)
        }
        return files
    }

    /// Whether `data` holds a private key as PEM or as an Ed25519 PKCS#8 DER.
    static func holdsPrivateKey(_ data: Data) -> Bool {
        let ed25519PKCS8: [UInt8] = [
            0x30, 0x2E, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x70, 0x04, 0x22,
        ]
        return data.range(of: Data("PRIVATE KEY-----".utf8)) != nil || data.range(of: Data(ed25519PKCS8)) != nil
    }

    @Test(
        "signed by an Ed25519 and an RSA key in the token: verify accepts it, sync installs it; a wrong PIN changes nothing"
    )
    func signVerifySync() async throws {
        let token = try await SoftHSMToken.shared()
        let work = try makeTemporaryDirectory("pkcs11")
        let source = work.appendingPathComponent("source")
        let tree = ["index.html": Data("<!doctype html>signed in a token".utf8), "app.js": noise(20_000, seed: 11)]
        try writeTree(tree, under: source)
        let repository = work.appendingPathComponent("repo")
        let packed = try await CommandLineTests.run([
            "pack", source.path, "--id", "web", "--version", "1", "--repo", repository.path,
        ])
        try #require(packed.status == 0, "\(packed.stderr)")
        let publicKeys = [("ed25519", token.ed25519), ("rsa", token.rsa)].map { name, key in
            (work.appendingPathComponent("\(name).pub"), key.publicKeyPEM)
        }
        for (url, pem) in publicKeys { try Data(pem.utf8).write(to: url) }

        // A wrong PIN: refused before anything is written.
        let before = try Self.files(under: repository)
        let refused = try await CommandLineTests.run([
            "sign", "--repo", repository.path, "--key", token.uri(token.ed25519, pin: "0000-wrong"), "--expires", "1h",
        ])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("PIN"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("0000-wrong"))
        #expect(try Self.files(under: repository) == before)

        // Both keys of the token, one by a PIN file, one by a PIN in the URI.
        let signed = try await CommandLineTests.run([
            "sign", "--repo", repository.path, "--key", token.uri(token.ed25519), "--key",
            token.uri(token.rsa, pin: token.pin), "--expires", "1h",
        ])
        try #require(signed.status == 0, "\(signed.stderr)")
        #expect(signed.stdout.contains("2 signature(s)"), "\(signed.stdout)")
        for (url, _) in publicKeys {
            let verified = try await CommandLineTests.run(["verify", "--repo", repository.path, "--trust", url.path])
            #expect(verified.status == 0, "\(url.lastPathComponent): \(verified.stderr)")
        }
        // A key the token does not hold is refused.
        let stranger = work.appendingPathComponent("stranger")
        _ = try await CommandLineTests.run([
            "keygen", "--private", stranger.path + ".key", "--public", stranger.path + ".pub",
        ])
        let strangerVerified = try await CommandLineTests.run([
            "verify", "--repo", repository.path, "--trust", stranger.path + ".pub",
        ])
        #expect(strangerVerified.status != 0)
        try FileManager.default.removeItem(atPath: stranger.path + ".key")

        // Installed over nginx, trusting the exported Ed25519 key.
        let server = try await NginxServer.start(root: repository)
        let store = work.appendingPathComponent("store")
        let synced = try await CommandLineTests.run([
            "sync", "--manifest", server.baseURL.appendingPathComponent("manifest.json").absoluteString, "--root",
            store.path, "--trust", publicKeys[0].0.path,
        ])
        await server.stop()
        try #require(synced.status == 0, "\(synced.stderr)")
        let status = try await CommandLineTests.run(["status", "--root", store.path, "--json"])
        let document = try JSONDecoder().decode(CommandLineTests.StatusDocument.self, from: Data(status.stdout.utf8))
        let installed = try #require(document.packages.first { $0.id == "web" }?.path)
        #expect(try readTree(URL(fileURLWithPath: installed)) == tree)

        // No private key anywhere: not in the repository, the store, the test's folder, or the
        // token's folder (SoftHSM2 keeps its objects encrypted under the PIN).
        for folder in [work, token.directory] {
            for (path, data) in try Self.files(under: folder) {
                #expect(!Self.holdsPrivateKey(data), "\(folder.lastPathComponent)\(path) holds a private key")
            }
        }
    }
}
