import Foundation
import HotCore

/// The format ``FakeUnarchiver`` reads: a JSON object from relative path to file content
/// (UTF-8 text). Directories are implied by paths.
///
/// ```swift
/// let bytes = try FakeArchive.make(["index.html": "<h1>hi</h1>", "img/a@2x.png": "png"])
/// ```
public enum FakeArchive {
    /// Encodes files as a fake archive.
    public static func make(_ files: [String: String]) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(files)
    }
}

/// An `Unarchiver` for ``FakeArchive`` files, keeping the real contract (all or nothing,
/// nothing outside the destination, typed errors), for the engine's unit tests.
public actor FakeUnarchiver: Unarchiver {
    private var extractions = 0
    private var failure: HotUpdateError?

    /// Creates an unarchiver.
    public init() {}

    /// Makes every later extraction fail with `error` (nil to stop failing).
    public func failExtractions(with error: HotUpdateError?) {
        failure = error
    }

    /// How many extractions succeeded.
    public var extractionCount: Int { extractions }

    public func entries(of archive: URL, options: ExtractOptions) async throws -> [ArchiveEntry] {
        try Self.read(archive).keys.sorted().map { path in
            ArchiveEntry(path: path, kind: .file, uncompressedSize: 0, compressedSize: 0)
        }
    }

    public func extract(
        _ archive: URL,
        to destination: URL,
        options: ExtractOptions,
        progress: (@Sendable (ExtractionReport.Progress) -> Void)?
    ) async throws -> ExtractionReport {
        if let failure { throw failure }
        let files = try Self.read(archive)
        guard !FileManager.default.fileExists(atPath: destination.path) else {
            throw HotUpdateError(.invalidArgument, "the destination already exists", subject: destination.path)
        }
        let staging = destination.deletingLastPathComponent()
            .appendingPathComponent(".\(destination.lastPathComponent).partial-\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
            var written: [ExtractionReport.File] = []
            var total: Int64 = 0
            for (path, content) in files.sorted(by: { $0.key < $1.key }) {
                let components = path.split(separator: "/", omittingEmptySubsequences: false)
                guard !path.hasPrefix("/"), components.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." }) else {
                    throw HotUpdateError(.unsafeEntry, "the entry would leave the destination", subject: path)
                }
                let data = Data(content.utf8)
                total += Int64(data.count)
                guard total <= options.maxTotalBytes else {
                    throw HotUpdateError(.limitExceeded, "the archive inflates past \(options.maxTotalBytes) bytes")
                }
                let file = staging.appendingPathComponent(path)
                try FileManager.default.createDirectory(
                    at: file.deletingLastPathComponent(),
                    withIntermediateDirectories: true
                )
                try data.write(to: file)
                let digest = try options.fileHasher.map { makeHasher in
                    let hasher = try makeHasher()
                    hasher.update(data)
                    return hasher.finalize()
                }
                written.append(ExtractionReport.File(path: path, size: Int64(data.count), digest: digest))
                progress?(
                    ExtractionReport.Progress(
                        entriesCompleted: written.count,
                        entriesTotal: files.count,
                        bytesWritten: total,
                        bytesTotal: Int64(files.values.reduce(0) { $0 + $1.utf8.count })
                    )
                )
            }
            try FileManager.default.moveItem(at: staging, to: destination)
            extractions += 1
            return ExtractionReport(files: written, directories: [], totalBytes: total)
        } catch {
            try? FileManager.default.removeItem(at: staging)
            throw HotUpdateError.wrap(error, as: .fileSystem, "fake extraction failed")
        }
    }

    private static func read(_ archive: URL) throws -> [String: String] {
        guard let data = try? Data(contentsOf: archive), !data.isEmpty,
            let files = try? JSONDecoder().decode([String: String].self, from: data)
        else {
            throw HotUpdateError(.notAnArchive, "not a fake archive", subject: archive.lastPathComponent)
        }
        return files
    }
}
