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

    func apply(to package: inout SignedManifestBody.Package) {
        if let minAppVersion { package.minAppVersion = minAppVersion.isEmpty ? nil : minAppVersion }
        if let maxAppVersion { package.maxAppVersion = maxAppVersion.isEmpty ? nil : maxAppVersion }
        if let delivery { package.setDelivery(delivery.mode) }
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
            // The package alone: in a sharded channel, its shard and the top document.
            let files = repository.files
            var edit = try files.loadPackage(id, channel: repository.channel)
            let listed = edit.package?.entry(for: version)
            let entry = try listed ?? files.findPackedVersion(id: id, version: version, channel: repository.channel)
            if edit.package == nil {
                try PathCollision.check(
                    edit.others + [id],
                    caseSensitive: false,
                    what: "the package ids of the manifest"
                )
            }
            try edit.edit { package in
                try package.addVersion(entry)
                package.release(version, rollout: policy.rollout)
                policy.apply(to: &package)
            }
            try repository.save(edit)
            print("released \(id) \(version)" + (policy.rollout.map { " to \($0)% of clients" } ?? ""))
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
            var restored = ""
            try repository.edit { body, _ in
                guard let package = body.package(id), let current = package.current else {
                    throw HotUpdateError(.notFound, "the package has no release in this channel", packageID: id)
                }
                let target = to ?? package.previous
                guard let target, target != current else {
                    throw HotUpdateError(
                        .notFound,
                        "there is no earlier release than \(current) to roll back to (use hot disable)",
                        packageID: id
                    )
                }
                guard package.entry(for: target) != nil else {
                    throw HotUpdateError(.notFound, "version \(target) is not listed in this channel", packageID: id)
                }
                body.editPackage(id) { package in
                    if let index = package.releases.lastIndex(of: target) {
                        package.releases.removeSubrange((index + 1)...)
                    } else {
                        package.releases.append(target)
                    }
                    package.rollout = nil
                }
                restored = target
            }
            print("rolled back \(id) to \(restored)")
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
        try repository.edit { body, _ in
            guard body.package(id) != nil else {
                throw HotUpdateError(.notFound, "the package is not in this channel", packageID: id)
            }
            body.editPackage(id) { $0.disabled = disabled }
        }
        print("\(disabled ? "disabled" : "enabled") \(id)")
    }
}
