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
            let now = Date()
            let step = try repository.library.signRolloutStep(
                id,
                percent: percent,
                back: back,
                to: to,
                with: try keys.map { try readSigner($0) },
                expires: try expires.map { try parseExpiry($0, now: now) },
                timestampSigners: try timestampKeys.map { try readSigner($0) },
                channel: repository.channel,
                now: now
            )
            print(step.summary)
            if let timestamp = step.timestamp { print(timestamp.summary) }
            for note in step.notes { printNote(note) }
        }
    }
}

/// The signer of a `--key`: a PEM private key file, or a `pkcs11:` URI of a key in a token.
func readSigner(_ reference: String) throws -> any Signer {
    try ReleaseKey.signer(reference)
}
