import HotCore

/// Decides whether an archive's entry names are safe to create under a
/// destination, and turns them into normalised relative paths.
///
/// Refused with `HotUpdateError.Code.unsafeEntry`, naming the entry:
/// empty names, NUL bytes, absolute paths (`/x`, `\x`), UNC prefixes (`\\server`,
/// `//server`), drive letters (`C:`), `..` components (with `\` treated as a
/// separator too), duplicates after normalisation, a file and a directory with
/// the same path, anything beneath a file or a symlink, and symlink targets
/// that leave the destination or pass through another symlink.
/// Names longer than the limit, and names with a component longer than
/// ``maxComponentLength`` bytes (which no common file system stores), are refused
/// with `HotUpdateError.Code.limitExceeded` before anything is written.
///
/// Normalisation drops `.` and empty components and turns `\` into `/`, so
/// `a\b.txt` and `./a//b.txt` both become `a/b.txt`.
struct EntryPathValidator {
    private enum Node {
        case file
        case symlink
        case directory(explicit: Bool)
    }

    /// The longest path component, in bytes, that is admitted: `NAME_MAX` of Linux,
    /// macOS and Windows file systems alike.
    static let maxComponentLength = 255

    let archive: String
    let maxNameLength: Int
    private var nodes: [String: Node] = [:]
    /// Every directory the entries need, explicit or implied, parents before children.
    private(set) var directories: [String] = []

    init(archive: String, maxNameLength: Int) {
        self.archive = archive
        self.maxNameLength = maxNameLength
    }

    /// Checks one name on its own and returns its normalised components.
    static func components(of name: String, archive: String, maxNameLength: Int) throws -> [Substring] {
        let utf8 = name.utf8
        guard utf8.count <= maxNameLength else {
            throw ArchiveError.limit(
                archive,
                "its name is \(utf8.count) bytes long, more than the limit of \(maxNameLength)",
                entry: name
            )
        }
        guard !utf8.isEmpty else { throw ArchiveError.unsafe(archive, "the name is empty", entry: name) }
        guard !utf8.contains(0) else { throw ArchiveError.unsafe(archive, "the name contains a NUL byte", entry: name) }
        if let first = utf8.first, first == UInt8(ascii: "/") || first == UInt8(ascii: "\\") {
            throw ArchiveError.unsafe(archive, "the path is absolute (or a UNC path)", entry: name)
        }
        if utf8.count >= 2 {
            let first = utf8[utf8.startIndex]
            let second = utf8[utf8.index(after: utf8.startIndex)]
            let isLetter = (first | 0x20) >= UInt8(ascii: "a") && (first | 0x20) <= UInt8(ascii: "z")
            if isLetter && second == UInt8(ascii: ":") {
                throw ArchiveError.unsafe(archive, "the path starts with a drive letter", entry: name)
            }
        }
        var kept: [Substring] = []
        for component in name.split(whereSeparator: { $0 == "/" || $0 == "\\" }) {
            if component == ".." {
                throw ArchiveError.unsafe(archive, "the path has a '..' component", entry: name)
            }
            if component == "." { continue }
            guard component.utf8.count <= maxComponentLength else {
                throw ArchiveError.limit(
                    archive,
                    "its path has a component of \(component.utf8.count) bytes, more than the \(maxComponentLength) a file system accepts",
                    entry: name
                )
            }
            kept.append(component)
        }
        guard !kept.isEmpty else { throw ArchiveError.unsafe(archive, "the name names no file", entry: name) }
        return kept
    }

    /// Admits an entry and returns its normalised path, or nil for a directory entry
    /// that names the destination itself (`./`, which bsdtar writes).
    ///
    /// - Throws: `HotUpdateError.Code.unsafeEntry` or `HotUpdateError.Code.limitExceeded`.
    mutating func admit(_ name: String, kind: ArchiveEntry.Kind) throws -> String? {
        guard kind == .file || kind == .directory || kind == .symlink else {
            throw ArchiveError.unsafe(
                archive,
                "it is a device, FIFO or socket, which is never created",
                entry: name
            )
        }
        if kind == .directory, let first = name.first, first == ".",
            name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).allSatisfy({ $0 == "." })
        {
            return nil
        }
        let parts = try Self.components(of: name, archive: archive, maxNameLength: maxNameLength)
        var prefix = ""
        for part in parts.dropLast() {
            prefix = prefix.isEmpty ? String(part) : prefix + "/" + part
            switch nodes[prefix] {
            case .none:
                nodes[prefix] = .directory(explicit: false)
                directories.append(prefix)
            case .directory:
                break
            case .file:
                throw ArchiveError.unsafe(
                    archive,
                    "it would be created inside '\(prefix)', which is a file",
                    entry: name
                )
            case .symlink:
                throw ArchiveError.unsafe(
                    archive,
                    "it would be written through '\(prefix)', which is a symlink",
                    entry: name
                )
            }
        }
        let path = prefix.isEmpty ? String(parts[parts.count - 1]) : prefix + "/" + parts[parts.count - 1]
        switch (nodes[path], kind) {
        case (.none, .directory):
            nodes[path] = .directory(explicit: true)
            directories.append(path)
        case (.none, .file):
            nodes[path] = .file
        case (.none, _):
            nodes[path] = .symlink
        case (.directory(explicit: false), .directory):
            nodes[path] = .directory(explicit: true)
        case (.directory(explicit: false), _):
            throw ArchiveError.unsafe(
                archive,
                "it collides with the directory '\(path)' that other entries need",
                entry: name
            )
        default:
            throw ArchiveError.unsafe(archive, "another entry has the same path '\(path)'", entry: name)
        }
        return path
    }

    /// Checks a symlink's target once every entry has been admitted.
    ///
    /// The target must be relative, and resolving it from the link's directory,
    /// component by component, must neither climb above the destination nor pass
    /// through another symlink (only the last component may be one).
    func checkLinkTarget(_ target: String, of path: String, entry: String) throws {
        let utf8 = target.utf8
        guard !utf8.isEmpty, utf8.count <= 4095 else {
            throw ArchiveError.unsafe(archive, "its link target is empty or too long", entry: entry)
        }
        guard !utf8.contains(0) else {
            throw ArchiveError.unsafe(archive, "its link target contains a NUL byte", entry: entry)
        }
        if let first = utf8.first, first == UInt8(ascii: "/") || first == UInt8(ascii: "\\") {
            throw ArchiveError.unsafe(archive, "its link target '\(target)' is absolute", entry: entry)
        }
        if utf8.count >= 2, utf8[utf8.index(after: utf8.startIndex)] == UInt8(ascii: ":") {
            throw ArchiveError.unsafe(archive, "its link target '\(target)' starts with a drive letter", entry: entry)
        }
        var stack = path.split(separator: "/").dropLast().map(String.init)
        let parts = target.split(whereSeparator: { $0 == "/" || $0 == "\\" })
        for (position, part) in parts.enumerated() {
            if part == "." { continue }
            if part == ".." {
                guard !stack.isEmpty else {
                    throw ArchiveError.unsafe(
                        archive,
                        "its link target '\(target)' points outside the destination",
                        entry: entry
                    )
                }
                stack.removeLast()
                continue
            }
            stack.append(String(part))
            if position < parts.count - 1, case .symlink = nodes[stack.joined(separator: "/")] {
                throw ArchiveError.unsafe(
                    archive,
                    "its link target '\(target)' passes through another symlink",
                    entry: entry
                )
            }
        }
    }
}
