import Foundation
import HotCore

/// A delta package as a manifest lists it under a version (`"deltas"`, an optional
/// addition to schemas 1 and 2 that older clients ignore): the version it applies to, the
/// digest of that version's full archive, and where the delta is and how to check it.
///
/// ```json
/// {"version": "4", "url": "packages/images-4-2c26b46b68ff.zip", "size": 49002, "sha256": "…",
///  "deltas": [{"format": 1, "from": "3", "fromSHA256": "…",
///              "url": "packages/images-3-to-4-77af778b51ab.delta", "size": 812, "sha256": "…"}]}
/// ```
///
/// `format` is the delta layout's version (`PackageDescriptor.Delta.format` in HotCore); a client skips
/// a delta of a format it does not read and fetches the full package.
public struct DeltaEntry: Codable, Sendable, Hashable {
    /// The delta layout's format.
    public var format: Int
    /// The base version.
    public var from: String
    /// The SHA-256 of the base version's full archive, hex.
    public var fromSHA256: String
    /// Where the delta is, relative to the manifest or absolute.
    public var url: String
    /// The delta's size in bytes.
    public var size: Int64
    /// The delta's SHA-256, hex.
    public var sha256: String

    /// Creates an entry.
    public init(
        format: Int = PackageDescriptor.Delta.format,
        from: String,
        fromSHA256: String,
        url: String,
        size: Int64,
        sha256: String
    ) {
        self.format = format
        self.from = from
        self.fromSHA256 = fromSHA256
        self.url = url
        self.size = size
        self.sha256 = sha256
    }

    /// The entry resolved against `baseURL`, or nil for a format this code does not read.
    ///
    /// - Throws: `HotUpdateError.Code.manifestInvalid` for a bad URL, digest or version.
    public func delta(relativeTo baseURL: URL, packageID: String) throws -> PackageDescriptor.Delta? {
        guard format == PackageDescriptor.Delta.format else { return nil }
        guard !url.isEmpty, let resolved = URL(string: url, relativeTo: baseURL)?.absoluteURL else {
            throw HotUpdateError(.manifestInvalid, "delta url '\(url)' is not a URL", packageID: packageID)
        }
        do {
            return try PackageDescriptor.Delta(
                baseVersion: from,
                baseSHA256: try Digest(algorithm: .sha256, hex: fromSHA256),
                url: resolved,
                size: size,
                sha256: try Digest(algorithm: .sha256, hex: sha256)
            )
        } catch let error as HotUpdateError {
            throw HotUpdateError(.manifestInvalid, error.message, packageID: packageID)
        }
    }
}
