import ArgumentParser
import Foundation
import HotCore
import HotManifest
import HotPublish
import HotVerify

/// `hot verify --repo DIR --trust FILE…` or `hot verify --url URL --trust FILE…`
struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Check a repository: signatures, expiry, package sizes and digests; before publishing (--repo) or as clients see it (--url).",
        discussion: """
            Every manifest (manifest.json and channels/*/manifest.json) must be signed by \
            --threshold of the --trust keys and by its own declared threshold, must not be \
            expired, and must release only versions it lists. Every listed package file must \
            exist with the listed size, SHA-256 and MD5, hold no two paths that are one name on \
            some file system (Unicode normalisation, case), and every file in packages/ must be \
            listed by some manifest. Each channel's timestamp (timestamp.json) must name bytes \
            the repository holds and be one clients accept; a manifest that declares a \
            timestamp role needs one. Prints each problem and exits 1 when there is any.

            With --url, the manifest at that URL is checked the same way and every package \
            file it lists is downloaded from where clients download it (its URL relative to \
            the manifest's), up to its signed size, and hashed; nothing is written to disk.
            """
    )

    @Option(help: "The repository directory.") var repo: String?

    @Option(help: "A published manifest's URL (http, https or file), checked as clients see it.") var url: String?

    @Option(help: "With --url: the channel the manifest must declare.") var channel: String?

    @Option(help: "A trusted public key (repeatable).") var trust: [String] = []

    @Option(help: "How many of the --trust keys must sign each manifest.") var threshold = 1

    @Option(help: "With --url: how many package files are downloaded at once.") var concurrency = 4

    @OptionGroup(title: "TLS (with --url)") var tlsOptions: TLSOptions

    func validate() throws {
        guard (repo == nil) != (url == nil) else { throw ValidationError("give either --repo or --url") }
        guard concurrency >= 1 else { throw ValidationError("--concurrency must be 1 or more") }
    }

    func run() async throws {
        try await runReportingErrors {
            let keys = try readPublicKeys(trust)
            guard !keys.isEmpty else { throw ValidationError("give at least one --trust key") }
            let name: String
            let found: Repository.Verification
            if let url {
                let manifestURL = try parseLocation(url)
                name = manifestURL.absoluteString
                found = try await Repository.verifyPublished(
                    manifestURL,
                    trusting: keys,
                    threshold: threshold,
                    channel: channel,
                    transport: try TransportKind.defaultKind(for: manifestURL).make(trust: tlsOptions.trust()),
                    concurrency: concurrency
                )
            } else {
                let repository = Repository(directory: directoryURL(repo ?? "."))
                name = repository.directory.path
                found = try await repository.verify(trusting: keys, threshold: threshold)
            }
            for problem in found.problems { print(problem) }
            for note in found.notes { print(note) }
            guard found.passed else {
                printError("\(found.problems.count) problem(s) in \(name)")
                throw ExitCode(1)
            }
            print(
                url == nil
                    ? "ok: \(found.manifests) manifest(s), \(found.packageFiles) package file(s)"
                    : "ok: \(name), \(found.packageFiles) package file(s) reachable with their signed size and digests"
            )
        }
    }
}
