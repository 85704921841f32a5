import ArgumentParser
import Foundation
import HotCore
import HotManifest
import HotPublish

/// Policy options of `hot release`.
struct PolicyOptions: ParsableArguments {
    @Option(help: "The lowest app version the release is for (inclusive).")
    var minAppVersion: String?

    @Option(help: "The highest app version the release is for (inclusive).")
    var maxAppVersion: String?

    @Option(help: "The percentage of clients (0-100) that get the release; the others keep the previous one.")
    var rollout: Int?

    @Option(help: "When clients download the package: launch, prefetch or on-demand; kept when omitted.")
    var delivery: DeliveryChoice?

    func validate() throws {
        if let rollout, !(0...100).contains(rollout) {
            throw ValidationError("--rollout takes a percentage from 0 to 100")
        }
    }

    /// The options as the library takes them.
    var releasePolicy: Repository.ReleasePolicy {
        Repository.ReleasePolicy(minAppVersion: minAppVersion, maxAppVersion: maxAppVersion, delivery: delivery?.mode)
    }
}

/// `hot release ID VERSION --repo DIR [--channel NAME] [--rollout P] [--min-app-version V] [--max-app-version V]`
struct Release: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make a packed version the current release of a package in a channel.",
        discussion: """
            The version must be packed in the repository (`hot pack`); a version packed for \
            another channel is found in packages/ and listed here. With --rollout only that \
            percentage of clients gets it, chosen by each client's id; the others keep the \
            previous release. --min-app-version, --max-app-version and --delivery stay until \
            changed (an empty app version clears it).
            """
    )

    @Argument(help: "The package id.") var id: String
    @Argument(help: "The version to release.") var version: String
    @OptionGroup var repository: RepositoryOptions
    @OptionGroup var policy: PolicyOptions

    func run() async throws {
        try await runReportingErrors {
            repository.report(
                try repository.library.release(
                    id,
                    version: version,
                    channel: repository.channel,
                    rollout: policy.rollout,
                    policy: policy.releasePolicy
                )
            )
        }
    }
}

/// `hot rollback ID [--to VERSION] --repo DIR [--channel NAME]`
struct Rollback: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make the previous release (or --to VERSION) current again.",
        discussion: "The package files stay; clients that still keep the older version switch back without a download."
    )

    @Argument(help: "The package id.") var id: String
    @Option(help: "The release to go back to; the previous one when omitted.") var to: String?
    @OptionGroup var repository: RepositoryOptions

    func run() async throws {
        try await runReportingErrors {
            repository.report(try repository.library.rollback(id, to: to, channel: repository.channel))
        }
    }
}

/// `hot disable ID` and `hot enable ID`.
struct Disable: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make clients stop using a package: they keep its files and fall back to the bundled copy."
    )

    @Argument(help: "The package id.") var id: String
    @OptionGroup var repository: RepositoryOptions

    func run() async throws {
        try await setDisabled(true, id: id, repository: repository)
    }
}

/// `hot enable ID`
struct Enable: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Let clients use a disabled package again (no download when they kept its files)."
    )

    @Argument(help: "The package id.") var id: String
    @OptionGroup var repository: RepositoryOptions

    func run() async throws {
        try await setDisabled(false, id: id, repository: repository)
    }
}

private func setDisabled(_ disabled: Bool, id: String, repository: RepositoryOptions) async throws {
    try await runReportingErrors {
        repository.report(try repository.library.setDisabled(disabled, id, channel: repository.channel))
    }
}
