import Foundation

/// One regular file of an installed version.
public struct InstalledFile: Codable, Sendable, Hashable {
    /// The path inside the version's tree, `/`-separated.
    public var path: String
    /// The file's size in bytes.
    public var size: Int64
    /// The file's SHA-256 (lowercase hex): also the name of its object in `objects/`.
    public var sha256: String

    /// Creates a record.
    public init(path: String, size: Int64, sha256: String) {
        self.path = path
        self.size = size
        self.sha256 = sha256
    }
}

/// The files of one installed version, written next to the store (`filelists/<id>/<version>.files`)
/// when the version is installed and read only when a package is checked, repaired or deleted,
/// so opening a store with many packages reads none of them.
public struct FileList: Codable, Sendable, Hashable {
    /// The format this code writes.
    public static let currentFormat = 1

    /// The format the list was written with.
    public var format: Int
    /// The files, in the order the archive listed them.
    public var files: [InstalledFile]

    /// Creates a list.
    public init(files: [InstalledFile]) {
        self.format = Self.currentFormat
        self.files = files
    }

    /// Reads a list.
    ///
    /// - Throws: ``HotUpdateError/Code/notFound`` when the file does not exist,
    ///   ``HotUpdateError/Code/storeCorrupt`` when it cannot be decoded.
    public static func read(from url: URL) throws -> FileList {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw HotUpdateError(.notFound, "the file list cannot be read", subject: url.path)
        }
        let list: FileList
        do {
            list = try JSONDecoder().decode(FileList.self, from: data)
        } catch {
            throw HotUpdateError.wrap(error, as: .storeCorrupt, "the file list \(url.lastPathComponent) is not valid")
        }
        guard list.format <= currentFormat else {
            throw HotUpdateError(
                .storeCorrupt, "the file list was written by a newer HotUpdate (format \(list.format))",
                subject: url.path)
        }
        return list
    }

    /// Writes the list to `url` through a temporary file and a rename, so a reader sees the
    /// old list or the new one. Durability comes from the flush before the version is committed.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem``.
    public func write(to url: URL) throws {
        try FileSystem.createDirectory(url.deletingLastPathComponent())
        let temporary = url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).tmp")
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            try encoder.encode(self).write(to: temporary)
        } catch {
            try? FileSystem.remove(temporary)
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot write the file list \(url.path)")
        }
        try FileSystem.rename(temporary, to: url)
    }

    /// The files by path.
    public var byPath: [String: InstalledFile] {
        Dictionary(files.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first })
    }
}
