import Foundation
import HotArchive
import HotAssets
import HotCore
import HotStore
import HotTestServers
import HotTesting
import HotTransport
import HotVerify
import Logging

/// A manifest source that answers with a fixed manifest, for syncs whose packages come
/// from several places.
struct FixedManifestSource: ManifestSource {
    var manifest: Manifest
    func fetchManifest() async throws -> Manifest { manifest }
}

/// Zips the contents of `directory` (not the directory itself) with Info-ZIP's `zip`,
/// ZipCrypto-encrypted when a password is given.
@discardableResult
func zipTree(_ directory: URL, to archive: URL, password: String? = nil) async throws -> URL {
    try FileManager.default.createDirectory(at: archive.deletingLastPathComponent(), withIntermediateDirectories: true)
    try? FileManager.default.removeItem(at: archive)
    var arguments = ["-q", "-r", "-X"]
    if let password { arguments += ["-P", password] }
    arguments += [archive.path, "."]
    try await Subprocess.check("zip", arguments, in: directory)
    return archive
}

/// Writes `files` into a fresh directory and zips them to `archive`.
@discardableResult
func zipFiles(_ files: [String: Data], to archive: URL, password: String? = nil) async throws -> URL {
    let tree = try makeTemporaryDirectory("tree")
    defer { try? FileManager.default.removeItem(at: tree) }
    try writeTree(files, under: tree)
    return try await zipTree(tree, to: archive, password: password)
}

/// The MD5 of a file, through the real verifier.
func md5(of file: URL) throws -> Digest {
    try CryptoVerifier().digest(ofFile: file, using: .md5)
}

/// An updater over `root` with real parts and the given transport.
func makeUpdater(root: URL, using transport: any Transport) -> Updater {
    var configuration = UpdaterConfiguration(
        root: root,
        transport: transport,
        unarchiver: ZipUnarchiver(),
        verifier: CryptoVerifier(),
        store: FileMetadataStore(root: root),
        timeouts: TransportRequest.Timeouts(connect: .seconds(5), lowSpeedWindow: .seconds(5)),
        logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    )
    configuration.commitHooks = [NameIndexWriter()]
    return Updater(configuration: configuration)
}

/// The active version of each installed package, by id.
func activeVersions(_ updater: Updater) async throws -> [String: String] {
    var result: [String: String] = [:]
    for (id, record) in try await updater.currentSnapshot().packages {
        if let active = record.active { result[id] = active.version }
    }
    return result
}

/// The installed tree of package `id`, relative path → bytes.
func installedTree(_ updater: Updater, _ id: String) async throws -> [String: Data]? {
    guard let package = try await updater.installedPackages().first(where: { $0.id == id }) else { return nil }
    return try readTree(package.directory)
}

/// An RSA key pair made by `openssl`, signing the way older patch servers do.
struct PatchServerKey {
    let privateKey: URL
    let publicKey: PublicKey

    static func make(in directory: URL, name: String) async throws -> PatchServerKey {
        let privateKey = directory.appendingPathComponent("\(name).key")
        let publicKey = directory.appendingPathComponent("\(name).pub")
        try await Subprocess.check("openssl", ["genrsa", "-out", privateKey.path, "2048"])
        try await Subprocess.check("openssl", ["pkey", "-in", privateKey.path, "-pubout", "-out", publicKey.path])
        return PatchServerKey(
            privateKey: privateKey,
            publicKey: PublicKey(scheme: .rsaPKCS1Raw, pem: try String(contentsOf: publicKey, encoding: .utf8))
        )
    }

    /// `openssl_private_encrypt(md5)`: the MD5's lowercase hex, PKCS#1 v1.5-padded, no digest; base64.
    func sign(_ md5: Digest) async throws -> String {
        let output = try await Subprocess.check(
            "openssl",
            ["pkeyutl", "-sign", "-inkey", privateKey.path],
            stdin: Data(md5.hex.utf8)
        )
        return output.standardOutput.base64EncodedString()
    }
}
