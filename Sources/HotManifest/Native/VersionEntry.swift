import Foundation
import HotCore

/// One packed version of a package as a manifest lists it: where its archive is and how to
/// check it. The one schema of a version entry in both manifest schemas.
///
/// A signed (schema-2) manifest lists these under each package's `versions`
/// (``SignedManifestBody/Package/versions``); an unsigned (schema-1) manifest lists each
/// package as one of these with the package's `id` and `delivery` beside its fields
/// (``ManifestDocument/Entry``):
///
/// ```json
/// {"version": "3", "url": "packages/images-3-2c26b46b68ff.zip", "size": 49002, "sha256": "…",
///  "md5": "…", "unpackedSize": 98000}
/// ```
///
/// Fields that are absent stay absent when the entry is written again, so manifests written
/// before a field existed stay byte-identical.
public struct VersionEntry: Codable, Sendable, Hashable {
    /// The version string.
    public var version: String
    /// Where the archive is, relative to the manifest or absolute.
    public var url: String
    /// The archive's exact size in bytes.
    public var size: Int64
    /// The archive's SHA-256, hex.
    public var sha256: String
    /// The archive's MD5, hex, for older clients and tools that want one.
    public var md5: String?
    /// The bytes the package holds once unpacked (the sum of its files' sizes); the client
    /// makes it the unarchiver's exact limit. Absent in manifests written before it existed.
    public var unpackedSize: Int64?
    /// True when the archive's paths may differ only by case (`hot pack --case-sensitive-only`,
    /// `PackageDescriptor.caseSensitive`): clients on volumes that ignore case refuse it up
    /// front. Absent otherwise.
    public var caseSensitive: Bool?
    /// Delta packages from earlier versions to this one (`hot pack` builds them against
    /// the last releases); absent in manifests without deltas, which stay byte-identical.
    public var deltas: [DeltaEntry]?
    /// The password of the version's archive and its deltas (`hot pack --password`), which
    /// the client unpacks them with; absent for plain archives. It keeps the files from
    /// whoever has the archive but not the manifest, and from no one who reads the manifest.
    public var password: String?

    /// Creates a version entry.
    public init(
        version: String,
        url: String,
        size: Int64,
        sha256: String,
        md5: String? = nil,
        deltas: [DeltaEntry]? = nil
    ) {
        self.version = version
        self.url = url
        self.size = size
        self.sha256 = sha256
        self.md5 = md5
        self.deltas = deltas
    }

    /// Resolves the entry against `baseURL` (the manifest's URL) and validates it.
    ///
    /// - Parameters:
    ///   - id: The package's id.
    ///   - delivery: When the client downloads the package; nil means `DeliveryMode.prefetch`.
    ///   - baseURL: The manifest's URL, against which relative URLs resolve.
    /// - Throws: `HotUpdateError.Code.manifestInvalid` for a bad URL, digest, id, version or size.
    public func descriptor(id: String, delivery: DeliveryMode?, relativeTo baseURL: URL) throws -> PackageDescriptor {
        guard !url.isEmpty, let resolved = URL(string: url, relativeTo: baseURL)?.absoluteURL else {
            throw HotUpdateError(.manifestInvalid, "url '\(url)' is not a URL", packageID: id)
        }
        let sha256Digest: Digest
        let md5Digest: Digest?
        do {
            sha256Digest = try Digest(algorithm: .sha256, hex: sha256)
            md5Digest = try md5.map { try Digest(algorithm: .md5, hex: $0) }
        } catch let error as HotUpdateError {
            throw HotUpdateError(.manifestInvalid, error.message, packageID: id)
        }
        var descriptor = try PackageDescriptor(
            id: id,
            version: version,
            url: resolved,
            size: size,
            sha256: sha256Digest,
            md5: md5Digest
        )
        if let unpackedSize {
            guard unpackedSize >= 0 else {
                throw HotUpdateError(.manifestInvalid, "unpackedSize \(unpackedSize) is negative", packageID: id)
            }
            descriptor.unpackedSize = unpackedSize
        }
        descriptor.caseSensitive = caseSensitive ?? false
        descriptor.deltas = try (deltas ?? []).compactMap { try $0.delta(relativeTo: baseURL, packageID: id) }
        descriptor.password = password
        descriptor.delivery = delivery?.effective ?? .prefetch
        return descriptor
    }
}
