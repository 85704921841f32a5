import Foundation
import HotCore

/// A store that merges commits into what it holds and stores any path: it breaks "commit
/// replaces" and "relative paths only".
actor MergingMetadataStore: MetadataStore {
    private var stored: StoreSnapshot = .empty

    func load() async throws -> StoreSnapshot { stored }

    func commit(_ snapshot: StoreSnapshot) async throws {
        let kept = stored.packages
        stored = snapshot
        stored.packages.merge(kept) { new, _ in new }
    }
}

/// A resolver that appends the name to its directory: `..` walks out of it.
struct NaiveAssetResolver: AssetResolver {
    let directory: URL

    func resolve(_ name: String) -> ResolvedAsset? {
        let url = directory.appendingPathComponent(name).standardizedFileURL
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue
        else { return nil }
        return ResolvedAsset(url: url, origin: .bundle)
    }
}

/// An unarchiver that refuses every archive with a plausible code, but only after writing
/// into the destination: it breaks "leave nothing behind".
struct LeakyUnarchiver: Unarchiver {
    func entries(of archive: URL, options: ExtractOptions) async throws -> [ArchiveEntry] {
        throw HotUpdateError(.notAnArchive, "this unarchiver reads nothing")
    }

    func extract(
        _ archive: URL,
        to destination: URL,
        options: ExtractOptions,
        progress: (@Sendable (ExtractionReport.Progress) -> Void)?
    ) async throws -> ExtractionReport {
        try FileManager.default.createDirectory(at: destination, withIntermediateDirectories: true)
        try Data("half written".utf8).write(to: destination.appendingPathComponent("partial.txt"))
        throw HotUpdateError(.unsafeEntry, "refused after writing")
    }
}

/// A transport that reads `file://` URLs whole, ignoring the request's range and byte limit,
/// and hands the body over as one chunk: it breaks ranges, the limit and streaming.
struct CarelessTransport: Transport {
    func fetch(_ request: TransportRequest) async throws -> TransportResponse {
        guard let data = try? Data(contentsOf: request.url) else {
            return TransportResponse(url: request.url, statusCode: 404, body: ByteStream(chunks: []))
        }
        return TransportResponse(
            url: request.url,
            statusCode: 200,
            expectedContentLength: Int64(data.count),
            body: ByteStream(chunks: [data])
        )
    }
}
