import Foundation
import HotCore

/// Reads the older single patch info, `{"url": "…/patch.zip", "md5": "…"}`, that many
/// apps' servers already publish, as a manifest of one package.
///
/// The package's version is its MD5 (the patch info has nothing else). An empty or
/// missing `url` means "no patch": the package is removed and assets resolve from the
/// bundle again. The size is unknown, so the download is bounded by `maxPackageBytes`.
///
/// ```swift
/// let source = PatchInfoManifestSource(url: patchInfoURL, transport: URLSessionTransport())
/// try await updater.sync(from: source)
/// ```
public struct PatchInfoManifestSource: ManifestSource {
    /// Where the patch info is.
    public var url: URL
    /// How to fetch it.
    public var transport: any Transport
    /// The id the patch is installed under.
    public var packageID: String
    /// The largest patch info accepted.
    public var maxBytes: Int64

    /// Creates a source.
    public init(url: URL, transport: any Transport, packageID: String = "patch", maxBytes: Int64 = 64 << 10) {
        self.url = url
        self.transport = transport
        self.packageID = packageID
        self.maxBytes = maxBytes
    }

    private struct PatchInfo: Decodable {
        var url: String?
        var md5: String?
    }

    public func fetchManifest() async throws -> Manifest {
        let data = try await transport.fetchDocument(url: url, maxBytes: maxBytes)
        return try Self.manifest(from: data, relativeTo: url, packageID: packageID)
    }

    /// Parses patch info bytes into a manifest.
    ///
    /// - Throws: `HotUpdateError.Code.manifestInvalid`.
    public static func manifest(from data: Data, relativeTo baseURL: URL, packageID: String) throws -> Manifest {
        let info: PatchInfo
        do {
            info = try JSONDecoder().decode(PatchInfo.self, from: data)
        } catch {
            throw HotUpdateError.wrap(error, as: .manifestInvalid, "the patch info is not {\"url\", \"md5\"} JSON")
        }
        guard let urlString = info.url, !urlString.isEmpty else {
            return try Manifest(schema: 0, packages: [], isComplete: true)
        }
        guard let md5Hex = info.md5, !md5Hex.isEmpty else {
            throw HotUpdateError(.manifestInvalid, "the patch info has a url but no md5", packageID: packageID)
        }
        guard let packageURL = URL(string: urlString, relativeTo: baseURL)?.absoluteURL else {
            throw HotUpdateError(.manifestInvalid, "url '\(urlString)' is not a URL", packageID: packageID)
        }
        let md5: Digest
        do {
            md5 = try Digest(algorithm: .md5, hex: md5Hex)
        } catch let error as HotUpdateError {
            throw HotUpdateError(.manifestInvalid, error.message, packageID: packageID)
        }
        let descriptor = try PackageDescriptor(id: packageID, version: md5.hex, url: packageURL, md5: md5)
        return try Manifest(schema: 0, packages: [descriptor], isComplete: true)
    }
}
