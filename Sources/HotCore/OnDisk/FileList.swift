import Foundation

/// The files of one installed version, written next to the store (`filelists/<id>/<version>.files`)
/// when the version is installed and read only when a package is checked, repaired or deleted,
/// so opening a store with many packages reads none of them.
///
/// The format is a header line `hotfiles 1` and one line per file,
/// `<sha256 hex> <size> <path>`, with `%`, line feed and carriage return in the path written
/// as `%25`, `%0A` and `%0D`: a launch check of a thousand files reads it in well under a
/// millisecond.
public struct FileList: Sendable, Hashable {
    /// The format this code writes.
    public static let currentFormat = 1

    /// The files, in the order the archive listed them.
    public var files: [FileList.Entry]

    /// Creates a list.
    public init(files: [FileList.Entry]) {
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
        return try decode(data, name: url.path)
    }

    /// Decodes the bytes of a list; `name` says which in errors. Works on the UTF-8 bytes
    /// (Swift's `Character` splitting would cost more than the launch check's `lstat`s).
    ///
    /// - Throws: ``HotUpdateError/Code/storeCorrupt`` naming the line that cannot be read.
    public static func decode(_ data: Data, name: String) throws -> FileList {
        let bytes = [UInt8](data)
        let newline = UInt8(ascii: "\n")
        let space = UInt8(ascii: " ")
        let header = Array("hotfiles ".utf8)
        guard let headerEnd = bytes.firstIndex(of: newline), headerEnd > header.count,
            Array(bytes[0..<header.count]) == header,
            let format = Int(String(decoding: bytes[header.count..<headerEnd], as: UTF8.self))
        else {
            throw HotUpdateError(.storeCorrupt, "not a file list", subject: name)
        }
        guard format <= currentFormat else {
            throw HotUpdateError(
                .storeCorrupt,
                "the file list was written by a newer HotUpdate (format \(format))",
                subject: name
            )
        }
        var files: [FileList.Entry] = []
        var start = headerEnd + 1
        var number = 1
        while start < bytes.count {
            number += 1
            let end = bytes[start...].firstIndex(of: newline) ?? bytes.count
            defer { start = end + 1 }
            guard end > start else { continue }
            let digestEnd = start + 64
            guard digestEnd < end, bytes[digestEnd] == space else {
                throw HotUpdateError(.storeCorrupt, "line \(number) of the file list has no digest", subject: name)
            }
            var size: Int64 = 0
            var cursor = digestEnd + 1
            while cursor < end, bytes[cursor] != space {
                let digit = bytes[cursor] &- UInt8(ascii: "0")
                guard digit < 10, size < Int64.max / 10 else {
                    throw HotUpdateError(.storeCorrupt, "line \(number) of the file list has no size", subject: name)
                }
                size = size * 10 + Int64(digit)
                cursor += 1
            }
            guard cursor > digestEnd + 1, cursor < end else {
                throw HotUpdateError(.storeCorrupt, "line \(number) of the file list has no size", subject: name)
            }
            let pathBytes = bytes[(cursor + 1)..<end]
            var path = String(decoding: pathBytes, as: UTF8.self)
            if pathBytes.contains(UInt8(ascii: "%")) {
                guard let decoded = path.removingPercentEncoding else {
                    throw HotUpdateError(.storeCorrupt, "line \(number) of the file list has a bad path", subject: name)
                }
                path = decoded
            }
            files.append(
                FileList.Entry(
                    path: path,
                    size: size,
                    sha256: String(decoding: bytes[start..<digestEnd], as: UTF8.self)
                )
            )
        }
        return FileList(files: files)
    }

    /// The bytes of the list.
    public func encoded() -> Data {
        var text = "hotfiles \(Self.currentFormat)\n"
        text.reserveCapacity(files.count * 100)
        for file in files {
            var path = file.path
            if path.contains(where: { $0 == "%" || $0 == "\n" || $0 == "\r" }) {
                path = path.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "\n", with: "%0A")
                    .replacingOccurrences(of: "\r", with: "%0D")
            }
            text += "\(file.sha256) \(file.size) \(path)\n"
        }
        return Data(text.utf8)
    }

    /// Writes the list to `url` through a temporary file and a rename, so a reader sees the
    /// old list or the new one. Nothing is fsynced: the engine flushes the file system before
    /// it commits the version the list belongs to.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem``.
    public func write(to url: URL) throws {
        try FileSystem.createDirectory(url.deletingLastPathComponent())
        let temporary = url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).tmp")
        do {
            try encoded().write(to: temporary)
        } catch {
            try? FileSystem.remove(temporary)
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot write the file list \(url.path)")
        }
        try FileSystem.rename(temporary, to: url, durable: false)
    }

    /// The files by path.
    public var byPath: [String: FileList.Entry] {
        Dictionary(files.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first })
    }
}

extension FileList {
    /// One regular file of an installed version.
    public struct Entry: Codable, Sendable, Hashable {
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
}
