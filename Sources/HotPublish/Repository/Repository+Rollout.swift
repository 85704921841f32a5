import Foundation
import HotCore
import HotManifest
import HotVerify

extension Repository {
    /// What a rollout step signed, for people.
    public struct SignedStep: Sendable, Hashable {
        /// `signed a rollout step of manifest.json version 9: web 12 to 50% of clients, expires …`.
        public var summary: String
        /// The step's version.
        public var version: Int
        /// The timestamp signed over the step, when timestamp signers were given.
        public var timestamp: SignedTimestamp?
        /// Notes: the timestamp the step left for others to sign, or removed.
        public var notes: [String]
    }

    /// Signs a rollout step of `channel` with the rollout role's keys, for a machine that
    /// advances rollouts and holds no release key: package `id`'s current release to
    /// `percent` of clients, or, `back`, its previous release (or `to`, a release the release
    /// manifest names). The step expires at `expires`, by default at the role's bound.
    ///
    /// Then the channel's timestamp: signed over the step with `timestampSigners`; otherwise
    /// left naming the release before the step where a timestamp role is declared, and removed
    /// where the release keys signed it (clients read the manifest alone until they sign one).
    ///
    /// - Throws: `HotUpdateError.Code.manifestUnsigned` before the release keys signed the
    ///   manifest; `HotUpdateError.Code.rolloutRoleExceeded` when it declares no rollout role
    ///   or the role's version lead is used up; `HotUpdateError.Code.signatureInvalid` when
    ///   fewer of the role's keys sign than its threshold; `HotUpdateError.Code.notFound` for
    ///   a package with no release or no earlier one; `HotUpdateError.Code.storeBusy` while
    ///   another change holds the repository.
    public func signRolloutStep(
        _ id: String,
        percent: Int?,
        back: Bool = false,
        to: String? = nil,
        with signers: [any Signer],
        expires: Date? = nil,
        timestampSigners: [any Signer] = [],
        channel: String? = nil,
        now: Date = Date()
    ) throws -> SignedStep {
        try Self.validate(channel: channel)
        guard percent != nil || back else {
            throw HotUpdateError(.invalidArgument, "a rollout step sets a percentage, goes back, or both")
        }
        if let percent, !(0...100).contains(percent) {
            throw HotUpdateError(.invalidArgument, "a rollout is a percentage from 0 to 100, not \(percent)")
        }
        guard to == nil || back else { throw HotUpdateError(.invalidArgument, "a release to go back to needs back") }
        guard !signers.isEmpty else { throw HotUpdateError(.invalidArgument, "give at least one key") }
        return try locked {
            try signStepHoldingLock(
                id,
                percent: percent,
                back: back,
                to: to,
                signers: signers,
                expires: expires,
                timestampSigners: timestampSigners,
                channel: channel,
                now: now
            )
        }
    }

    private func signStepHoldingLock(
        _ id: String,
        percent: Int?,
        back: Bool,
        to: String?,
        signers: [any Signer],
        expires: Date?,
        timestampSigners: [any Signer],
        channel: String?,
        now: Date
    ) throws -> SignedStep {
        let verifier = CryptoVerifier()
        let files = self.files
        let path = files.manifestPath(channel: channel)
        guard let envelope = try SignedEnvelope.read(try files.manifestData(channel: channel)),
            !envelope.signatures.isEmpty
        else {
            throw HotUpdateError(.manifestUnsigned, "sign \(path) with its release keys first (hot sign)")
        }
        let release = try SignedManifestBody.decode(envelope.signed)
        guard let role = release.rolloutRole else {
            throw HotUpdateError(
                .rolloutRoleExceeded,
                "\(path) declares no rollout role; sign it with --rollout-key to delegate one"
            )
        }
        let releaseSHA256 = try verifier.digest(of: envelope.signed, using: .sha256).hex
        var part = RolloutPart(
            release: releaseSHA256,
            version: release.version,
            signedAt: now,
            expires: now,
            packages: []
        )
        if let rollout = envelope.rollout {
            let previous = try RolloutPart.decode(rollout.signed)
            if previous.release == releaseSHA256 { part.packages = previous.packages }
            part.version = max(part.version, previous.version)
        }
        let current = try envelope.effectiveBody(verifier: verifier)
        guard let package = current.package(id), var target = package.current else {
            throw HotUpdateError(.notFound, "the package has no release in this channel", packageID: id)
        }
        var rollout = percent ?? package.rollout
        if back {
            let releases = package.releases
            guard let earlier = to ?? package.previous, earlier != target else {
                throw HotUpdateError(
                    .notFound,
                    "there is no earlier release than \(target) to go back to",
                    packageID: id
                )
            }
            guard releases.contains(earlier) else {
                throw HotUpdateError(
                    .notFound,
                    "the rollout role can go back only to a release the release manifest names (\(releases.joined(separator: ", "))), not \(earlier)",
                    packageID: id
                )
            }
            target = earlier
            rollout = percent
        }
        part.packages.removeAll { $0.id == id }
        part.packages.append(RolloutPart.Package(id: id, current: target, rollout: rollout))
        part.packages.sort { $0.id < $1.id }
        let latest = role.bounds.latestVersion(over: release.version)
        guard part.version < latest else {
            throw HotUpdateError(
                .rolloutRoleExceeded,
                "the rollout role has signed its steps up to version \(latest), the release manifest's version \(release.version) plus the \(role.maxVersionLead) versions its keys allow; sign the release again with the release keys (hot sign) to go on"
            )
        }
        part.version += 1
        let bound = role.expiryBound(of: release)
        part.expires = expires ?? bound
        guard part.expires <= bound else {
            throw HotUpdateError(
                .invalidArgument,
                "the step's expiry \(SignedManifestBody.rfc3339(part.expires)) is past the rollout role's bound \(SignedManifestBody.rfc3339(bound)); only the release keys can extend it"
            )
        }
        guard part.expires > now else {
            throw HotUpdateError(
                .manifestExpired,
                "the rollout role's bound \(SignedManifestBody.rfc3339(bound)) has passed; sign the release manifest again (hot sign)"
            )
        }
        let signed = try part.canonicalBytes()
        // The checks clients make, before anything is written.
        _ = try part.apply(to: release, releaseSHA256: releaseSHA256, role: role)
        let signatures = try SignedEnvelope.sign(signed, with: signers, verifier: verifier).signatures
        let valid = signatures.filter { role.keys[$0.keyid] != nil }.count
        guard valid >= role.threshold else {
            throw HotUpdateError(
                .signatureInvalid,
                "only \(valid) of the signing keys belong to the rollout role, \(role.threshold) needed; clients would refuse the step"
            )
        }
        var served = envelope
        served.rollout = SignedEnvelope.Rollout(signed: signed, signatures: signatures)
        try files.write(served, channel: channel)
        if files.isSharded(channel: channel) {
            // The same step over the top document, which clients that read shards fetch.
            try signTopStep(
                part,
                releaseVersion: release.version,
                signers: signers,
                channel: channel,
                verifier: verifier
            )
        }
        var result = SignedStep(
            summary: "signed a rollout step of \(path) version \(part.version): \(id) \(target)"
                + (rollout.map { " to \($0)% of clients" } ?? " to every client")
                + ", expires \(SignedManifestBody.rfc3339(part.expires))",
            version: part.version,
            timestamp: nil,
            notes: []
        )
        // The channel's timestamp after the step.
        let timestampPath = files.timestampPath(channel: channel)
        if !timestampSigners.isEmpty {
            let signedTimestamp = try TimestampSigner(files: files, channel: channel)
                .sign(with: timestampSigners, expires: nil, now: now)
            result.timestamp = SignedTimestamp(
                summary: signedTimestamp.summary,
                manifestVersion: signedTimestamp.part.manifest.version,
                expires: signedTimestamp.part.expires
            )
        } else if release.timestampRole != nil {
            result.notes.append(
                "clients see this step once the timestamp role signs \(timestampPath) again (hot timestamp)"
            )
        } else if FileManager.default.fileExists(atPath: files.timestampURL(channel: channel).path) {
            try files.removeTimestamp(channel: channel)
            result.notes.append(
                "removed \(timestampPath), which named the manifest before this step: clients read the manifest alone until the release keys sign a timestamp again (hot timestamp)"
            )
        }
        return result
    }

    /// Signs `part` again over a sharded channel's top document (the release it names is the
    /// top document's signed part) and writes it there.
    private func signTopStep(
        _ part: RolloutPart,
        releaseVersion: Int,
        signers: [any Signer],
        channel: String?,
        verifier: CryptoVerifier
    ) throws {
        let files = self.files
        var (envelope, top) = try files.loadTop(channel: channel)
        let path = files.topPath(channel: channel)
        guard !envelope.signatures.isEmpty, top.version == releaseVersion else {
            throw HotUpdateError(
                .manifestUnsigned,
                "\(path) is not the signed top document of \(files.manifestPath(channel: channel)) version \(releaseVersion); sign the channel again (hot sign)"
            )
        }
        var step = part
        step.release = try verifier.digest(of: envelope.signed, using: .sha256).hex
        let signed = try step.canonicalBytes()
        envelope.rollout = SignedEnvelope.Rollout(
            signed: signed,
            signatures: try SignedEnvelope.sign(signed, with: signers, verifier: verifier).signatures
        )
        try RepositoryFiles.replaceServed(files.topURL(channel: channel), with: try envelope.encoded())
    }
}
