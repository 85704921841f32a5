import ArgumentParser
import Foundation
import HotCore
import HotManifest
import HotPublish
import HotVerify

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hot keygen --private FILE --public FILE [--rsa]`
struct Keygen: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Generate a signing key: Ed25519 by default, RSA-3072 (PSS, SHA-256) with --rsa.",
        discussion: """
            The private key is written as PEM PKCS#8 with mode 0600, the public key as PEM \
            SubjectPublicKeyInfo; neither file may exist. Ship the public key in the app \
            (`hot sync --trust`) and keep the private key offline.
            """
    )

    @Option(name: .customLong("private"), help: "Where to write the private key.") var privateFile: String
    @Option(name: .customLong("public"), help: "Where to write the public key.") var publicFile: String
    @Flag(help: "Generate RSA-3072 instead of Ed25519.") var rsa = false

    func run() async throws {
        try await runReportingErrors {
            let signer = try CryptoSigner.generate(rsa ? .rsa3072 : .ed25519)
            try writeNewFile(Data(signer.privateKeyPEM.utf8), to: privateFile, mode: 0o600)
            try writeNewFile(Data(signer.publicKey.pem.utf8), to: publicFile, mode: 0o644)
            print("\(signer.publicKey.scheme) key \(try CryptoVerifier().keyID(of: signer.publicKey))")
        }
    }

    /// Creates `path` with `mode`, refusing to replace an existing file.
    private func writeNewFile(_ data: Data, to path: String, mode: mode_t) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else {
            let code = errno
            throw HotUpdateError(
                .fileSystem,
                "cannot create the key file: \(String(cString: strerror(code)))",
                subject: path
            )
        }
        defer { close(fd) }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == data.count, fsync(fd) == 0 else {
            throw HotUpdateError(.fileSystem, "cannot write the key file", subject: path)
        }
    }
}

/// Reads PEM public keys given on the command line.
func readPublicKeys(_ paths: [String]) throws -> [PublicKey] {
    try paths.map { path in
        let pem: String
        do {
            pem = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw HotUpdateError.wrap(error, as: .notFound, "cannot read the public key \(path)")
        }
        return try CryptoVerifier.publicKey(pem: pem)
    }
}

/// `hot sign --repo DIR [--channel NAME] --key FILE… [--expires 30d]`
struct Sign: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign a channel's manifest: bump its version, set its expiry, add a signature per key.",
        discussion: """
            --key takes a PEM private key file, or a pkcs11: URI (RFC 7512) naming a key in a \
            token, its module (module-path) and its PIN (pin-source or pin-value): the token \
            signs, and the key never leaves it. \
            --expires takes a duration (30d, 12h, 15m, 2s) or an ISO 8601 time; 30 days by \
            default. The manifest declares the keys allowed to sign the next one: on the first \
            signing the signing keys, later the same keys unless --trusted-key lists new ones \
            (key rotation: sign with a threshold of the old keys and of the new ones). \
            --rollout-key delegates rollout steps (`hot rollout`) to keys that can change \
            percentages and roll back to a listed release, and nothing else; the role is kept \
            until --rollout-key names others or --no-rollout-role removes it. A step's version \
            is at most --rollout-version-lead above the release's, and when the manifest \
            declared a role, the next version is above every version its steps could carry, \
            so no step of an older release is ever above a newer one.

            The signing also writes the channel's timestamp (timestamp.json beside the \
            manifest, which clients fetch first) signed by the same keys, expiring with the \
            manifest unless --timestamp-expires says otherwise. --timestamp-key delegates the \
            timestamp to keys of its own instead, for a machine that signs it on a schedule \
            (`hot timestamp`) with a short expiry: clients then accept the manifest only with \
            a timestamp, within --timestamp-lifetime of this signing, and this signing leaves \
            the timestamp to that machine. --no-timestamp-role removes the role.
            """
    )

    @OptionGroup var repository: RepositoryOptions

    @Option(
        name: .customLong("key"),
        help: "A private key to sign with: a PEM file or a pkcs11: URI (repeatable, one signature each)."
    )
    var keys: [String] = []

    @Option(help: "When the manifest expires: a duration (30d, 12h, 2s) or an ISO 8601 time.")
    var expires = "30d"

    @Option(
        name: .customLong("trusted-key"),
        help: "A public key the manifest declares for signing the next one (repeatable; replaces the declared set)."
    )
    var trustedKeys: [String] = []

    @Option(help: "How many declared keys must sign (kept when omitted; 1 at first).")
    var threshold: Int?

    @Option(
        name: .customLong("rollout-key"),
        help: "A public key of the rollout role (repeatable; replaces the role's keys)."
    )
    var rolloutKeys: [String] = []

    @Option(help: "How many rollout role keys must sign a step (kept when omitted; 1 at first).")
    var rolloutThreshold: Int?

    @Option(help: "How long after this signing the role's steps may expire (14d by default, kept when omitted).")
    var rolloutLifetime: String?

    @Option(
        help: "How many versions above this release the role's steps may go (1000 by default, kept when omitted)."
    )
    var rolloutVersionLead: Int?

    @Flag(help: "Remove the rollout role: only release keys sign from now on.")
    var noRolloutRole = false

    @Option(
        name: .customLong("timestamp-key"),
        help: "A public key of the timestamp role (repeatable; replaces the role's keys)."
    )
    var timestampKeys: [String] = []

    @Option(help: "How many timestamp role keys must sign a timestamp (kept when omitted; 1 at first).")
    var timestampThreshold: Int?

    @Option(help: "How long after this signing the role's timestamps may expire (14d by default, kept when omitted).")
    var timestampLifetime: String?

    @Flag(help: "Remove the timestamp role: the release keys sign the timestamp from now on.")
    var noTimestampRole = false

    @Option(
        help: "When the timestamp this signing writes expires, with no timestamp role (with the manifest by default)."
    )
    var timestampExpires: String?

    func run() async throws {
        try await runReportingErrors {
            guard !keys.isEmpty else { throw ValidationError("give at least one --key") }
            if let threshold, threshold < 1 { throw ValidationError("--threshold must be at least 1") }
            let now = Date()
            let expiry = try parseExpiry(expires, now: now)
            guard expiry > now else { throw ValidationError("--expires \(expires) is in the past") }
            let options = Repository.SigningOptions(
                trustedKeys: try readPublicKeys(trustedKeys),
                threshold: threshold,
                rolloutRole: try roleChange(
                    keys: rolloutKeys,
                    threshold: rolloutThreshold,
                    lifetime: rolloutLifetime,
                    versionLead: rolloutVersionLead,
                    remove: noRolloutRole
                ),
                timestampRole: try roleChange(
                    keys: timestampKeys,
                    threshold: timestampThreshold,
                    lifetime: timestampLifetime,
                    versionLead: nil,
                    remove: noTimestampRole
                ),
                timestampExpires: try timestampExpires.map { try parseExpiry($0, now: now) }
            )
            let signed = try repository.library.sign(
                with: try keys.map { try readSigner($0) },
                expires: expiry,
                channel: repository.channel,
                options: options,
                now: now
            )
            print(signed.summary)
            for note in signed.notes { printNote(note) }
            if let timestamp = signed.timestamp { print(timestamp.summary) }
        }
    }

    /// A role's options as the library takes them: its key files read, its lifetime in seconds.
    private func roleChange(
        keys: [String],
        threshold: Int?,
        lifetime: String?,
        versionLead: Int?,
        remove: Bool
    ) throws -> Repository.RoleChange {
        let now = Date()
        return Repository.RoleChange(
            keys: try readPublicKeys(keys),
            threshold: threshold,
            lifetime: try lifetime.map { try parseExpiry($0, now: now).timeIntervalSince(now) },
            versionLead: versionLead,
            remove: remove
        )
    }
}

/// Reads `30d`, `12h`, `15m`, `2s` (from `now`) or an ISO 8601 time.
func parseExpiry(_ text: String, now: Date) throws -> Date {
    do {
        return try Repository.expiry(text, now: now)
    } catch {
        throw ValidationError(
            "--expires takes 30d, 12h, 15m, 2s or an ISO 8601 time such as 2027-01-31T00:00:00Z, not '\(text)'"
        )
    }
}
