import Foundation
import HotCore

/// What a client has trusted, per channel, kept in `trust.json` under the store root so it
/// survives restarts: the highest manifest version (rollback defence), the digest of its
/// signed bytes (the same version with other content is refused), the release manifest a
/// rollout part wrapped (a part wrapping an older release is refused), and the keys and
/// threshold that manifest declared (key rotation).
package struct TrustState: Codable, Sendable, Hashable {
    /// The state of one channel.
    package struct Channel: Codable, Sendable, Hashable {
        /// The id of the root of trust the app was configured with when this was saved.
        /// When the app ships other root keys, the stored keys are replaced by them.
        package var rootFingerprint: String
        /// The highest manifest version trusted.
        package var version: Int
        /// The SHA-256 of that manifest's signed bytes, hex.
        package var signedSHA256: String
        /// The keys that manifest declared, by key id.
        package var keys: [String: SignedManifestBody.Key]
        /// The threshold that manifest declared.
        package var threshold: Int
        /// The version of the release manifest, as the release keys signed it, under the
        /// manifest trusted (which a rollout part may have raised above it). Nil in states
        /// saved before it was kept.
        package var releaseVersion: Int?
        /// The SHA-256, hex, of that release manifest's signed bytes.
        package var releaseSHA256: String?
        /// The SHA-256, hex, of the manifest file's bytes as served (the whole envelope), which
        /// a timestamp names; nil in states saved before it was kept.
        package var servedSHA256: String?
        /// When that manifest expires (its rollout part's expiry, when it has one).
        package var expires: Date?
        /// What its release manifest delegates the timestamp to: a timestamp naming it is
        /// checked against this without reading the manifest.
        package var timestampAuthority: TimestampAuthority?

        /// Creates a channel's state.
        package init(
            rootFingerprint: String,
            version: Int,
            signedSHA256: String,
            keys: [String: SignedManifestBody.Key],
            threshold: Int,
            releaseVersion: Int? = nil,
            releaseSHA256: String? = nil
        ) {
            self.rootFingerprint = rootFingerprint
            self.version = version
            self.signedSHA256 = signedSHA256
            self.keys = keys
            self.threshold = threshold
            self.releaseVersion = releaseVersion
            self.releaseSHA256 = releaseSHA256
        }
    }

    /// Raises the floor with what a release manifest whose signatures checked tells: its
    /// signing time, and the device's clock as read now, up to `lead` past the newest signing
    /// time (up to the manifest's expiry when no signing time is known). The floor never goes
    /// down. Only the release keys' times count: a rollout part's signing time and expiry are
    /// never passed here, so an online role's key cannot push a client's clock.
    package mutating func observe(signedAt: Date?, expires: Date, clock: Date, lead: TimeInterval) {
        if let signedAt { newestSigningTime = max(newestSigningTime ?? signedAt, signedAt) }
        let bound = newestSigningTime.map { $0.addingTimeInterval(max(0, lead)) } ?? expires
        let seen = max(signedAt ?? .distantPast, min(clock, bound))
        timeFloor = max(timeFloor ?? seen, seen)
    }

    /// How far the clock must have moved the time floor before the floor alone is written
    /// again: one hour. A floor kept up to this much behind only lets a clock set back accept
    /// a manifest that expired within that hour, never one the release keys' times exclude.
    package static let floorStep: TimeInterval = 3600

    /// Whether the floor moved from `previous` enough to be written: from none to some, or
    /// by at least ``floorStep``.
    package func floorMoved(since previous: Date?) -> Bool {
        guard let timeFloor else { return false }
        guard let previous else { return true }
        return timeFloor.timeIntervalSince(previous) >= Self.floorStep
    }

    /// The name of the file under the store root.
    package static let fileName = StoreLayout.trustFileName

    /// The schema of the file.
    package var schema: Int
    /// The state by channel name (`""` for a repository with one manifest).
    package var channels: [String: Channel]
    /// The latest time this client has seen from trustworthy sources: expiry is checked
    /// against the later of this and the device's clock (see ``ManifestTrust/clockLead``).
    /// Nil until a manifest with valid signatures was seen.
    package var timeFloor: Date?
    /// The latest signing time of a release manifest whose signatures checked; the device's clock
    /// raises the floor no further than ``ManifestTrust/clockLead`` past it.
    package var newestSigningTime: Date?

    /// Creates a state.
    package init(channels: [String: Channel] = [:]) {
        self.schema = 1
        self.channels = channels
    }

    /// Reads the state under `root`; a missing file is an empty state.
    ///
    /// - Throws: `HotUpdateError.Code.storeCorrupt` when the file exists but cannot be read:
    ///   a client that lost its trust state must not silently accept an older manifest.
    package static func load(root: URL) throws -> TrustState {
        try TrustState(stored: try StoreStateFile.trust.read(root: root))
    }

    /// The state in the stored bytes; nil bytes are an empty state.
    ///
    /// - Throws: `HotUpdateError.Code.storeCorrupt` when the bytes cannot be read.
    package init(stored data: Data?) throws {
        guard let data else {
            self.init()
            return
        }
        do {
            let state = try JSONDecoder().decode(TrustState.self, from: data)
            guard state.schema == 1 else {
                throw HotUpdateError(.storeCorrupt, "schema \(state.schema) is not supported", subject: Self.fileName)
            }
            self = state
        } catch {
            throw HotUpdateError.wrap(
                error,
                as: .storeCorrupt,
                "the trust state cannot be read; remove it only if you know why",
                packageID: nil
            )
        }
    }

    /// The state's bytes, as stored.
    ///
    /// - Throws: `HotUpdateError.Code.internalInconsistency` when it cannot be encoded.
    package func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        do {
            return try encoder.encode(self)
        } catch {
            throw HotUpdateError.wrap(error, as: .internalInconsistency, "cannot encode the trust state")
        }
    }
}
