import Foundation
import HotCore
import Synchronization

/// A PKCS#11 token of SoftHSM2 (Debian's `softhsm2`) in a temporary folder, with release keys
/// generated inside it by OpenSC's `pkcs11-tool` (never extractable): the token the PKCS#11
/// signing tests sign with. One per test process: SoftHSM2 reads its configuration from
/// `SOFTHSM2_CONF`, which ``shared()`` sets for the process and the tools it starts.
public final class SoftHSMToken: Sendable {
    /// A key pair in the token.
    public struct Key: Sendable {
        /// The key's label (`object=` in a URI).
        public var label: String
        /// The key's id, in hex (`id=` in a URI, percent-encoded).
        public var id: String
        /// The public key as `pkcs11-tool` exports it, in PEM (empty for ``SoftHSMToken/p256``).
        public var publicKeyPEM: String
    }

    /// The token's label.
    public let label = "release"
    /// The user PIN.
    public let pin = "4711-hot"
    /// A file holding ``pin`` (for `pin-source=file:`).
    public let pinFile: URL
    /// The folder of the token's configuration and objects.
    public let directory: URL
    /// SoftHSM2's PKCS#11 module.
    public let modulePath: String
    /// An Ed25519 key (`CKK_EC_EDWARDS`).
    public let ed25519: Key
    /// An RSA-2048 key.
    public let rsa: Key
    /// A NIST P-256 key: a key type release keys do not use.
    public let p256: Key

    private init(directory: URL, modulePath: String, pinFile: URL, ed25519: Key, rsa: Key, p256: Key) {
        (self.directory, self.modulePath, self.pinFile) = (directory, modulePath, pinFile)
        (self.ed25519, self.rsa, self.p256) = (ed25519, rsa, p256)
    }

    /// The URI of `key`'s private key, with the module and the PIN file in its query, and
    /// `extra` query attributes after them.
    public func uri(_ key: Key, pin: String? = nil) -> String {
        let secret = pin.map { "pin-value=\($0)" } ?? "pin-source=file:\(pinFile.path)"
        return "pkcs11:token=\(label);object=\(key.label)?module-path=\(modulePath)&\(secret)"
    }

    /// Where Debian installs SoftHSM2's module, if it is installed.
    public static var installedModule: String? {
        [
            "/usr/lib/softhsm/libsofthsm2.so",
            "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
            "/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
        ].first { FileManager.default.fileExists(atPath: $0) }
    }

    private static let made = Mutex<Task<SoftHSMToken, any Error>?>(nil)

    /// The process's token, made at the first call: a fresh folder, `softhsm2-util
    /// --init-token`, and three key pairs from `pkcs11-tool --keypairgen`.
    ///
    /// - Throws: `HotUpdateError.Code.notFound` when SoftHSM2 or `pkcs11-tool` is not
    ///   installed (`scripts/ensure-deps test` installs them), or what a tool printed when it failed.
    public static func shared() async throws -> SoftHSMToken {
        let task = made.withLock { task in
            if let task { return task }
            let new = Task { try await make() }
            task = new
            return new
        }
        return try await task.value
    }

    private static func make() async throws -> SoftHSMToken {
        guard let module = installedModule else {
            throw HotUpdateError(.notFound, "SoftHSM2 is not installed: scripts/ensure-deps test installs softhsm2")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "hot-softhsm-\(UUID().uuidString)",
            isDirectory: true
        )
        let tokens = directory.appendingPathComponent("tokens", isDirectory: true)
        try FileManager.default.createDirectory(at: tokens, withIntermediateDirectories: true)
        let configuration = directory.appendingPathComponent("softhsm2.conf")
        try Data("directories.tokendir = \(tokens.path)\nobjectstore.backend = file\nlog.level = ERROR\n".utf8)
            .write(to: configuration)
        setenv("SOFTHSM2_CONF", configuration.path, 1)
        let token = "release"
        let pin = "4711-hot"
        let pinFile = directory.appendingPathComponent("pin.txt")
        try Data("\(pin)\n".utf8).write(to: pinFile)
        try await Subprocess.check(
            "softhsm2-util",
            ["--init-token", "--free", "--label", token, "--pin", pin, "--so-pin", "0815-hot-so"]
        )
        func generate(_ type: String, _ label: String, _ id: String, export: Bool = true) async throws -> Key {
            let tool = ["--module", module, "--token-label", token]
            try await Subprocess.check(
                "pkcs11-tool",
                tool + [
                    "--login", "--pin", pin, "--keypairgen", "--key-type", type, "--label", label, "--id", id,
                    "--sensitive",
                ]
            )
            guard export else { return Key(label: label, id: id, publicKeyPEM: "") }
            let exported = directory.appendingPathComponent("\(label).public")
            try await Subprocess.check(
                "pkcs11-tool",
                tool + ["--read-object", "--type", "pubkey", "--id", id, "-o", exported.path]
            )
            var pem = String(decoding: try Data(contentsOf: exported), as: UTF8.self)
            if !pem.hasPrefix("-----BEGIN") {
                // DER (RSA, EC): as PEM.
                pem = try await Subprocess.check(
                    "openssl",
                    ["pkey", "-pubin", "-inform", "DER", "-in", exported.path]
                ).stdout
            }
            return Key(label: label, id: id, publicKeyPEM: pem)
        }
        return SoftHSMToken(
            directory: directory,
            modulePath: module,
            pinFile: pinFile,
            ed25519: try await generate("EC:edwards25519", "release-ed25519", "01"),
            rsa: try await generate("rsa:2048", "release-rsa", "02"),
            p256: try await generate("EC:prime256v1", "release-p256", "03", export: false)
        )
    }
}
