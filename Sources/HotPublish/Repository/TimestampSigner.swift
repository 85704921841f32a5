import Foundation
import HotCore
import HotManifest
import HotVerify

/// Signs a channel's timestamp over the manifest as it is on disk: for `hot timestamp`,
/// `hot sign` and `hot rollout`.
package struct TimestampSigner {
    package let files: RepositoryFiles
    package let channel: String?

    /// The signer of `channel`'s timestamp in `files`.
    package init(files: RepositoryFiles, channel: String?) {
        (self.files, self.channel) = (files, channel)
    }

    /// What was signed.
    package struct Signed {
        package var part: TimestampPart
        package var path: String

        package var summary: String {
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
    package func declaresRole() throws -> Bool {
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
    package func sign(
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
            throw HotUpdateError(
                .invalidArgument,
                "the timestamp's expiry \(SignedManifestBody.rfc3339(expires)) is not in the future"
            )
        }
        if release.timestampRole != nil {
            guard bound > now else {
                throw HotUpdateError(
                    .timestampRoleExceeded,
                    "the timestamp role's bound \(SignedManifestBody.rfc3339(bound)) has passed; sign the release manifest again (hot sign)"
                )
            }
            guard expires <= bound else {
                throw HotUpdateError(
                    .invalidArgument,

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
