import Dispatch
import Foundation
import HotCore

/// How a snapshot becomes bytes and back: the one thing the store's formats differ in.
protocol SnapshotFormat: Sendable {
    /// The format's name, for messages (`JSON`, `property list`).
    var name: String { get }
    /// Encodes a value.
    func encode<T: Encodable>(_ value: T) throws -> Data
    /// Decodes a value.
    func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T
}

/// A ``MetadataStore`` kept in one file under a root directory, in some format.
///
/// Loads and commits of the same file run one at a time, off the cooperative thread
/// pool, on a serial queue shared by every store value of that file in the process.
struct SnapshotFileStore<Format: SnapshotFormat>: Sendable {
    let root: URL
    let fileName: String
    let format: Format

    var fileURL: URL { root.appendingPathComponent(fileName, isDirectory: false) }

    func load() async throws -> StoreSnapshot {
        try checkFileName()
        let url = fileURL
        let format = format
        return try await SerialFileQueues.run(for: url) { try Self.read(url, format: format) }
    }

    func commit(_ snapshot: StoreSnapshot) async throws {
        try checkFileName()
        if let problem = SnapshotRules.problem(in: snapshot) {
            throw HotUpdateError(.invalidArgument, "refusing to commit the snapshot: \(problem)", subject: fileURL.path)
        }
        let data: Data
        do {
            data = try format.encode(snapshot)
        } catch {
            throw HotUpdateError.wrap(error, as: .invalidArgument, "cannot encode the snapshot as \(format.name)")
        }
        let url = fileURL
        let root = root
        try await SerialFileQueues.run(for: url) {
            do {
                try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            } catch {
                throw HotUpdateError(
                    .fileSystem,
                    "cannot create the store root \(root.path): \(error)",
                    subject: url.path,
                    cause: SendableErrorBox(error)
                )
            }
            DurableFile.removeLeftoverTemporaries(of: url)
            try DurableFile.write(data, to: url, faultPoint: "mid-commit")
        }
    }

    func removeLeftovers() async {
        let url = fileURL
        _ = try? await SerialFileQueues.run(for: url) { DurableFile.removeLeftoverTemporaries(of: url) }
    }

    private static func read(_ url: URL, format: Format) throws -> StoreSnapshot {
        let data: Data
        do {
            guard let existing = try DurableFile.readIfExists(url) else { return .empty }
            data = existing
        } catch let error as HotUpdateError {
            throw HotUpdateError(
                .storeCorrupt,
                "the store file cannot be read: \(error.message)",
                subject: url.path,
                cause: error
            )
        }
        // The schema first, so a newer store is reported as such even when its shape changed.
        let schema: Int
        do {
            schema = try format.decode(SchemaProbe.self, from: data).schema
        } catch {
            throw HotUpdateError(
                .storeCorrupt,
                "the store file is not a \(format.name) store snapshot (\(data.count) bytes): \(error)",
                subject: url.path,
                cause: SendableErrorBox(error)
            )
        }
        guard schema <= StoreSnapshot.currentSchema else {
            throw HotUpdateError(
                .storeCorrupt,
                "the store file was written by a newer HotUpdate (schema \(schema); this version reads up to schema \(StoreSnapshot.currentSchema))",
                subject: url.path
            )
        }
        let snapshot: StoreSnapshot
        do {
            snapshot = try format.decode(StoreSnapshot.self, from: data)
        } catch {
            throw HotUpdateError(
                .storeCorrupt,
                "the store file is not a \(format.name) store snapshot: \(error)",
                subject: url.path,
                cause: SendableErrorBox(error)
            )
        }
        if let problem = SnapshotRules.problem(in: snapshot) {
            throw HotUpdateError(.storeCorrupt, "the store file is inconsistent: \(problem)", subject: url.path)
        }
        return snapshot
    }

    private func checkFileName() throws {
        guard !fileName.isEmpty, fileName != ".", fileName != "..", !fileName.contains("/"), !fileName.contains("\0")
        else {
            throw HotUpdateError(
                .invalidArgument,
                "the store file name '\(fileName)' must be one path component",
                subject: root.path
            )
        }
    }

    private struct SchemaProbe: Decodable {
        var schema: Int
    }
}

/// The invariants every stored snapshot keeps.
enum SnapshotRules {
    /// The first broken rule, or nil.
    static func problem(in snapshot: StoreSnapshot) -> String? {
        guard (1...StoreSnapshot.currentSchema).contains(snapshot.schema) else {
            return "schema \(snapshot.schema) is not between 1 and \(StoreSnapshot.currentSchema)"
        }
        for (key, record) in snapshot.packages.sorted(by: { $0.key < $1.key }) {
            guard record.id == key else { return "the record under '\(key)' has id '\(record.id)'" }
            do {
                try PackageDescriptor.validateComponent(key, what: "package id")
            } catch let error as HotUpdateError {
                return error.message
            } catch {
                return "package id '\(key)' is invalid"
            }
            for version in record.keptVersions {
                if let problem = pathProblem(version.path) {
                    return "package \(key) version \(version.version): path '\(version.path)' \(problem)"
                }
            }
        }
        return nil
    }

    /// Why `path` is not a path relative to the store root, or nil.
    private static func pathProblem(_ path: String) -> String? {
        if path.isEmpty { return "is empty" }
        if path.hasPrefix("/") || path.hasPrefix("~") {
            return "is absolute; only paths relative to the store root are stored"
        }
        if path.split(separator: "/", omittingEmptySubsequences: false).contains(where: { $0 == ".." || $0.isEmpty }) {
            return "has an empty or '..' component"
        }
        return nil
    }
}

/// One serial queue per file path, shared by every store of that file in the process.
enum SerialFileQueues {
    private final class Registry: Sendable {
        private let queues = Locked<[String: DispatchQueue]>([:])

        func queue(for path: String) -> DispatchQueue {
            queues.withLock { queues in
                if let queue = queues[path] { return queue }
                let queue = DispatchQueue(label: "HotStore.file")
                queues[path] = queue
                return queue
            }
        }
    }

    private static let registry = Registry()

    /// Runs `work` on the file's queue and returns its result.
    static func run<T: Sendable>(for url: URL, _ work: @escaping @Sendable () throws -> T) async throws -> T {
        let queue = registry.queue(for: url.standardizedFileURL.path)
        return try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
        }
    }
}
