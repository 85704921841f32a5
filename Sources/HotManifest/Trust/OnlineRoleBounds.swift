import Foundation
import HotCore

/// The bounds the release keys set on a role whose key lives on an online machine (the
/// rollout role): how far past the release manifest it wraps a part it signs may go.
///
/// A part of such a role is tied to the release manifest it wraps:
///
/// - its version is above the release's and at most ``maxVersionLead`` above it, so a stolen
///   key cannot sign a version the release keys' next manifest could not climb over;
/// - it is signed no earlier than the release, and expires no later than the release's own
///   expiry or its signing time plus ``maxLifetime``, whichever is later.
///
/// The release keys keep their side of the bound: `hot sign` signs the next release above
/// every version a part of the previous one could carry (``nextReleaseVersion(after:release:bounds:)``),
/// so no part of an older release is ever above a newer release. Every number stays within
/// ±``maxInteger``, the range the strict reader accepts.
public struct OnlineRoleBounds: Sendable, Hashable {
    /// The largest integer magnitude a signed document may carry: 2^53 − 1, beyond which
    /// not every JSON parser reads a number exactly (the strict reader refuses it).
    public static let maxInteger = Int(StrictJSON.maxInteger)
    /// ``maxLifetime`` when the release keys set none: 14 days.
    public static let defaultMaxLifetime = 14 * 86_400
    /// ``maxVersionLead`` when the release keys set none: 1000 versions.
    public static let defaultMaxVersionLead = 1_000

    /// How long after the release manifest's signing time a part may keep the manifest
    /// valid, in seconds; a part may always expire as late as the release itself.
    public var maxLifetime: Int
    /// How far above the release manifest's version a part's version may go: the number of
    /// steps the role can sign for one release.
    public var maxVersionLead: Int

    /// Creates bounds.
    public init(
        maxLifetime: Int = Self.defaultMaxLifetime,
        maxVersionLead: Int = Self.defaultMaxVersionLead
    ) {
        self.maxLifetime = maxLifetime
        self.maxVersionLead = maxVersionLead
    }

    /// Refuses bounds that are not positive or that the strict reader would refuse.
    ///
    /// - Parameter role: Names the role in the message ("the rollout role").
    /// - Throws: `HotUpdateError.Code.manifestInvalid`.
    public func validate(role: String) throws {
        for (name, value) in [("maxLifetime", maxLifetime), ("maxVersionLead", maxVersionLead)] {
            guard (1...Self.maxInteger).contains(value) else {
                throw HotUpdateError(
                    .manifestInvalid,
                    "\(role)'s \(name) \(value) is not between 1 and 2^53 − 1"
                )
            }
        }
    }

    /// The highest version a part over a release manifest of version `releaseVersion` may
    /// carry: `releaseVersion` plus ``maxVersionLead``, and never above ``maxInteger``.
    public func latestVersion(over releaseVersion: Int) -> Int {
        guard releaseVersion < Self.maxInteger else { return Self.maxInteger }
        return releaseVersion + min(max(0, maxVersionLead), Self.maxInteger - releaseVersion)
    }

    /// The latest instant a part over `release` may expire: the later of the release's own
    /// expiry and its signing time plus ``maxLifetime``.
    public func expiryBound(of release: SignedManifestBody) -> Date {
        max(release.expires, release.signedAt.map { $0.addingTimeInterval(TimeInterval(maxLifetime)) } ?? .distantPast)
    }

    /// Refuses a part over `release` whose version, signing time or expiry the bounds do not
    /// allow.
    ///
    /// - Parameters:
    ///   - version: The part's version.
    ///   - signedAt: When the role signed it.
    ///   - expires: When it expires.
    ///   - release: The release manifest it wraps.
    ///   - part: Names the part in messages ("the rollout part").
    ///   - code: The code of the refusal.
    /// - Throws: `code`, naming the first bound exceeded.
    public func check(
        version: Int,
        signedAt: Date,
        expires: Date,
        over release: SignedManifestBody,
        part: String,
        code: HotUpdateError.Code
    ) throws {
        guard version > release.version else {
            throw HotUpdateError(
                code,
                "\(part)'s version \(version) is not above the release manifest's \(release.version)"
            )
        }
        let latest = latestVersion(over: release.version)
        guard version <= latest else {
            throw HotUpdateError(
                code,
                "\(part)'s version \(version) is past \(latest), the release manifest's version \(release.version) plus the \(maxVersionLead) versions its keys allow; only the release keys can go further"
            )
        }
        try checkTimes(signedAt: signedAt, expires: expires, over: release, part: part, code: code)
    }

    /// Refuses a part over `release` signed before it or after its own expiry, or that
    /// expires past ``expiryBound(of:)``: the bounds on time, for parts whose version is
    /// checked otherwise (a timestamp carries the version of the manifest it names).
    ///
    /// - Parameters:
    ///   - signedAt: When the role signed it.
    ///   - expires: When it expires.
    ///   - release: The release manifest it is over.
    ///   - part: Names the part in messages ("the timestamp").
    ///   - code: The code of the refusal.
    /// - Throws: `code`, naming the first bound exceeded.
    public func checkTimes(
        signedAt: Date,
        expires: Date,
        over release: SignedManifestBody,
        part: String,
        code: HotUpdateError.Code
    ) throws {
        try Self.checkTimes(
            signedAt: signedAt,
            expires: expires,
            releaseSignedAt: release.signedAt,
            bound: expiryBound(of: release),
            part: part,
            code: code
        )
    }

    /// ``checkTimes(signedAt:expires:over:part:code:)`` with the release's signing time and
    /// the expiry bound already worked out; a nil `bound` bounds nothing (the release keys'
    /// own timestamps).
    ///
    /// - Throws: `code`, naming the first bound exceeded.
    public static func checkTimes(
        signedAt: Date,
        expires: Date,
        releaseSignedAt: Date?,
        bound: Date?,
        part: String,
        code: HotUpdateError.Code
    ) throws {
        if let releaseSignedAt, signedAt < releaseSignedAt {
            throw HotUpdateError(
                code,
                "\(part) was signed at \(SignedManifestBody.rfc3339(signedAt)), before its release manifest (\(SignedManifestBody.rfc3339(releaseSignedAt)))"
            )
        }
        guard signedAt <= expires else {
            throw HotUpdateError(code, "\(part) was signed after it expires")
        }
        if let bound, expires > bound {
            throw HotUpdateError(
                code,
                "\(part) expires at \(SignedManifestBody.rfc3339(expires)), past the role's bound \(SignedManifestBody.rfc3339(bound)); only the release keys can extend it"
            )
        }
    }

    /// The version the release keys sign next: above `current` (the version clients act on
    /// now, a part's included) and above every version a part of `release`, the previous
    /// release manifest, could carry under `bounds`, the bounds it declared.
    ///
    /// - Parameters:
    ///   - current: The highest version served so far.
    ///   - release: The previous release manifest's version, or nil when unknown (then
    ///     `current` stands for it: it is never below it).
    ///   - bounds: The bounds the previous release declared for its online role, if any.
    /// - Throws: `HotUpdateError.Code.manifestInvalid` when that version is beyond
    ///   ``maxInteger``: clients would refuse the manifest.
    public static func nextReleaseVersion(after current: Int, release: Int?, bounds: OnlineRoleBounds?) throws -> Int {
        var lowest = current
        if let bounds {
            let base = release ?? current
            guard base <= maxInteger - bounds.maxVersionLead else {
                throw HotUpdateError(
                    .manifestInvalid,
                    "the next manifest would need a version above \(base) plus the online role's \(bounds.maxVersionLead) versions, beyond 2^53 − 1, which clients refuse"
                )
            }
            lowest = max(lowest, base + bounds.maxVersionLead)
        }
        guard lowest < maxInteger else {
            throw HotUpdateError(
                .manifestInvalid,
                "the next manifest's version would be above \(lowest), beyond 2^53 − 1, which clients refuse"
            )
        }
        return lowest + 1
    }

    /// Refuses a signed integer outside ±``maxInteger``, which clients would refuse.
    ///
    /// - Parameters:
    ///   - value: The integer.
    ///   - name: What it is, for the message.
    /// - Throws: `HotUpdateError.Code.manifestInvalid`.
    public static func requireRepresentable(_ value: Int, _ name: String) throws {
        guard value.magnitude <= UInt(maxInteger) else {
            throw HotUpdateError(
                .manifestInvalid,
                "\(name) \(value) is beyond ±(2^53 − 1), which clients refuse"
            )
        }
    }
}
