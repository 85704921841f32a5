import Foundation
import HotCore

/// A `MetadataStore` in one property list file (`store.plist`) under the store root.
///
/// Binary by default (dates kept exactly), or XML to read by eye (dates to the second).
/// It holds only paths relative to the root. Commits are atomic and durable (a temporary file
/// flushed, renamed over the store file, and the directory flushed); a missing file loads as
/// `StoreSnapshot.empty`.
///
/// Within a process, loads and commits of the same file run one at a time, whichever store
/// values and tasks issue them. Between processes, the `Updater` coordinates: it commits
/// only under the root's exclusive `store.lock`, against the snapshot it re-read there.
///
/// ```swift
/// let store = PropertyListMetadataStore(root: appSupport.appendingPathComponent("HotUpdate"))
/// let snapshot = try await store.load()
/// ```
public struct PropertyListMetadataStore: MetadataStore {
    /// The file name used unless another is given.
    public static let defaultFileName = "store.plist"

    /// How the property list is written. Either is read.
    public enum Encoding: Sendable, Hashable {
        /// Binary property list: compact, dates exact.
        case binary
        /// XML property list: readable, dates to the second.
        case xml
    }

    private let storage: SnapshotFileStore<PropertyListSnapshotFormat>

    /// Creates a store. Nothing is read or written until ``load()`` or ``commit(_:)``.
    ///
    /// - Parameters:
    ///   - root: The store root directory; created on the first commit if missing.
    ///   - fileName: The metadata file's name inside `root`: one path component.
    ///   - encoding: How commits write the file.
    public init(
        root: URL,
        fileName: String = PropertyListMetadataStore.defaultFileName,
        encoding: Encoding = .binary
    ) {
        storage = SnapshotFileStore(
            root: root,
            fileName: fileName,
            format: PropertyListSnapshotFormat(encoding: encoding)
        )
    }

    /// The store root directory.
    public var root: URL { storage.root }

    /// The metadata file.
    public var fileURL: URL { storage.fileURL }

    /// Reads the last committed snapshot; `StoreSnapshot.empty` when the file does not exist.
    ///
    /// - Throws: `HotUpdateError.Code.storeCorrupt` naming the file when it cannot be read
    ///   or decoded, breaks a rule of the store, or was written with a newer schema than
    ///   `StoreSnapshot.currentSchema`; `HotUpdateError.Code.invalidArgument` for a file
    ///   name that is not one component.
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

/// Property lists as the store writes them.
struct PropertyListSnapshotFormat: SnapshotFormat {
    var encoding: PropertyListMetadataStore.Encoding

    var name: String { "property list" }

    func encode<T: Encodable>(_ value: T) throws -> Data {
        let encoder = PropertyListEncoder()
        encoder.outputFormat = encoding == .xml ? .xml : .binary
        return try encoder.encode(value)
    }

    func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try PropertyListDecoder().decode(type, from: data)
    }
}
