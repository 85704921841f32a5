import Foundation
import HotCore

/// A `MetadataStore` in one file under the store root: `store.json` (JSON, the default) or
/// `store.plist` (a property list).
///
/// The file holds only paths relative to the root, so the app's container may move between
/// launches. Commits are atomic and durable (a temporary file flushed, renamed over the store
/// file, and the directory flushed); a missing file loads as `StoreSnapshot.empty`.
///
/// The ``Format`` decides the bytes:
/// - ``Format/json``: pretty-printed with sorted keys, dates in ISO 8601 (UTC, to the
///   millisecond);
/// - ``Format/propertyList``: a binary property list, compact, dates exact;
/// - ``Format/xmlPropertyList``: an XML property list, to read by eye, dates to the second.
///
/// A property-list store reads either kind of property list.
///
/// Within a process, loads and commits of the same file run one at a time, whichever store
/// values and tasks issue them. Between processes, the `Updater` coordinates: it commits
/// only under the root's exclusive `store.lock`, against the snapshot it re-read there.
///
/// ```swift
/// let store = FileMetadataStore(root: appSupport.appendingPathComponent("HotUpdate"))
/// var snapshot = try await store.load()
/// snapshot.generation += 1
/// try await store.commit(snapshot)
///
/// let plist = FileMetadataStore(root: root, format: .propertyList)   // store.plist
/// ```
public struct FileMetadataStore: MetadataStore {
    /// How a store writes its file, and the file's name unless another is given.
    public struct Format: Sendable, Hashable, CustomStringConvertible {
        enum Kind: Sendable, Hashable {
            case json
            case binaryPropertyList
            case xmlPropertyList
        }

        let kind: Kind

        /// JSON in `store.json`: pretty-printed, sorted keys, ISO 8601 dates to the millisecond.
        public static let json = Format(kind: .json)
        /// A binary property list in `store.plist`: compact, dates exact.
        public static let propertyList = Format(kind: .binaryPropertyList)
        /// An XML property list in `store.plist`: readable, dates to the second.
        public static let xmlPropertyList = Format(kind: .xmlPropertyList)

        /// The file name a store of this format uses unless given another: `store.json` or
        /// `store.plist`.
        public var defaultFileName: String {
            kind == .json ? "store.json" : "store.plist"
        }

        /// The format's name: `JSON`, `binary property list` or `XML property list`.
        public var description: String {
            switch kind {
            case .json: "JSON"
            case .binaryPropertyList: "binary property list"
            case .xmlPropertyList: "XML property list"
            }
        }
    }

    private let storage: SnapshotFileStore<Format>

    /// Creates a store. Nothing is read or written until ``load()`` or ``commit(_:)``.
    ///
    /// - Parameters:
    ///   - root: The store root directory; created on the first commit if missing.
    ///   - format: How commits write the file: ``Format/json`` unless given.
    ///   - fileName: The metadata file's name inside `root`, one path component; nil for the
    ///     format's ``Format/defaultFileName``.
    public init(root: URL, format: Format = .json, fileName: String? = nil) {
        storage = SnapshotFileStore(root: root, fileName: fileName ?? format.defaultFileName, format: format)
    }

    /// The store root directory.
    public var root: URL { storage.root }

    /// The metadata file.
    public var fileURL: URL { storage.fileURL }

    /// How commits write the file.
    public var format: Format { storage.format }

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

    /// The store file's device, inode, size and modification time: every commit renames a new
    /// file over it, so the stamp changes with each. Nil when there is no file yet.
    public func commitStamp() -> String? {
        FileSystem.identity(of: fileURL)
    }
}

extension FileMetadataStore.Format: SnapshotFormat {
    var name: String {
        kind == .json ? "JSON" : "property list"
    }

    func encode<T: Encodable>(_ value: T) throws -> Data {
        switch kind {
        case .json:
            return try JSONSnapshotCoding.encode(value)
        case .binaryPropertyList, .xmlPropertyList:
            let encoder = PropertyListEncoder()
            encoder.outputFormat = kind == .xmlPropertyList ? .xml : .binary
            return try encoder.encode(value)
        }
    }

    func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        switch kind {
        case .json:
            return try JSONSnapshotCoding.decode(type, from: data)
        case .binaryPropertyList, .xmlPropertyList:
            return try PropertyListDecoder().decode(type, from: data)
        }
    }
}

/// JSON as the store writes it: sorted keys, pretty-printed, ISO 8601 dates.
private enum JSONSnapshotCoding {
    private static let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    private static let withoutFraction = Date.ISO8601FormatStyle()

    static func encode<T: Encodable>(_ value: T) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.formatted(withFraction))
        }
        return try encoder.encode(value)
    }

    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            if let date = try? Date(text, strategy: withFraction) { return date }
            if let date = try? Date(text, strategy: withoutFraction) { return date }
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "'\(text)' is not an ISO 8601 date"
            )
        }
        return try decoder.decode(type, from: data)
    }
}
