import ArgumentParser
import Foundation
import HotCore
import HotManifest
import HotPublish
import HotVerify

/// `hot rollout ID [--percent P] [--back] [--to VERSION] --key FILE… --repo DIR [--channel NAME]`
struct Rollout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign a rollout step with the rollout role's keys: a percentage, or a rollback.",
        discussion: """
            For machines that advance rollouts on their own and must not hold a release key. \
            The channel's manifest must be signed by its release keys and declare a rollout \
            role (`hot sign --rollout-key`). The step is signed apart from the release and \
            served with it: clients accept it only if it changes what the role may change, \
            the current release's percentage and a rollback to a release the release manifest \
            names, expires within the role's bound (by default, at that bound), and carries a \
            version at most the role's version lead above the release's (each step takes the \
            next one; past the lead, the release keys must sign again).
            """
    )

    @Argument(help: "The package id.") var id: String
    @Option(help: "The percentage of clients (0-100) that get the current release.") var percent: Int?
    @Flag(help: "Make the previous release (or --to VERSION) current again.") var back = false
    @Option(help: "With --back: the release to go back to.") var to: String?
    @Option(
        name: .customLong("key"),
        help: "A rollout role's private key: a PEM file or a pkcs11: URI (repeatable, one signature each)."
    )
    var keys: [String] = []
    @Option(help: "When the step expires: a duration (7d, 12h) or an ISO 8601 time; the role's bound by default.")
    var expires: String?
    @Option(
        name: .customLong("timestamp-key"),
        help: "A timestamp role's private key, to sign the channel's timestamp over the step (repeatable)."
    )
    var timestampKeys: [String] = []
    @OptionGroup var repository: RepositoryOptions

    func validate() throws {
        guard percent != nil || back else { throw ValidationError("give --percent, --back, or both") }
        if let percent, !(0...100).contains(percent) {
            throw ValidationError("--percent takes a percentage from 0 to 100")
        }
        if to != nil, !back { throw ValidationError("--to goes with --back") }
        guard !keys.isEmpty else { throw ValidationError("give at least one --key") }
    }

    func run() async throws {
        try await runReportingErrors {
            let verifier = CryptoVerifier()
            let files = repository.files
            let path = files.manifestPath(channel: repository.channel)
            guard let envelope = try SignedEnvelope.read(try files.manifestData(channel: repository.channel)),
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
            let now = Date()
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
            part.expires = try expires.map { try parseExpiry($0, now: now) } ?? bound
            guard part.expires <= bound else {
                throw ValidationError(
                    "--expires \(expires ?? "") is past the rollout role's bound \(SignedManifestBody.rfc3339(bound)); only the release keys can extend it"
                )
            }
            guard part.expires > now else {
                throw HotUpdateError(
                    .manifestExpired,
                    "the rollout role's bound \(SignedManifestBody.rfc3339(bound)) has passed; sign the release manifest again (hot sign)"
                )
            }
            let signers = try keys.map { try readSigner($0) }
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
            try files.write(served, channel: repository.channel)
            if files.isSharded(channel: repository.channel) {
                // The same step over the top document, which clients that read shards fetch.
                try signTopStep(
                    part,
                    releaseVersion: release.version,
                    signers: signers,
                    files: files,
                    verifier: verifier
                )
            }
            print(
                "signed a rollout step of \(path) version \(part.version): \(id) \(target)"
                    + (rollout.map { " to \($0)% of clients" } ?? " to every client")
                    + ", expires \(SignedManifestBody.rfc3339(part.expires))"
            )
            try timestamp(files: files, release: release, now: now)
        }
    }
}

extension Rollout {
    /// Signs `part` again over a sharded channel's top document (the release it names is the
    /// top document's signed part) and writes it there.
    fileprivate func signTopStep(
        _ part: RolloutPart,
        releaseVersion: Int,
        signers: [any Signer],
        files: RepositoryFiles,
        verifier: CryptoVerifier
    ) throws {
        var (envelope, top) = try files.loadTop(channel: repository.channel)
        let path = files.topPath(channel: repository.channel)
        guard !envelope.signatures.isEmpty, top.version == releaseVersion else {
            throw HotUpdateError(
                .manifestUnsigned,
                "\(path) is not the signed top document of \(files.manifestPath(channel: repository.channel)) version \(releaseVersion); sign the channel again (hot sign)"
            )
        }
        var step = part
        step.release = try verifier.digest(of: envelope.signed, using: .sha256).hex
        let signed = try step.canonicalBytes()
        envelope.rollout = SignedEnvelope.Rollout(
            signed: signed,
            signatures: try SignedEnvelope.sign(signed, with: signers, verifier: verifier).signatures
        )
        try RepositoryFiles.replaceServed(files.topURL(channel: repository.channel), with: try envelope.encoded())
    }

    /// The channel's timestamp after a step: signed over it with `--timestamp-key`; otherwise
    /// left naming the release before the step where a timestamp role is declared (its
    /// machine signs the step in with its next timestamp), and removed where the release keys
    /// signed it (clients read the manifest alone until they sign one again).
    fileprivate func timestamp(files: RepositoryFiles, release: SignedManifestBody, now: Date) throws {
        let signer = TimestampSigner(files: files, channel: repository.channel)
        let path = files.timestampPath(channel: repository.channel)
        if !timestampKeys.isEmpty {
            let signers = try timestampKeys.map { try readSigner($0) }
            print(try signer.sign(with: signers, expires: nil, now: now).summary)
        } else if release.timestampRole != nil {
            printNote("clients see this step once the timestamp role signs \(path) again (hot timestamp)")
        } else if FileManager.default.fileExists(atPath: files.timestampURL(channel: repository.channel).path) {
            try files.removeTimestamp(channel: repository.channel)
            printNote(
                "removed \(path), which named the manifest before this step: clients read the manifest alone until the release keys sign a timestamp again (hot timestamp)"
            )
        }
    }
}

/// The signer of a `--key`: a PEM private key file, or a `pkcs11:` URI of a key in a token.
func readSigner(_ reference: String) throws -> any Signer {
    try ReleaseKey.signer(reference)
}
