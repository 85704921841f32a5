import Foundation
import HotArchive
import HotCore
import Testing

/// What one node of an extracted tree must be.
enum ExpectedNode: Sendable, CustomStringConvertible {
    /// A regular file with exactly these bytes.
    case bytes([UInt8])
    /// A regular file of this size whose CRC-32 (computed here, independently of the readers) is this.
    case checksum(size: Int, crc32: UInt32)
    /// A regular file with the bytes of another corpus file (Go's and rc-zip's content references).
    case sameAs(corpusFile: String)
    /// A regular file of this size (contents the peer does not check and the archive cannot vouch for).
    case size(Int)
    case directory
    case symlink(to: String)

    var isFile: Bool {
        switch self {
        case .directory, .symlink: return false
        case .bytes, .checksum, .sameAs, .size: return true
        }
    }

    /// A regular file holding `text` as UTF-8.
    static func text(_ text: String) -> ExpectedNode { .bytes(Array(text.utf8)) }

    var description: String {
        switch self {
        case .bytes(let bytes): return "file(\(bytes.count) bytes)"
        case .checksum(let size, let crc): return "file(\(size) bytes, crc32 \(String(crc, radix: 16)))"
        case .sameAs(let file): return "file(same bytes as \(file))"
        case .size(let size): return "file(\(size) bytes)"
        case .directory: return "directory"
        case .symlink(let target): return "symlink(\(target))"
        }
    }
}

/// What extracting an archive with one backend must give.
enum Outcome: Sendable, CustomStringConvertible {
    /// Extraction succeeds and writes exactly these nodes, plus the parent directories their paths imply.
    case reads([String: ExpectedNode])
    /// Extraction succeeds; the archive lists `entries` entries and the tree has `nodes` nodes,
    /// `files` of them regular files (for archives too large to spell out).
    case readsCount(entries: Int, nodes: Int, files: Int)
    /// Extraction fails with `code`, and the message names each of `mentioning`.
    case refuses(HotUpdateError.Code, mentioning: [String] = [])

    var description: String {
        switch self {
        case .reads(let nodes): return "reads \(nodes.count) nodes"
        case .readsCount(let entries, _, _): return "reads \(entries) entries"
        case .refuses(let code, _): return "refuses: \(code)"
        }
    }
}

/// CRC-32 (IEEE, reflected), computed without zlib so the check is independent of the readers.
enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var value = UInt32(index)
        for _ in 0..<8 { value = value & 1 != 0 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
        return value
    }

    static func of<Bytes: Sequence>(_ bytes: Bytes) -> UInt32 where Bytes.Element == UInt8 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }
}

enum Verify {
    /// Extracts `archive` with `backend` into `scratch/out` and checks `outcome`, and that
    /// nothing else appears in `scratch` (no escaped file, no staging directory left behind)
    /// and none of `escapes` (paths relative to the destination, as a hostile entry names
    /// them) exists afterwards unless it existed, unchanged, before.
    static func extraction(
        _ archive: URL,
        with backend: Backend,
        options: ExtractOptions,
        in scratch: Scratch,
        expecting outcome: Outcome,
        escapes: [String] = [],
        corpus: URL? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let destination = scratch.path("out")
        let before = scratch.listing()
        let escaped = escapes.map { URL(fileURLWithPath: destination.path + "/" + $0).standardizedFileURL }
        let escapedBefore = escaped.map { try? FileManager.default.attributesOfItem(atPath: $0.path) as NSDictionary }
        defer {
            for (url, previous) in zip(escaped, escapedBefore) {
                let now = try? FileManager.default.attributesOfItem(atPath: url.path) as NSDictionary
                #expect(now == previous, "\(url.path) was created or changed", sourceLocation: sourceLocation)
            }
        }
        switch outcome {
        case .refuses(let code, let mentioning):
            let error = await expectHotError(code, sourceLocation: sourceLocation) {
                try await backend.unarchiver.extract(archive, to: destination, options: options)
            }
            for word in mentioning {
                #expect(
                    error?.message.contains(word) == true,
                    "the message should name '\(word)': \(error?.message ?? "")",
                    sourceLocation: sourceLocation
                )
            }
            #expect(!FileManager.default.fileExists(atPath: destination.path), sourceLocation: sourceLocation)
            #expect(scratch.listing() == before, sourceLocation: sourceLocation)

        case .reads(let listed):
            let expected = withParents(listed)
            let report = try await backend.unarchiver.extract(archive, to: destination, options: options)
            let tree = try Trees.snapshot(destination)
            #expect(
                Set(tree.keys.map(normalized)) == Set(expected.keys.map(normalized)),
                "extracted \(tree.keys.sorted()), expected \(expected.keys.sorted())",
                sourceLocation: sourceLocation
            )
            let byName = Dictionary(
                tree.map { (normalized($0.key), $0.value) },
                uniquingKeysWith: { first, _ in first }
            )
            for (path, node) in expected {
                guard let got = byName[normalized(path)] else { continue }
                try check(got, against: node, path: path, corpus: corpus, sourceLocation: sourceLocation)
            }
            let expectedFiles = expected.filter { $0.value.isFile }
            #expect(
                Set(report.files.map { normalized($0.path) }) == Set(expectedFiles.keys.map(normalized)),
                sourceLocation: sourceLocation
            )
            #expect(report.totalBytes == report.files.reduce(0) { $0 + $1.size }, sourceLocation: sourceLocation)
            #expect(scratch.listing() == (before + ["out"]).sorted(), sourceLocation: sourceLocation)

        case .readsCount(let entries, let nodes, let files):
            let listed = try await backend.unarchiver.entries(of: archive, options: options)
            #expect(listed.count == entries, sourceLocation: sourceLocation)
            let report = try await backend.unarchiver.extract(archive, to: destination, options: options)
            // Counted without reading every file back: these archives are large.
            var counted = (nodes: 0, files: 0)
            let walker = try #require(FileManager.default.enumerator(atPath: destination.path))
            while walker.nextObject() != nil {
                counted.nodes += 1
                if walker.fileAttributes?[.type] as? FileAttributeType == .typeRegular { counted.files += 1 }
            }
            #expect(counted.nodes == nodes, sourceLocation: sourceLocation)
            #expect(counted.files == files, sourceLocation: sourceLocation)
            #expect(report.files.count == files, sourceLocation: sourceLocation)
            #expect(scratch.listing() == (before + ["out"]).sorted(), sourceLocation: sourceLocation)
        }
    }

    private static func normalized(_ path: String) -> String { path.precomposedStringWithCanonicalMapping }

    /// `nodes` with every parent directory its paths imply.
    private static func withParents(_ nodes: [String: ExpectedNode]) -> [String: ExpectedNode] {
        var all = nodes
        for path in nodes.keys {
            var parts = path.split(separator: "/").dropLast()
            while !parts.isEmpty {
                let parent = parts.joined(separator: "/")
                if all[parent] == nil { all[parent] = .directory }
                parts = parts.dropLast()
            }
        }
        return all
    }

    private static func check(
        _ got: Node,
        against expected: ExpectedNode,
        path: String,
        corpus: URL?,
        sourceLocation: SourceLocation
    ) throws {
        switch (got, expected) {
        case (.file(let data), .bytes(let bytes)):
            #expect(Array(data) == bytes, "\(path): content differs", sourceLocation: sourceLocation)
        case (.file(let data), .checksum(let size, let crc)):
            #expect(
                data.count == size,
                "\(path): \(data.count) bytes, expected \(size)",
                sourceLocation: sourceLocation
            )
            #expect(CRC32.of(data) == crc, "\(path): CRC-32 differs", sourceLocation: sourceLocation)
        case (.file(let data), .sameAs(let file)):
            let reference = try #require(corpus, sourceLocation: sourceLocation).appendingPathComponent(file)
            #expect(
                data == (try Data(contentsOf: reference)),
                "\(path): differs from \(file)",
                sourceLocation: sourceLocation
            )
        case (.file(let data), .size(let size)):
            #expect(
                data.count == size,
                "\(path): \(data.count) bytes, expected \(size)",
                sourceLocation: sourceLocation
            )
        case (.directory, .directory):
            break
        case (.symlink(let target), .symlink(let expectedTarget)):
            #expect(target == expectedTarget, "\(path): link to \(target)", sourceLocation: sourceLocation)
        default:
            Issue.record("\(path): extracted \(got), expected \(expected)", sourceLocation: sourceLocation)
        }
    }
}
