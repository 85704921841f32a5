import Foundation

/// What the last manifest applied offered this client, kept in `catalog.json` under the store
/// root: the only place ``Updater/install(id:)`` takes a package from, in this process or a
/// later one, with no manifest fetched again.
///
/// It is written in the transaction that records the sync's plan, under the store's exclusive
/// lock, so it always describes the manifest the store was last brought in line with. A
/// manifest reaches `Updater.apply(_:)` only once its source accepted it: for the native
/// signed manifest, once its signatures, version and expiry were checked. Nothing else writes
/// the catalog, and the SHA-256 of its bytes is recorded in the snapshot in the same commit
/// (``StoreSnapshot/catalogSHA256``): a catalog changed on disk since (an entry added with
/// an attacker's URL and its digest) does not match and is refused whole
/// (``HotUpdateError/Code/catalogUntrusted``), so no package enters it from outside the
/// manifest's trust.
package struct OfferedCatalog: Codable, Sendable, Hashable {
    /// The format of the file.
    static let currentFormat = 1

    /// One offered package, as its descriptor says.
    package struct Entry: Codable, Sendable, Hashable {
        var id: String
        var version: String
        var url: String
        var size: Int64?
        var sha256: String?
        var md5: String?
        var password: String?
        var caseSensitive: Bool?
        var unpackedSize: Int64?
        var delivery: DeliveryMode?
        var deltas: [DeltaEntry]?

        struct DeltaEntry: Codable, Sendable, Hashable {
            var baseVersion: String
            var baseSHA256: String?
            var url: String
            var size: Int64?
            var sha256: String?
            var md5: String?
        }

        init(_ descriptor: PackageDescriptor) {
            id = descriptor.id
            version = descriptor.version
            url = descriptor.url.absoluteString
            size = descriptor.size
            sha256 = descriptor.sha256?.hex
            md5 = descriptor.md5?.hex
            password = descriptor.password
            caseSensitive = descriptor.caseSensitive ? true : nil
            unpackedSize = descriptor.unpackedSize
            delivery = descriptor.delivery == .prefetch ? nil : descriptor.delivery
            deltas =
                descriptor.deltas.isEmpty
                ? nil
                : descriptor.deltas.map {
                    DeltaEntry(
                        baseVersion: $0.baseVersion,
                        baseSHA256: $0.baseSHA256?.hex,
                        url: $0.url.absoluteString,
                        size: $0.size,
                        sha256: $0.sha256?.hex,
                        md5: $0.md5?.hex
                    )
                }
        }

        /// The descriptor again, validated as a manifest's would be.
        ///
        /// - Throws: ``HotUpdateError/Code/storeCorrupt`` for an entry that is not a valid descriptor.
        func descriptor() throws -> PackageDescriptor {
            do {
                guard let url = URL(string: url) else {
                    throw HotUpdateError(.manifestInvalid, "url '\(url)' is not a URL", packageID: id)
                }
                var descriptor = try PackageDescriptor(
                    id: id,
                    version: version,
                    url: url,
                    size: size,
                    sha256: try sha256.map { try Digest(algorithm: .sha256, hex: $0) },
                    md5: try md5.map { try Digest(algorithm: .md5, hex: $0) },
                    password: password
                )
                descriptor.caseSensitive = caseSensitive ?? false
                descriptor.unpackedSize = unpackedSize
                descriptor.delivery = delivery?.effective ?? .prefetch
                descriptor.deltas = try (deltas ?? []).map { delta in
                    guard let deltaURL = URL(string: delta.url) else {
                        throw HotUpdateError(.manifestInvalid, "delta url '\(delta.url)' is not a URL", packageID: id)
                    }
                    return try PackageDescriptor.Delta(
                        baseVersion: delta.baseVersion,
                        baseSHA256: try delta.baseSHA256.map { try Digest(algorithm: .sha256, hex: $0) },
                        url: deltaURL,
                        size: delta.size,
                        sha256: try delta.sha256.map { try Digest(algorithm: .sha256, hex: $0) },
                        md5: try delta.md5.map { try Digest(algorithm: .md5, hex: $0) }
                    )
                }
                return descriptor
            } catch {
                throw HotUpdateError.wrap(
                    error,
                    as: .storeCorrupt,
                    "the catalog's entry is not a valid package",
                    packageID: id
                )
            }
        }
    }

    /// The file's format.
    var format = OfferedCatalog.currentFormat
    /// The manifest's own version, when it has one.
    var manifestVersion: Int?
    /// The packages offered, in manifest order.
    var packages: [Entry]
    /// The packages the manifest disables for this client.
    var disabled: [String]

    init(_ manifest: Manifest) {
        manifestVersion = manifest.version
        packages = manifest.packages.map(Entry.init)
        disabled = manifest.disabledPackageIDs.sorted()
    }

    /// The entry of `id`, if offered.
    func entry(_ id: String) -> Entry? { packages.first { $0.id == id } }

    /// The delivery mode of each offered package.
    var deliveries: [String: DeliveryMode] {
        Dictionary(
            packages.map { ($0.id, $0.delivery?.effective ?? .prefetch) },
            uniquingKeysWith: { first, _ in first }
        )
    }

    /// The file's bytes: sorted keys, so an unchanged manifest writes identical bytes.
    func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return try encoder.encode(self)
        } catch {
            throw HotUpdateError.wrap(error, as: .internalInconsistency, "cannot encode the catalog")
        }
    }

    /// The SHA-256 (hex) of a catalog's bytes.
    static func digest(of data: Data, verifier: any Verifier) throws -> String {
        do {
            return try verifier.digest(of: data, using: .sha256).hex
        } catch {
            throw HotUpdateError.wrap(error, as: .internalInconsistency, "cannot hash the catalog")
        }
    }

    /// Reads the catalog under `root`, checked against the digest the store recorded with it;
    /// nil when no manifest was applied yet.
    ///
    /// - Parameters:
    ///   - root: The store root.
    ///   - expected: ``StoreSnapshot/catalogSHA256`` of the store's snapshot.
    ///   - verifier: What hashes the bytes.
    /// - Throws: ``HotUpdateError/Code/catalogUntrusted`` when the bytes do not match
    ///   `expected` (or nothing was recorded for a catalog that is there);
    ///   ``HotUpdateError/Code/storeCorrupt`` when the file cannot be decoded.
    static func read(root: URL, expected: String?, verifier: any Verifier) throws -> OfferedCatalog? {
        guard let data = try StoreStateFile.catalog.read(root: root) else { return nil }
        let found = try digest(of: data, verifier: verifier)
        guard let expected, found == expected else {
            throw HotUpdateError(
                .catalogUntrusted,
                expected == nil
                    ? "\(StoreLayout.catalogFileName) has no digest in the store: it was not written with a trusted manifest; sync first"
                    : "\(StoreLayout.catalogFileName) is not the catalog the last trusted manifest wrote (SHA-256 \(found), recorded \(expected ?? "")); sync first",
                subject: StoreLayout.catalogFileName
            )
        }
        do {
            let catalog = try JSONDecoder().decode(OfferedCatalog.self, from: data)
            guard catalog.format == currentFormat else {
                throw HotUpdateError(.storeCorrupt, "catalog format \(catalog.format) is not \(currentFormat)")
            }
            return catalog
        } catch {
            throw HotUpdateError.wrap(error, as: .storeCorrupt, "cannot read \(StoreLayout.catalogFileName)")
        }
    }
}
