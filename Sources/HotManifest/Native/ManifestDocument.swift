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

    /// One package entry: a ``VersionEntry`` with the package's id and delivery mode beside
    /// its fields, in one JSON object. The version's fields read and write through the entry
    /// (`entry.url`, `entry.sha256`).
    @dynamicMemberLookup
    public struct Entry: Codable, Sendable, Hashable {
        /// The package id.
        public var id: String
        /// The version listed: where its archive is and how to check it.
        public var versionEntry: VersionEntry
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
            self.init(
                id: id,
                versionEntry: VersionEntry(
                    version: version,
                    url: url,
                    size: size,
                    sha256: sha256,
                    md5: md5,
                    deltas: deltas
                )
            )
        }

        /// Creates an entry listing `versionEntry` of the package `id`.
        public init(id: String, versionEntry: VersionEntry, delivery: DeliveryMode? = nil) {
            self.id = id
            self.versionEntry = versionEntry
            self.delivery = delivery
        }

        /// A field of the version listed (``versionEntry``).
        public subscript<Value>(dynamicMember field: WritableKeyPath<VersionEntry, Value>) -> Value {
            get { versionEntry[keyPath: field] }
            set { versionEntry[keyPath: field] = newValue }
        }

        private enum CodingKeys: String, CodingKey {
            case id, delivery
        }

        /// Reads an entry: the package's fields and the version's, from one object.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(String.self, forKey: .id)
            delivery = try container.decodeIfPresent(DeliveryMode.self, forKey: .delivery)
            versionEntry = try VersionEntry(from: decoder)
        }

        /// Writes the entry as one object: the version's fields, and the package's beside them.
        public func encode(to encoder: any Encoder) throws {
            try versionEntry.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encodeIfPresent(delivery, forKey: .delivery)
        }

        /// Resolves the entry against `baseURL` (the manifest's URL) and validates it.
        ///
        /// - Throws: `HotUpdateError.Code.manifestInvalid` for a bad URL, digest, id or version.
        public func descriptor(relativeTo baseURL: URL) throws -> PackageDescriptor {
            try versionEntry.descriptor(id: id, delivery: delivery, relativeTo: baseURL)
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
