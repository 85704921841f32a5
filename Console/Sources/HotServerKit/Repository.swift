import Foundation
import HotCore
import HotManifest
import HotPublish
import HotVerify

/// A static repository as `hot` writes it, read for the console and the rollout command, and
/// changed in this process through HotPublish's ``HotPublish/Repository`` (no `hot`
/// executable is looked for or started): each change edits a channel's manifest and signs it
/// with the publisher's keys, or, given rollout role keys, is signed as a rollout step. Given
/// timestamp role keys, it signs each channel's timestamp, on a schedule or after each
/// change. Every change holds the repository's lock, the one `hot` takes: a change while
/// `hot` changes the repository is refused (`HotUpdateError.Code.storeBusy`), and nothing is
/// half-written.
public struct PublisherRepository: Sendable {
    /// What the keys may sign.
    public enum Role: String, Sendable, Hashable {
        /// Release keys: every change, signed as `hot sign` signs.
        case release
        /// Keys of the rollout role the release keys delegate to: the current release's
        /// percentage and rollbacks to a listed release, signed as `hot rollout` signs. A machine
        /// that advances rollouts on a schedule should hold these, never a release key.
        case rollout
        /// Keys of the timestamp role the release keys delegate to: each channel's
        /// timestamp, re-signed on a schedule (``signTimestamps(expires:)``), and nothing else.
        case timestamp
    }

    /// The repository directory.
    public let directory: URL
    /// The keys each change is signed with: PEM files or `pkcs11:` URIs.
    public let keys: [String]
    /// How long each signed manifest is valid (`30d`, `12h`, or an ISO 8601 time); rollout
    /// steps expire at the bound their release manifest gives the role.
    public let expires: String
    /// What ``keys`` may sign.
    public let role: Role
    /// Where the repository is published, when ``directory`` is a working copy of a bucket:
    /// its live manifests are pulled into ``directory`` before each read and change, and each
    /// change is published back; package files stay in the bucket.
    public let remote: S3Remote?
    /// Keys of the timestamp role (PEM files or `pkcs11:` URIs) that sign the changed
    /// channel's timestamp after each change (``apply(_:package:channel:)``), so clients see
    /// the change at once rather than at the next scheduled timestamp; none by default.
    public let timestampKeys: [String]

    private let signers: [any Signer]
    private let timestampSigners: [any Signer]
    private var repository: Repository { Repository(directory: directory) }

    /// Creates a repository; the keys are opened now (a PEM file read, a token logged in), so
    /// a wrong key fails here rather than at the first change.
    ///
    /// - Throws: `HotUpdateError.Code.invalidArgument` with no key or a key that cannot sign,
    ///   and what ``HotPublish/ReleaseKey/signer(_:rsaScheme:)`` throws for each key.
    public init(
        directory: URL,
        keys: [String],
        expires: String = "30d",
        role: Role = .release,
        remote: S3Remote? = nil,
        timestampKeys: [String] = []
    ) throws {
        guard !keys.isEmpty else { throw HotUpdateError(.invalidArgument, "give at least one --key") }
        guard role != .timestamp || timestampKeys.isEmpty else {
            throw HotUpdateError(
                .invalidArgument,
                "timestamp role keys sign with --key; --timestamp-key is for changes"
            )
        }
        _ = try Repository.expiry(expires)
        self.signers = try keys.map { try ReleaseKey.signer($0) }
        self.timestampSigners = try timestampKeys.map { try ReleaseKey.signer($0) }
        self.directory = directory
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
    public func packages() async throws -> [PackageState] {
        if let remote { try await repository.pull(from: remote) }
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

    /// Checks a name before any change: a package id, version or channel as the
    /// library accepts one (``PackageDescriptor/validateComponent(_:what:)``: 1–128 letters,
    /// digits and `. _ - + ~`), and not starting with `-`, which a command line would read as
    /// an option.
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

    /// Checks every name `change` names: the package id, the channel (empty for
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
    /// ``timestampKeys``, the channel's timestamp over it), all under one hold of the
    /// repository's lock: pulled first from ``remote`` and published back, when there is one.
    ///
    /// Every name is checked first (``validate(_:package:channel:)``).
    ///
    /// - Returns: What the change did (`released app 2`).
    /// - Throws: ``HotUpdateError/Code/invalidArgument`` for a bad name (nothing is changed);
    ///   ``HotUpdateError/Code/timestampRoleExceeded`` with timestamp role keys, which sign no
    ///   change; ``HotUpdateError/Code/storeBusy`` while `hot` or another server changes the
    ///   repository; the library's error when a step fails.
    @discardableResult
    public func apply(_ change: Change, package: String, channel: String) async throws -> String {
        try Self.validate(change, package: package, channel: channel)
        guard role != .timestamp else {
            throw HotUpdateError(
                .timestampRoleExceeded,
                "this server holds timestamp role keys, which sign timestamps and no change",
                packageID: package
            )
        }
        let channelName = channel.isEmpty ? nil : channel
        return try await repository.exclusively { repository in
            if let remote { try await repository.pull(from: remote) }
            let summary: String
            if role == .rollout {
                let step = try rolloutStep(change, package: package, channel: channel)
                summary = try repository.signRolloutStep(
                    package,
                    percent: step.percent,
                    back: step.back,
                    to: step.to,
                    with: signers,
                    timestampSigners: timestampSigners,
                    channel: channelName
                ).summary
            } else {
                switch change {
                case .release(let version, let rollout):
                    summary = try repository.release(package, version: version, channel: channelName, rollout: rollout)
                        .summary
                case .rollback(let to):
                    summary = try repository.rollback(package, to: to, channel: channelName).summary
                case .disable:
                    summary = try repository.setDisabled(true, package, channel: channelName).summary
                case .enable:
                    summary = try repository.setDisabled(false, package, channel: channelName).summary
                }
                let now = Date()
                _ = try repository.sign(
                    with: signers,
                    expires: try Repository.expiry(expires, now: now),
                    channel: channelName,
                    now: now
                )
                if !timestampSigners.isEmpty {
                    _ = try repository.signTimestamp(with: timestampSigners, channel: channelName, now: now)
                }
            }
            if let remote { _ = try await repository.publish(to: remote) }
            return summary
        }
    }

    /// What signing one channel's timestamp came to.
    public struct TimestampOutcome: Sendable, Hashable {
        /// The channel; empty for the root manifest.
        public var channel: String
        /// What was signed (the timestamp, the manifest version it names, its
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
    /// - Parameter expires: `12h`, `1d` or an ISO 8601 time; a day, within the role's
    ///   bound, when nil.
    /// - Returns: One outcome per channel with a manifest, the root manifest first.
    /// - Throws: `HotUpdateError` when pulling or publishing fails.
    public func signTimestamps(expires: String?) async throws -> [TimestampOutcome] {
        let now = Date()
        let until = try expires.map { try Repository.expiry($0, now: now) }
        return try await repository.exclusively { repository in
            if let remote { try await repository.pull(from: remote) }
            var outcomes: [TimestampOutcome] = []
            for channel in channelNames() {
                do {
                    let signed = try repository.signTimestamp(
                        with: signers,
                        expires: until,
                        channel: channel.isEmpty ? nil : channel,
                        now: now
                    )
                    outcomes.append(TimestampOutcome(channel: channel, signed: signed.summary, error: nil))
                } catch {
                    outcomes.append(TimestampOutcome(channel: channel, signed: nil, error: "\(error)"))
                }
            }
            if let remote, outcomes.contains(where: { $0.signed != nil }) {
                _ = try await repository.publish(to: remote)
            }
            return outcomes
        }
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

    /// The rollout step of `change`, which the rollout role may sign only when it sets the
    /// current release's percentage or rolls back.
    private func rolloutStep(
        _ change: Change,
        package: String,
        channel: String
    ) throws -> (percent: Int?, back: Bool, to: String?) {
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
            return (rollout ?? 100, false, nil)
        case .rollback(let to):
            return (nil, true, to)
        case .disable: throw refusal("disabling")
        case .enable: throw refusal("enabling")
        }
    }
}
