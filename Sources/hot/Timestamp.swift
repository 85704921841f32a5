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
            let signed = try repository.library.signTimestamp(
                with: signers,
                expires: try expires.map { try parseExpiry($0, now: now) },
                channel: repository.channel,
                now: now
            )
            print(signed.summary)
        }
    }
}
