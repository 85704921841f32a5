import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Compares an extracted tree with the corpus it came from.
enum TreeCheck {
    /// Returns nil when `directory` holds exactly the corpus's files (same paths and
    /// sizes, and with `.bytes` the same bytes) and nothing but folders besides;
    /// otherwise a short description of the first differences.
    static func compare(_ directory: String, with corpus: Corpus, check: OutputCheck) -> String? {
        var found: [String: Int64] = [:]
        var strays: [String] = []
        walk(directory, prefix: "", into: &found, strays: &strays)
        var problems: [String] = []
        if !strays.isEmpty {
            problems.append("not regular files or folders: \(strays.prefix(3).joined(separator: ", "))")
        }
        let expected = Dictionary(uniqueKeysWithValues: corpus.files.map { ($0.path, $0.size) })
        let missing = corpus.files.map(\.path).filter { found[$0] == nil }
        if !missing.isEmpty {
            problems.append("\(missing.count) missing (\(missing.prefix(3).joined(separator: ", ")))")
        }
        let extra = found.keys.filter { expected[$0] == nil }.sorted()
        if !extra.isEmpty { problems.append("\(extra.count) extra (\(extra.prefix(3).joined(separator: ", ")))") }
        let wrongSize = corpus.files.filter { file in found[file.path].map { $0 != file.size } ?? false }.map(\.path)
        if !wrongSize.isEmpty {
            problems.append("\(wrongSize.count) of another size (\(wrongSize.prefix(3).joined(separator: ", ")))")
        }
        if problems.isEmpty && check == .bytes {
            let differing = corpus.files.map(\.path).filter { path in
                !sameBytes(corpus.root.path + "/" + path, directory + "/" + path)
            }
            if !differing.isEmpty {
                problems.append("\(differing.count) with other bytes (\(differing.prefix(3).joined(separator: ", ")))")
            }
        }
        return problems.isEmpty ? nil : problems.joined(separator: "; ")
    }

    private static func walk(
        _ directory: String,
        prefix: String,
        into found: inout [String: Int64],
        strays: inout [String]
    ) {
        guard let handle = opendir(directory) else {
            strays.append(prefix.isEmpty ? "(unreadable root)" : prefix)
            return
        }
        defer { closedir(handle) }
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name == "." || name == ".." { continue }
            let relative = prefix.isEmpty ? name : prefix + "/" + name
            let path = directory + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0 else {
                strays.append(relative)
                continue
            }
            switch info.st_mode & S_IFMT {
            case S_IFDIR: walk(path, prefix: relative, into: &found, strays: &strays)
            case S_IFREG: found[relative] = Int64(info.st_size)
            default: strays.append(relative)
            }
        }
    }

    private static func sameBytes(_ first: String, _ second: String) -> Bool {
        guard let a = FileManager.default.contents(atPath: first), let b = FileManager.default.contents(atPath: second)
        else { return false }
        return a == b
    }
}
