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
            let signers = try keys.map { try readSigner($0) }
            let verifier = CryptoVerifier()
            let files = repository.files
            let sharded = files.isSharded(channel: repository.channel)
            var loadedTop = sharded ? try files.loadTop(channel: repository.channel) : nil
            if loadedTop?.envelope.rollout != nil {
                // The rollout role's step is kept (the next release starts from it): folded
                // into the shards it changes.
                try files.saveSharded(
                    try files.loadShardedBody(channel: repository.channel),
                    channel: repository.channel
                )
                loadedTop = try files.loadTop(channel: repository.channel)
            }
            // A sharded channel signs its top document: the shards are named by their hashes.
            var body = try loadedTop?.top ?? files.loadBody(channel: repository.channel)
            // The previous release and the role it declared: a step of it may carry a version
            // up to the role's lead above it, and the next release must be above that.
            let previousRole = body.rolloutRole
            let previousRelease =
                try loadedTop.map { $0.top.version } ?? files.signedPartVersion(channel: repository.channel)
            if !trustedKeys.isEmpty {
                body.keys = try keyTable(readPublicKeys(trustedKeys), verifier: verifier)
            } else if body.keys.isEmpty {
                body.keys = try keyTable(signers.map(\.publicKey), verifier: verifier)
                body.threshold = 1
            }
            if let threshold { body.threshold = threshold }
            guard body.threshold <= body.keys.count else {
                throw ValidationError("the threshold \(body.threshold) is above the \(body.keys.count) declared keys")
            }
            try setRoles(&body, verifier: verifier)
            // (A sharded channel's ids are checked as each is added, against the ids of its shard,
            // where every other spelling of it would be.)
            try PathCollision.check(body.packages.map(\.id), caseSensitive: false, what: "the manifest's package ids")
            body.version = try OnlineRoleBounds.nextReleaseVersion(
                after: body.version,
                release: previousRelease,
                bounds: previousRole?.bounds
            )
            // In whole seconds, as the signed bytes write them: the body in hand is then the one
            // the timestamp is checked against, as clients decode it.
            body.expires = Date(timeIntervalSince1970: expiry.timeIntervalSince1970.rounded(.down))
            body.signedAt = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
            body.channel = repository.channel

            let envelope = try SignedEnvelope.sign(try body.canonicalBytes(), with: signers, verifier: verifier)
            let declaredSigners = envelope.signatures.filter { body.keys[$0.keyid] != nil }.count
            guard declaredSigners >= body.threshold else {
                throw HotUpdateError(
                    .signatureInvalid,
                    "only \(declaredSigners) of the signing keys are declared by the manifest, \(body.threshold) needed; clients would refuse it"
                )
            }
            // The bytes the timestamp names: the top document, or the manifest.
            let served = try envelope.encoded()
            if sharded {
                try signSharded(top: body, signers: signers, files: files, verifier: verifier)
                try RepositoryFiles.replaceServed(files.topURL(channel: repository.channel), with: served)
            } else {
                try files.write(envelope, channel: repository.channel)
            }
            print(
                "signed \(files.manifestPath(channel: repository.channel))\(sharded ? " and its \(body.shards?.count ?? 0) shards" : "") version \(body.version), expires \(SignedManifestBody.rfc3339(expiry)), \(envelope.signatures.count) signature(s)"
            )
            try writeTimestamp(files: files, body: body, served: served, signers: signers, now: now)
        }
    }

    /// Writes the manifest of every package of a sharded channel, for clients that predate
    /// shards: spliced from the shards' bytes of `top` and signed by the same keys.
    private func signSharded(
        top: SignedManifestBody,
        signers: [any Signer],
        files: RepositoryFiles,
        verifier: CryptoVerifier
    ) throws {
        let whole = try files.wholeManifest(top)
        try files.write(try SignedEnvelope.sign(whole, with: signers, verifier: verifier), channel: repository.channel)
    }

    /// Applies the rollout and timestamp role options to `body`.
    private func setRoles(_ body: inout SignedManifestBody, verifier: CryptoVerifier) throws {
        body.rolloutRole = try RoleOptions(
            name: "rollout",
            keys: rolloutKeys,
            threshold: rolloutThreshold,
            lifetime: rolloutLifetime,
            versionLead: rolloutVersionLead,
            remove: noRolloutRole
        ).apply(to: body.rolloutRole, releaseKeys: body.keys, verifier: verifier)
        body.timestampRole = try RoleOptions(
            name: "timestamp",
            keys: timestampKeys,
            threshold: timestampThreshold,
            lifetime: timestampLifetime,
            versionLead: nil,
            remove: noTimestampRole
        ).apply(to: body.timestampRole, releaseKeys: body.keys, verifier: verifier)
    }

    /// Writes the channel's timestamp after the manifest, signed by the release keys, when the
    /// manifest declares no timestamp role; with one, says who must sign it.
    private func writeTimestamp(
        files: RepositoryFiles,
        body: SignedManifestBody,
        served: Data,
        signers: [any Signer],
        now: Date
    ) throws {
        let signer = TimestampSigner(files: files, channel: repository.channel)
        guard body.timestampRole == nil else {
            printNote(
                "the timestamp role signs \(files.timestampPath(channel: repository.channel)): clients see version \(body.version) once `hot timestamp --key TIMESTAMP_KEY` signs it"
            )
            return
        }
        let expiry = try timestampExpires.map { try parseExpiry($0, now: now) } ?? body.expires
        print(try signer.sign(with: signers, expires: expiry, now: now, document: (served, body)).summary)
    }

    private func keyTable(_ keys: [PublicKey], verifier: CryptoVerifier) throws -> [String: SignedManifestBody.Key] {
        var table: [String: SignedManifestBody.Key] = [:]
        for key in keys { table[try verifier.keyID(of: key)] = SignedManifestBody.Key(key) }
        return table
    }
}

/// The options of `hot sign` that declare an online role (`--rollout-key` and the rest, or
/// `--timestamp-key` and the rest), applied to the role a manifest declares.
struct RoleOptions {
    /// "rollout" or "timestamp", as the options spell it.
    var name: String
    var keys: [String]
    var threshold: Int?
    var lifetime: String?
    var versionLead: Int?
    var remove: Bool

    /// The role after the options: `current` with the options applied, nil when removed or
    /// never declared.
    func apply(
        to current: OnlineRole?,
        releaseKeys: [String: SignedManifestBody.Key],
        verifier: CryptoVerifier
    ) throws -> OnlineRole? {
        if remove {
            guard keys.isEmpty, threshold == nil, lifetime == nil, versionLead == nil else {
                throw ValidationError("--no-\(name)-role goes with no other --\(name) option")
            }
            return nil
        }
        var role = current
        if !keys.isEmpty {
            var table: [String: SignedManifestBody.Key] = [:]
            for key in try readPublicKeys(keys) { table[try verifier.keyID(of: key)] = SignedManifestBody.Key(key) }
            if let overlap = table.keys.first(where: { releaseKeys[$0] != nil }) {
                throw ValidationError(
                    "the \(name) key \(overlap.prefix(12)) is a release key too; a \(name) role needs keys of its own"
                )
            }
            role = OnlineRole(
                keys: table,
                threshold: role?.threshold ?? 1,
                maxLifetime: role?.maxLifetime ?? OnlineRoleBounds.defaultMaxLifetime,
                maxVersionLead: role?.maxVersionLead ?? OnlineRoleBounds.defaultMaxVersionLead
            )
        }
        guard var role else {
            if threshold != nil || lifetime != nil || versionLead != nil {
                throw ValidationError("the manifest has no \(name) role: give --\(name)-key")
            }
            return nil
        }
        if let threshold { role.threshold = threshold }
        if let lifetime {
            let now = Date()
            let until = try parseExpiry(lifetime, now: now)
            guard until > now else {
                throw ValidationError("--\(name)-lifetime \(lifetime) is not in the future")
            }
            let seconds = until.timeIntervalSince(now).rounded()
            guard seconds.isFinite, seconds <= Double(OnlineRoleBounds.maxInteger) else {
                throw ValidationError(
                    "--\(name)-lifetime \(lifetime) is beyond 2^53 − 1 seconds, which clients refuse"
                )
            }
            role.maxLifetime = Int(seconds)
        }
        if let versionLead {
            guard (1...OnlineRoleBounds.maxInteger).contains(versionLead) else {
                throw ValidationError(
                    "--\(name)-version-lead takes a number of versions from 1 to 2^53 − 1, not \(versionLead)"
                )
            }
            role.maxVersionLead = versionLead
        }
        try role.bounds.validate(role: "the \(name) role")
        guard role.threshold >= 1, role.threshold <= role.keys.count else {
            throw ValidationError(
                "the \(name) threshold \(role.threshold) is not between 1 and the role's \(role.keys.count) keys"
            )
        }
        return role
    }
}

/// Reads `30d`, `12h`, `15m`, `2s` (from `now`) or an ISO 8601 time.
func parseExpiry(_ text: String, now: Date) throws -> Date {
    let units: [Character: Double] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400]
    if let unit = text.last, let seconds = units[unit], let count = Double(text.dropLast()), count > 0 {
        return now.addingTimeInterval(count * seconds)
    }
    if let date = SignedManifestBody.parseDate(text) { return date }
    throw ValidationError(
        "--expires takes 30d, 12h, 15m, 2s or an ISO 8601 time such as 2027-01-31T00:00:00Z, not '\(text)'"
    )
}
