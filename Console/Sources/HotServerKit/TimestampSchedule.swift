import Foundation
import HotCore
import HotManifest

/// The timing of `hot-server timestamp --every`: how long each timestamp lasts, and how soon a
/// failed round is tried again.
public enum TimestampSchedule {
    /// The longest wait after a round that failed before the next one, in seconds: a
    /// timestamp machine that lost its network or met a manifest it could not sign tries
    /// again well before clients' timestamps run out.
    public static let retry: Double = 60

    /// How many seconds a timestamp signed with `hot timestamp --expires expires` lasts at
    /// most: a duration (`30d`, `12h`, `15m`, `2s`), or a day when nil (the role's bound may
    /// make it shorter).
    ///
    /// - Throws: ``HotUpdateError/Code/invalidArgument`` for an absolute time (a schedule
    ///   signs again and again, each time for the same length) or anything else.
    public static func lifetime(of expires: String?) throws -> Double {
        guard let expires else { return Double(TimestampPart.defaultLifetime) }
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400]
        guard let unit = expires.last, let seconds = units[unit], let count = Double(expires.dropLast()), count > 0
        else {
            throw HotUpdateError(
                .invalidArgument,
                "a schedule signs timestamps for a length: --expires takes 1d, 12h, 15m or 2s, not '\(expires)'"
            )
        }
        return count * seconds
    }
}
