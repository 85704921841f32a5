import Foundation
import HotCore

/// A `MetadataStore` in one JSON file (`store.json`) under the store root.
///
/// The file is pretty-printed with sorted keys, dates in ISO 8601 (UTC, to the
/// millisecond), and holds only paths relative to the root, so the app's container may
/// move between launches. Commits are atomic and durable (a temporary file flushed, renamed over the store file, and the directory flushed); a missing
/// file loads as `StoreSnapshot.empty`.
///
/// Within a process, loads and commits of the same file run one at a time, whichever store
/// values and tasks issue them. Between processes, the `Updater` coordinates: it commits
/// only under the root's exclusive `store.lock`, against the snapshot it re-read there.
///
/// ```swift
/// let store = JSONMetadataStore(root: appSupport.appendingPathComponent("HotUpdate"))
/// var snapshot = try await store.load()
/// snapshot.generation += 1
/// try await store.commit(snapshot)
/// ```
public struct JSONMetadataStore: MetadataStore {
    /// The file name used unless another is given.
    public static let defaultFileName = "store.json"

    private let storage: SnapshotFileStore<JSONSnapshotFormat>

    /// Creates a store. Nothing is read or written until ``load()`` or ``commit(_:)``.
    ///
    /// - Parameters:
    ///   - root: The store root directory; created on the first commit if missing.
    ///   - fileName: The metadata file's name inside `root`: one path component.
    public init(root: URL, fileName: String = JSONMetadataStore.defaultFileName) {
        storage = SnapshotFileStore(root: root, fileName: fileName, format: JSONSnapshotFormat())
    }

    /// The store root directory.
    public var root: URL { storage.root }

    /// The metadata file.
    public var fileURL: URL { storage.fileURL }

    /// Reads the last committed snapshot; `StoreSnapshot.empty` when the file does not exist.
    ///
    /// - Throws: `HotUpdateError.Code.storeCorrupt` naming the file when it cannot be read
    ///   or decoded, breaks a rule of the store (an absolute path, a record under another id),
    ///   or was written with a newer schema than `StoreSnapshot.currentSchema`;
    ///   `HotUpdateError.Code.invalidArgument` for a file name that is not one component.
    public func load() async throws -> StoreSnapshot {
        try await storage.load()
    }

    /// Replaces the stored snapshot, atomically and durably.
    ///
    /// - Throws: `HotUpdateError.Code.fileSystem` when the file cannot be written (the old
    ///   one is then intact); `HotUpdateError.Code.invalidArgument` for a snapshot with
    ///   an absolute or escaping path, a record stored under another id, an invalid id or
    ///   an unknown schema.
    public func commit(_ snapshot: StoreSnapshot) async throws {
        try await storage.commit(snapshot)
    }

    /// Removes temporary files an interrupted commit left beside the store file.
    public func removeLeftovers() async {
        await storage.removeLeftovers()
    }
}

/// JSON as the store writes it: sorted keys, pretty-printed, ISO 8601 dates.
struct JSONSnapshotFormat: SnapshotFormat {
    var name: String { "JSON" }

    private static let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    private static let withoutFraction = Date.ISO8601FormatStyle()

    func encode<T: Encodable>(_ value: T) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.formatted(Self.withFraction))
        }
        return try encoder.encode(value)
    }

    func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            if let date = try? Date(text, strategy: Self.withFraction) { return date }
            if let date = try? Date(text, strategy: Self.withoutFraction) { return date }
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "'\(text)' is not an ISO 8601 date"
            )
        }
        return try decoder.decode(type, from: data)
    }
}
