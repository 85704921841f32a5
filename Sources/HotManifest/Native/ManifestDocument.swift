import Foundation
import HotCore

/// The native manifest as it is stored: `manifest.json` at the root of a repository.
///
/// ```json
/// {"schema": 1, "packages": [
///   {"id": "images", "version": "3", "url": "packages/images-3.zip",
///    "size": 1234, "sha256": "…", "md5": "…"}
/// ]}
/// ```
///
/// `url` is relative to the manifest's own URL, or absolute. Publishers edit it with
/// `hot pack`; clients read it through ``StaticManifestSource``.
public struct ManifestDocument: Codable, Sendable, Hashable {
    /// The schema this code reads and writes.
    public static let currentSchema = 1

    /// One package entry.
    public struct Entry: Codable, Sendable, Hashable {
        /// The package id.
        public var id: String
        /// The package version.
        public var version: String
        /// Where the archive is, relative to the manifest or absolute.
        public var url: String
        /// The archive's size in bytes.
        public var size: Int64
        /// The archive's SHA-256, hex.
        public var sha256: String
        /// The archive's MD5, hex, for older clients.
        public var md5: String?
        /// The bytes the package holds once unpacked; the client's unarchiver limit when given.
        public var unpackedSize: Int64?
        /// True for a package for case-sensitive file systems only (see
        /// `PackageDescriptor.caseSensitive`).
        public var caseSensitive: Bool?
        /// Delta packages from earlier versions to this one, if the publisher built any.
        public var deltas: [DeltaEntry]?
        /// The password of the archive and its deltas, if they are encrypted.
        public var password: String?
        /// When the client downloads the package; absent means `DeliveryMode.prefetch`.
        public var delivery: DeliveryMode?

        /// Creates an entry.
        public init(
            id: String,
            version: String,
            url: String,
            size: Int64,
            sha256: String,
            md5: String? = nil,
            deltas: [DeltaEntry]? = nil
        ) {
            self.id = id
            self.version = version
            self.url = url
            self.size = size
            self.sha256 = sha256
            self.md5 = md5
            self.deltas = deltas
        }

        /// Resolves the entry against `baseURL` (the manifest's URL) and validates it.
        ///
        /// - Throws: `HotUpdateError.Code.manifestInvalid` for a bad URL, digest, id or version.
        public func descriptor(relativeTo baseURL: URL) throws -> PackageDescriptor {
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

    /// The schema number; must be ``currentSchema``.
    public var schema: Int
    /// The manifest's version, if the publisher keeps one.
    public var version: Int?
    /// The packages.
    public var packages: [Entry]

    /// Creates a document.
    public init(schema: Int = ManifestDocument.currentSchema, version: Int? = nil, packages: [Entry] = []) {
        self.schema = schema
        self.version = version
        self.packages = packages
    }

    /// Parses a document.
    ///
    /// - Throws: `HotUpdateError.Code.manifestInvalid` when `data` is not a manifest.
    public static func decode(_ data: Data) throws -> ManifestDocument {
        let document: ManifestDocument
        do {
            document = try JSONDecoder().decode(ManifestDocument.self, from: data)
        } catch {
            throw HotUpdateError.wrap(error, as: .manifestInvalid, "the manifest is not valid JSON of schema 1")
        }
        guard document.schema == currentSchema else {
            throw HotUpdateError(
                .manifestInvalid,
                "manifest schema \(document.schema) is not supported (expected \(currentSchema))"
            )
        }
        return document
    }

    /// Encodes the document with sorted keys, pretty-printed, for stable diffs.
    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    /// Adds `entry`, replacing the entry with the same id if there is one (keeping its place).
    public mutating func upsert(_ entry: Entry) {
        if let index = packages.firstIndex(where: { $0.id == entry.id }) {
            packages[index] = entry
        } else {
            packages.append(entry)
        }
    }

    /// Resolves every entry against `baseURL` (the manifest's URL) and validates it.
    ///
    /// - Throws: `HotUpdateError.Code.manifestInvalid` for a bad URL, digest, id or version.
    public func manifest(relativeTo baseURL: URL) throws -> Manifest {
        try Manifest(
            schema: schema,
            version: version,
            packages: packages.map { try $0.descriptor(relativeTo: baseURL) },
            isComplete: true
        )
    }
}
