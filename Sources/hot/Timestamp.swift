import ArgumentParser
import Foundation
import HotCore
import HotManifest
import HotPublish
import HotVerify

/// `hot timestamp --key FILE… --repo DIR [--channel NAME] [--expires 1d]`
struct Timestamp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign the channel's timestamp: a small document naming its current manifest, with a short expiry.",
        discussion: """
            Clients fetch timestamp.json (beside the manifest) first, and download the manifest \
            only when the timestamp names another one. Sign it with the timestamp role's keys \
            (`hot sign --timestamp-key` declares the role) or, when the manifest declares no \
            role, with its release keys; `hot sign` writes one itself in that case. Run it on a \
            schedule, well within --expires (1d by default): a client refuses an expired \
            timestamp, and so a server that keeps serving an old one. The manifest is copied to \
            manifests/<sha256>.json, which the timestamp names and a CDN may cache for ever. \
            The expiry stays within the role's bound: the later of the release manifest's \
            expiry and its signing time plus the role's lifetime.
            """
    )

    @Option(
        name: .customLong("key"),
        help: "A private key to sign with: a PEM file or a pkcs11: URI (repeatable, one signature each)."
    )
    var keys: [String] = []
    @Option(
        help: "When the timestamp expires: a duration (12h, 1d) or an ISO 8601 time; a day (within bounds) by default."
    )
    var expires: String?
    @OptionGroup var repository: RepositoryOptions

    func validate() throws {
        guard !keys.isEmpty else { throw ValidationError("give at least one --key") }
    }

    func run() async throws {
        try await runReportingErrors {
            let signers = try keys.map { try readSigner($0) }
            let now = Date()
            let signed = try TimestampSigner(files: repository.files, channel: repository.channel)
                .sign(with: signers, expires: try expires.map { try parseExpiry($0, now: now) }, now: now)
            print(signed.summary)
        }
    }
}

/// Signs a channel's timestamp over the manifest as it is on disk: for `hot timestamp`,
/// `hot sign` and `hot rollout`.
struct TimestampSigner {
    let files: RepositoryFiles
    let channel: String?

    /// What was signed.
    struct Signed {
        var part: TimestampPart
        var path: String

        var summary: String {
            "signed \(path) naming manifest version \(part.manifest.version) (\(part.manifest.length) bytes), expires \(SignedManifestBody.rfc3339(part.expires))"
        }
    }

    /// The release manifest on disk: signed by its release keys, decoded, and as clients act on
    /// it. In a sharded channel, its top document, which the timestamp names; its packages are
    /// not read, as the timestamp names only the version (a rollout step's, when one is
    /// served).
    private func release() throws -> (data: Data, release: SignedManifestBody, body: SignedManifestBody) {
        if files.isSharded(channel: channel) {
            let data: Data
            do {
                data = try Data(contentsOf: files.topURL(channel: channel))
            } catch {
                throw HotUpdateError.wrap(error, as: .notFound, "cannot read \(files.topPath(channel: channel))")
            }
            let envelope = try SignedEnvelope.parse(data)
            guard !envelope.signatures.isEmpty else {
                throw HotUpdateError(
                    .manifestUnsigned,
                    "sign \(files.topPath(channel: channel)) with its release keys first (hot sign)"
                )
            }
            let release = try SignedManifestBody.decode(envelope.signed)
            var body = release
            if let rollout = envelope.rollout {
                body.version = max(body.version, try RolloutPart.decode(rollout.signed).version)
            }
            return (data, release, body)
        }
        let data = try files.manifestData(channel: channel)
        let path = files.manifestPath(channel: channel)
        guard let envelope = try SignedEnvelope.read(data), !envelope.signatures.isEmpty else {
            throw HotUpdateError(.manifestUnsigned, "sign \(path) with its release keys first (hot sign)")
        }
        let verifier = CryptoVerifier()
        return (data, try SignedManifestBody.decode(envelope.signed), try envelope.effectiveBody(verifier: verifier))
    }

    /// Whether the channel's manifest declares a timestamp role.
    func declaresRole() throws -> Bool {
        try release().release.timestampRole != nil
    }

    /// Signs a timestamp naming the manifest on disk with `signers`, expiring at `expires` (by
    /// default a day on, never past the role's bound, or the manifest's expiry where no role
    /// is declared), and writes it (and the manifest's content-addressed copy) only after the
    /// checks clients make pass.
    ///
    /// - Throws: `HotUpdateError.Code.timestampUnauthorized` when the signers are not a
    ///   threshold of the role's keys (or of the release keys when no role is declared);
    ///   `HotUpdateError.Code.timestampRoleExceeded` past the role's bound.
    ///
    /// `document` is the served bytes of a release manifest with no rollout step and its signed
    /// part, when the caller just wrote them (`hot sign`): they are not read and decoded again.
    func sign(
        with signers: [any Signer],
        expires requested: Date?,
        now: Date,
        document: (data: Data, release: SignedManifestBody)? = nil
    ) throws -> Signed {
        let (data, release, body) = try document.map { ($0.data, $0.release, $0.release) } ?? release()
        let verifier = CryptoVerifier()
        let bound = release.timestampRole?.expiryBound(of: release) ?? body.expires
        let expires =
            requested ?? min(now.addingTimeInterval(TimeInterval(TimestampPart.defaultLifetime)), bound)
        guard expires > now else {
            throw ValidationError("the timestamp's expiry \(SignedManifestBody.rfc3339(expires)) is not in the future")
        }
        if release.timestampRole != nil {
            guard bound > now else {
                throw HotUpdateError(
                    .timestampRoleExceeded,
                    "the timestamp role's bound \(SignedManifestBody.rfc3339(bound)) has passed; sign the release manifest again (hot sign)"
                )
            }
            guard expires <= bound else {
                throw ValidationError(
                    "the expiry \(SignedManifestBody.rfc3339(expires)) is past the timestamp role's bound \(SignedManifestBody.rfc3339(bound)); only the release keys can extend it"
                )
            }
        }
        let digest = try verifier.digest(of: data, using: .sha256).hex
        let part = try TimestampPart.naming(
            data,
            version: body.version,
            channel: release.channel,
            signedAt: now,
            expires: expires,
            path: files.contentAddressedManifestReference(sha256: digest, channel: channel),
            verifier: verifier
        )
        let envelope = try SignedEnvelope.sign(try part.canonicalBytes(), with: signers, verifier: verifier)
        let served = try envelope.encoded()
        // The checks clients make, before anything is written.
        try ServedTimestamp(served).check(
            release: release,
            body: body,
            manifestSHA256: digest,
            manifestLength: Int64(data.count),
            now: now,
            verifier: verifier
        )
        try files.writeContentAddressedManifest(data, sha256: digest)
        try files.writeTimestamp(served, channel: channel)
        return Signed(part: part, path: files.timestampPath(channel: channel))
    }
}
