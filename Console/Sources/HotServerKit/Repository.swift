import Foundation
import HotCore
import HotManifest
import HotVerify

/// A static repository as `hot` writes it, read for the console and the rollout command, and
/// changed through the `hot` executable (the existing publisher): each change edits a
/// channel's manifest and signs it with the publisher's keys, or, given rollout role keys,
/// is signed as a rollout step (`hot rollout`). Given timestamp role keys, it signs each
/// channel's timestamp (`hot timestamp`), on a schedule or after each change.
public struct PublisherRepository: Sendable {
    /// What the keys may sign.
    public enum Role: String, Sendable, Hashable {
        /// Release keys: every change, signed with `hot sign`.
        case release
        /// Keys of the rollout role the release keys delegate to: the current release's
        /// percentage and rollbacks to a listed release, signed with `hot rollout`. A machine
        /// that advances rollouts on a schedule should hold these, never a release key.
        case rollout
        /// Keys of the timestamp role the release keys delegate to: each channel's
        /// timestamp, re-signed on a schedule (``signTimestamps(expires:)``), and nothing else.
        case timestamp
    }

    /// The repository directory.
    public let directory: URL
    /// The `hot` executable.
    public let hot: URL
    /// The private keys each change is signed with (paths of PEM files, read by `hot sign`).
    public let keys: [String]
    /// How long each signed manifest is valid (`hot sign --expires`); rollout steps expire at
    /// the bound their release manifest gives the role.
    public let expires: String
    /// What ``keys`` may sign.
    public let role: Role
    /// Where the repository is published, when ``directory`` is a working copy of a bucket.
    public let remote: Remote?
    /// Private keys of the timestamp role (PEM paths) that sign the changed channel's
    /// timestamp after each change (``apply(_:package:channel:)``), so clients see the change
    /// at once rather than at the next scheduled timestamp; none by default.
    public let timestampKeys: [String]

    /// A repository published to S3-compatible storage (`s3://BUCKET/PREFIX`): its live
    /// manifests are pulled into ``directory`` before each read and change (`hot pull`), and
    /// each change is published back (`hot publish`); package files stay in the bucket.
    public struct Remote: Sendable, Hashable {
        /// `s3://BUCKET/PREFIX`.
        public var location: String
        /// Options of `hot pull` and `hot publish` (`--endpoint URL`, `--region NAME`, …).
        public var options: [String]
        /// Options of `hot publish` alone (`--acl public-read`).
        public var publishOptions: [String]

        /// Creates a remote.
        public init(location: String, options: [String] = [], publishOptions: [String] = []) {
            self.location = location
            self.options = options
            self.publishOptions = publishOptions
        }
    }

    /// Creates a repository: the keys must be readable PEM private keys.
    public init(
        directory: URL,
        hot: URL,
        keys: [String],
        expires: String = "30d",
        role: Role = .release,
        remote: Remote? = nil,
        timestampKeys: [String] = []
    ) throws {
        guard !keys.isEmpty else { throw HotUpdateError(.invalidArgument, "give at least one --key") }
        guard role != .timestamp || timestampKeys.isEmpty else {
            throw HotUpdateError(
                .invalidArgument,
                "timestamp role keys sign with --key; --timestamp-key is for changes"
            )
        }
        for key in keys + timestampKeys {
            guard let pem = try? String(contentsOfFile: key, encoding: .utf8), pem.contains("PRIVATE KEY") else {
                throw HotUpdateError(.invalidArgument, "\(key) is not a readable PEM private key")
            }
        }
        self.directory = directory
        self.hot = hot
        self.keys = keys
        self.expires = expires
        self.role = role
        self.remote = remote
        self.timestampKeys = timestampKeys
    }

    /// One package in one channel's manifest.
    public struct PackageState: Sendable, Hashable {
        /// The channel; empty for the root manifest.
        public var channel: String
        /// The package id.
        public var id: String
        /// The releases, oldest first; the last is current.
        public var releases: [String]
        /// Every version listed.
        public var versions: [String]
        /// The current release's rollout percentage (100 when the manifest sets none).
        public var rollout: Int
        /// Whether the package is disabled.
        public var disabled: Bool
        /// The current release.
        public var current: String? { releases.last }
        /// The release before it.
        public var previous: String? { releases.count >= 2 ? releases[releases.count - 2] : nil }
    }

    /// Every package of every channel, as the signed manifests say now (pulled first from
    /// ``remote``, when there is one).
    public func packages() throws -> [PackageState] {
        try pull()
        return try localPackages()
    }

    /// Every package of every channel in ``directory``.
    private func localPackages() throws -> [PackageState] {
        var result: [PackageState] = []
        for channel in channelNames() {
            guard let data = try? Data(contentsOf: manifestURL(channel: channel)) else { continue }
            let body: SignedManifestBody
            if let envelope = try SignedEnvelope.read(data) {
                body = try envelope.effectiveBody(verifier: CryptoVerifier())
            } else {
                continue
            }
            for package in body.packages {
                result.append(
                    PackageState(
                        channel: channel,
                        id: package.id,
                        releases: package.releases,
                        versions: package.versions.map(\.version),
                        rollout: package.rollout ?? 100,
                        disabled: package.disabled
                    )
                )
            }
        }
        return result
    }

    /// A change the console or the rollout command makes.
    public enum Change: Sendable, Hashable {
        /// Make `version` current, to `rollout` percent of clients (nil: all).
        case release(version: String, rollout: Int?)
        /// Make the previous release, or `to`, current again.
        case rollback(to: String?)
        /// Stop clients using the package.
        case disable
        /// Let them use it again.
        case enable
    }

    /// Checks a name before it is passed to `hot`: a package id, version or channel as the
    /// library accepts one (``PackageDescriptor/validateComponent(_:what:)``: 1–128 letters,
    /// digits and `. _ - + ~`), and not starting with `-`, which `hot` would read as an option.
    ///
    /// - Throws: ``HotUpdateError/Code/invalidArgument`` saying which name is wrong and why.
    public static func validateName(_ value: String, what: String) throws {
        do {
            try PackageDescriptor.validateComponent(value, what: what)
        } catch let error as HotUpdateError {
            throw HotUpdateError(.invalidArgument, error.message)
        }
        guard !value.hasPrefix("-") else {
            throw HotUpdateError(.invalidArgument, "\(what) '\(value)' must not start with '-'")
        }
    }

    /// Checks every name `change` passes to `hot`: the package id, the channel (empty for
    /// the root manifest) and the versions the change names.
    ///
    /// - Throws: ``HotUpdateError/Code/invalidArgument`` for the first name that is wrong.
    public static func validate(_ change: Change, package: String, channel: String) throws {
        try validateName(package, what: "package id")
        if !channel.isEmpty { try validateName(channel, what: "channel") }
        switch change {
        case .release(let version, let rollout):
            try validateName(version, what: "version")
            if let rollout, !(0...100).contains(rollout) {
                throw HotUpdateError(.invalidArgument, "the rollout is a percentage from 0 to 100, not \(rollout)")
            }
        case .rollback(let to):
            if let to { try validateName(to, what: "version") }
        case .disable, .enable:
            break
        }
    }

    /// Applies `change` to `package` in `channel` and signs the manifest (and, with
    /// ``timestampKeys``, the channel's timestamp over it).
    ///
    /// Every name is checked first (``validate(_:package:channel:)``), and the package id and
    /// version are passed after `--`, so no value can reach `hot` as an option.
    ///
    /// - Returns: What `hot` printed.
    /// - Throws: ``HotUpdateError/Code/invalidArgument`` for a bad name (`hot` is not run);
    ///   ``HotUpdateError/Code/timestampRoleExceeded`` with timestamp role keys, which sign no
    ///   change; `HotUpdateError` with `hot`'s error line when a step fails.
    @discardableResult
    public func apply(_ change: Change, package: String, channel: String) throws -> String {
        try Self.validate(change, package: package, channel: channel)
        guard role != .timestamp else {
            throw HotUpdateError(
                .timestampRoleExceeded,
                "this server holds timestamp role keys, which sign timestamps and no change",
                packageID: package
            )
        }
        try pull()
        let where_ = ["--repo", directory.path] + (channel.isEmpty ? [] : ["--channel", channel])
        let timestampOptions = timestampKeys.flatMap { ["--timestamp-key", $0] }
        if role == .rollout {
            let step = try rolloutStep(change, package: package, channel: channel)
            let printed = try run(
                [step.command] + step.options + where_ + keys.flatMap { ["--key", $0] } + timestampOptions
                    + ["--", package]
            )
            try publish()
            return printed
        }
        let command: [String]
        switch change {
        case .release(let version, let rollout):
            command =
                ["release"] + (rollout.map { ["--rollout", String($0)] } ?? []) + where_ + ["--", package, version]
        case .rollback(let to):
            command = ["rollback"] + (to.map { ["--to", $0] } ?? []) + where_ + ["--", package]
        case .disable: command = ["disable"] + where_ + ["--", package]
        case .enable: command = ["enable"] + where_ + ["--", package]
        }
        let edited = try run(command)
        try run(["sign"] + where_ + keys.flatMap { ["--key", $0] } + ["--expires", expires])
        if !timestampKeys.isEmpty {
            try run(["timestamp"] + where_ + timestampKeys.flatMap { ["--key", $0] })
        }
        try publish()
        return edited
    }

    /// What signing one channel's timestamp came to.
    public struct TimestampOutcome: Sendable, Hashable {
        /// The channel; empty for the root manifest.
        public var channel: String
        /// What `hot timestamp` printed (the timestamp, the manifest version it names, its
        /// expiry), or nil when it failed.
        public var signed: String?
        /// Why it failed, or nil.
        public var error: String?
    }

    /// Signs the timestamp of every channel whose manifest is signed with ``keys`` (pulled
    /// first from ``remote``, and published back when one was signed): what a timestamp
    /// machine runs on a schedule, well within `expires`.
    ///
    /// A channel that fails (an unsigned manifest, keys the manifest does not delegate to, a
    /// role bound passed) is reported and does not stop the others.
    ///
    /// - Parameter expires: `hot timestamp --expires` (`12h`, `1d`); a day, within the role's
    ///   bound, when nil.
    /// - Returns: One outcome per channel with a manifest, the root manifest first.
    /// - Throws: `HotUpdateError` when pulling or publishing fails.
    public func signTimestamps(expires: String?) throws -> [TimestampOutcome] {
        try pull()
        var outcomes: [TimestampOutcome] = []
        for channel in channelNames() {
            let where_ = ["--repo", directory.path] + (channel.isEmpty ? [] : ["--channel", channel])
            do {
                let printed = try run(
                    ["timestamp"] + where_ + keys.flatMap { ["--key", $0] }
                        + (expires.map { ["--expires", $0] } ?? [])
                )
                outcomes.append(TimestampOutcome(channel: channel, signed: printed, error: nil))
            } catch {
                outcomes.append(TimestampOutcome(channel: channel, signed: nil, error: "\(error)"))
            }
        }
        if outcomes.contains(where: { $0.signed != nil }) { try publish() }
        return outcomes
    }

    /// The channels with a manifest in ``directory``: "" for the root manifest, then each of
    /// `channels/`, sorted.
    private func channelNames() -> [String] {
        let channels = directory.appendingPathComponent("channels")
        let names = [""] + ((try? FileManager.default.contentsOfDirectory(atPath: channels.path)) ?? []).sorted()
        return names.filter { FileManager.default.fileExists(atPath: manifestURL(channel: $0).path) }
    }

    /// The manifest of `channel` ("" for the root manifest) in ``directory``.
    private func manifestURL(channel: String) -> URL {
        channel.isEmpty
            ? directory.appendingPathComponent("manifest.json")
            : directory.appendingPathComponent("channels").appendingPathComponent(channel)
                .appendingPathComponent("manifest.json")
    }

    /// Brings the live manifests of ``remote`` into ``directory``.
    private func pull() throws {
        guard let remote else { return }
        try run(["pull", remote.location, "--repo", directory.path] + remote.options)
    }

    /// Publishes ``directory``'s manifests to ``remote``: the bucket serves the change.
    private func publish() throws {
        guard let remote else { return }
        try run(["publish", directory.path, remote.location] + remote.options + remote.publishOptions)
    }

    /// The `hot rollout` command and options of `change`, which the rollout role may sign
    /// only when it sets the current release's percentage or rolls back; the package id goes
    /// after them, behind `--`.
    private func rolloutStep(
        _ change: Change,
        package: String,
        channel: String
    ) throws -> (command: String, options: [String]) {
        let refusal = { (what: String) in
            HotUpdateError(
                .rolloutRoleExceeded,
                "\(what) needs the release keys; this server holds rollout role keys, which set percentages and roll back",
                packageID: package
            )
        }
        switch change {
        case .release(let version, let rollout):
            let current = try localPackages().first { $0.channel == channel && $0.id == package }?.current
            guard version == current else { throw refusal("releasing \(version)") }
            return ("rollout", ["--percent", String(rollout ?? 100)])
        case .rollback(let to):
            return ("rollout", ["--back"] + (to.map { ["--to", $0] } ?? []))
        case .disable: throw refusal("disabling")
        case .enable: throw refusal("enabling")
        }
    }

    @discardableResult
    private func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = hot
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        let complaint = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let line = String(decoding: complaint, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
            throw HotUpdateError(.invalidArgument, "hot \(arguments.first ?? "") failed: \(line)")
        }
        return String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The `hot` executable: beside this one, else on `PATH`.
    public static func findHot(named explicit: String?) -> URL? {
        if let explicit { return URL(fileURLWithPath: explicit) }
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent()
            .appendingPathComponent("hot")
        if FileManager.default.isExecutableFile(atPath: beside.path) { return beside }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent("hot")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }
}
