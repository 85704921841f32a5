import Foundation
import HotCore
import HotManifest
import HotVerify

/// A static repository on disk, as `hot` writes it and a web server serves it: package files
/// named by their content, and one signed manifest per channel.
///
/// Every change edits one channel's manifest and leaves it unsigned (``sign(with:expires:channel:options:now:)``
/// signs it), or signs it; each holds the repository's lock for its whole length, the one
/// `hot` takes, so a service and an operator's terminal never interleave two changes: the one
/// that comes second is refused with `HotUpdateError.Code.storeBusy` and changes nothing.
///
/// ```swift
/// let repository = Repository(directory: URL(fileURLWithPath: "/srv/updates"))
/// try repository.release("web", version: "12", rollout: 10)
/// let signed = try repository.sign(with: [try ReleaseKey.signer("release.pem")], expires: Date().addingTimeInterval(30 * 86_400))
/// print(signed.summary)
/// ```
public struct Repository: Sendable {
    /// The repository's directory.
    public let directory: URL

    /// Whether this value stands for a holder of the lock (``exclusively(_:)``): its changes
    /// do not take it again.
    let holdsLock: Bool

    /// The repository in `directory` (made by the first change when it does not exist).
    public init(directory: URL) {
        self.directory = directory.standardizedFileURL
        self.holdsLock = false
    }

    private init(holding directory: URL) {
        self.directory = directory
        self.holdsLock = true
    }

    /// Runs `body` holding the repository's lock for all of it: the changes `body` makes
    /// through the repository it is given (pull, change, sign, publish) come one after the
    /// other with no other change between them.
    ///
    /// - Throws: `HotUpdateError.Code.storeBusy` when another change holds the lock; what
    ///   `body` throws.
    public func exclusively<T>(_ body: (Repository) async throws -> T) async throws -> T {
        if holdsLock { return try await body(self) }
        return try await RepositoryLock.holding(directory) { try await body(Repository(holding: directory)) }
    }

    /// Runs `body` under the lock, unless this value already holds it.
    func locked<T>(_ body: () throws -> T) throws -> T {
        if holdsLock { return try body() }
        return try RepositoryLock.holding(directory, body)
    }

    /// ``locked(_:)`` for a change that waits.
    func lockedAwaiting<T>(_ body: () async throws -> T) async throws -> T {
        if holdsLock { return try await body() }
        return try await RepositoryLock.holding(directory, body)
    }

    var files: RepositoryFiles { RepositoryFiles(root: directory) }

    /// What a change did: a line for people, and the file it left to be signed.
    public struct Change: Sendable, Hashable {
        /// `released web 12 to 10% of clients`, `rolled back web to 11`, `disabled web`.
        public var summary: String
        /// The file the change wrote unsigned, relative to the repository: the channel's
        /// manifest, or a sharded channel's top document.
        public var unsignedPath: String
    }

    /// Who may get a release: app versions and when clients download it.
    public struct ReleasePolicy: Sendable, Hashable {
        /// The lowest app version the release is for (inclusive); empty clears it, nil keeps it.
        public var minAppVersion: String?
        /// The highest app version the release is for (inclusive); empty clears it, nil keeps it.
        public var maxAppVersion: String?
        /// When clients download the package; nil keeps it.
        public var delivery: DeliveryMode?

        /// A policy; each nil field keeps what the manifest says.
        public init(minAppVersion: String? = nil, maxAppVersion: String? = nil, delivery: DeliveryMode? = nil) {
            (self.minAppVersion, self.maxAppVersion, self.delivery) = (minAppVersion, maxAppVersion, delivery)
        }

        func apply(to package: inout SignedManifestBody.Package) {
            if let minAppVersion { package.minAppVersion = minAppVersion.isEmpty ? nil : minAppVersion }
            if let maxAppVersion { package.maxAppVersion = maxAppVersion.isEmpty ? nil : maxAppVersion }
            if let delivery { package.setDelivery(delivery) }
        }
    }

    /// Makes a packed `version` the current release of package `id` in `channel`, for
    /// `rollout` percent of clients (chosen by each client's id) or all of them.
    ///
    /// - Throws: `HotUpdateError.Code.notFound` when the version is not packed in the
    ///   repository; `HotUpdateError.Code.invalidArgument` for a percentage outside 0–100 or
    ///   a version listed with other content; `HotUpdateError.Code.pathCollision` for an id
    ///   that differs from another only by case; `HotUpdateError.Code.storeBusy` while
    ///   another change holds the repository.
    @discardableResult
    public func release(
        _ id: String,
        version: String,
        channel: String? = nil,
        rollout: Int? = nil,
        policy: ReleasePolicy = ReleasePolicy()
    ) throws -> Change {
        try Self.validate(channel: channel)
        if let rollout, !(0...100).contains(rollout) {
            throw HotUpdateError(.invalidArgument, "a rollout is a percentage from 0 to 100, not \(rollout)")
        }
        return try locked {
            let files = self.files
            // The package alone: in a sharded channel, its shard and the top document.
            var edit = try files.loadPackage(id, channel: channel)
            let listed = edit.package?.entry(for: version)
            let entry = try listed ?? files.findPackedVersion(id: id, version: version, channel: channel)
            if edit.package == nil {
                try PathCollision.check(
                    edit.others + [id],
                    caseSensitive: false,
                    what: "the package ids of the manifest"
                )
            }
            try edit.edit { package in
                try package.addVersion(entry)
                package.release(version, rollout: rollout)
                policy.apply(to: &package)
            }
            try files.save(edit, channel: channel)
            return Change(
                summary: "released \(id) \(version)" + (rollout.map { " to \($0)% of clients" } ?? ""),
                unsignedPath: changedPath(channel)
            )
        }
    }

    /// Makes the previous release of package `id` (or `to`) current again in `channel`. The
    /// package files stay: clients that kept the older version switch back without a download.
    ///
    /// - Returns: The change; ``Change/summary`` names the version now current.
    /// - Throws: `HotUpdateError.Code.notFound` when the package has no earlier release (or
    ///   `to` is not listed); `HotUpdateError.Code.storeBusy` while another change holds the
    ///   repository.
    @discardableResult
    public func rollback(_ id: String, to: String? = nil, channel: String? = nil) throws -> Change {
        try Self.validate(channel: channel)
        var restored = ""
        try edit(channel: channel) { body in
            guard let package = body.package(id), let current = package.current else {
                throw HotUpdateError(.notFound, "the package has no release in this channel", packageID: id)
            }
            guard let target = to ?? package.previous, target != current else {
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
        return Change(summary: "rolled back \(id) to \(restored)", unsignedPath: changedPath(channel))
    }

    /// Makes clients stop using package `id` (`disabled`: they keep its files and fall back to
    /// the bundled copy) or use it again.
    ///
    /// - Throws: `HotUpdateError.Code.notFound` when the package is not in the channel;
    ///   `HotUpdateError.Code.storeBusy` while another change holds the repository.
    @discardableResult
    public func setDisabled(_ disabled: Bool, _ id: String, channel: String? = nil) throws -> Change {
        try Self.validate(channel: channel)
        try edit(channel: channel) { body in
            guard body.package(id) != nil else {
                throw HotUpdateError(.notFound, "the package is not in this channel", packageID: id)
            }
            body.editPackage(id) { $0.disabled = disabled }
        }
        return Change(summary: "\(disabled ? "disabled" : "enabled") \(id)", unsignedPath: changedPath(channel))
    }

    /// Lists `channel`'s packages in shards (up to 256, by the hash of their ids) named by a
    /// small top document, so that a change to one package re-writes one shard; nil when the
    /// channel is sharded already. The top document is left unsigned.
    ///
    /// - Throws: `HotUpdateError.Code.storeBusy` while another change holds the repository.
    public func shard(channel: String? = nil) throws -> Change? {
        try Self.validate(channel: channel)
        return try locked {
            let files = self.files
            guard !files.isSharded(channel: channel) else { return nil }
            let body = try files.loadBody(channel: channel)
            try files.saveSharded(body, channel: channel)
            let top = try files.loadTop(channel: channel).top
            return Change(
                summary:
                    "sharded \(files.manifestPath(channel: channel)): \(body.packages.count) packages in \(top.shards?.count ?? 0) shards",
                unsignedPath: files.topPath(channel: channel)
            )
        }
    }

    /// What a signed timestamp names, for people.
    public struct SignedTimestamp: Sendable, Hashable {
        /// `signed timestamp.json naming manifest version 7 (812 bytes), expires …`.
        public var summary: String
        /// The manifest version the timestamp names.
        public var manifestVersion: Int
        /// When the timestamp expires.
        public var expires: Date
    }

    /// Signs `channel`'s timestamp (`timestamp.json` beside its manifest) naming the manifest
    /// as it is on disk, with the timestamp role's keys (or the release keys where the
    /// manifest declares no role), expiring at `expires` (by default a day on, within the
    /// role's bound).
    ///
    /// - Throws: `HotUpdateError.Code.manifestUnsigned` before the release keys signed the
    ///   manifest; `HotUpdateError.Code.timestampUnauthorized` when the signers are not a
    ///   threshold of the role's keys; `HotUpdateError.Code.timestampRoleExceeded` past the
    ///   role's bound; `HotUpdateError.Code.storeBusy` while another change holds the repository.
    public func signTimestamp(
        with signers: [any Signer],
        expires: Date? = nil,
        channel: String? = nil,
        now: Date = Date()
    ) throws -> SignedTimestamp {
        try Self.validate(channel: channel)
        guard !signers.isEmpty else { throw HotUpdateError(.invalidArgument, "give at least one key") }
        return try locked {
            let signed = try TimestampSigner(files: files, channel: channel).sign(
                with: signers,
                expires: expires,
                now: now
            )
            return SignedTimestamp(
                summary: signed.summary,
                manifestVersion: signed.part.manifest.version,
                expires: signed.part.expires
            )
        }
    }

    /// Loads `channel`'s manifest, lets `change` edit it, and saves it unsigned, holding the lock.
    func edit(channel: String?, _ change: (inout SignedManifestBody) throws -> Void) throws {
        try locked {
            let files = self.files
            var body = try files.loadBody(channel: channel)
            try change(&body)
            try files.saveUnsigned(body, channel: channel)
        }
    }

    /// What an edit writes: the manifest, or a sharded channel's top document.
    func changedPath(_ channel: String?) -> String {
        files.isSharded(channel: channel) ? files.topPath(channel: channel) : files.manifestPath(channel: channel)
    }

    /// Refuses a channel name that is not one path component.
    static func validate(channel: String?) throws {
        if let channel { try PackageDescriptor.validateComponent(channel, what: "channel") }
    }
}

extension Repository {
    /// The time `text` names: a duration from `now` (`30d`, `12h`, `15m`, `2s`) or an ISO 8601
    /// time (`2027-01-31T00:00:00Z`), as `hot sign --expires` takes it.
    ///
    /// - Throws: `HotUpdateError.Code.invalidArgument` for anything else.
    public static func expiry(_ text: String, now: Date = Date()) throws -> Date {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400]
        if let unit = text.last, let seconds = units[unit], let count = Double(text.dropLast()), count > 0 {
            return now.addingTimeInterval(count * seconds)
        }
        if let date = SignedManifestBody.parseDate(text) { return date }
        throw HotUpdateError(
            .invalidArgument,
            "an expiry is 30d, 12h, 15m, 2s or an ISO 8601 time such as 2027-01-31T00:00:00Z, not '\(text)'"
        )
    }
}
