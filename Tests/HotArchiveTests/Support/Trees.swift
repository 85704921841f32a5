import Foundation
import HotArchive
import HotCore
import Testing

/// The two implementations every contract test runs against.
enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case zip
    case libarchive

    /// Whether this build has ``LibArchiveUnarchiver`` (the package's `LibArchive` trait).
    static var hasLibArchive: Bool {
        #if LibArchive
        return true
        #else
        return false
        #endif
    }

    /// The backends in this build.
    static var allCases: [Backend] { hasLibArchive ? [.zip, .libarchive] : [.zip] }

    var unarchiver: any Unarchiver {
        switch self {
        case .zip: return ZipUnarchiver()
        case .libarchive:
            #if LibArchive
            return LibArchiveUnarchiver()
            #else
            preconditionFailure("this build has no LibArchiveUnarchiver (the LibArchive trait is off)")
            #endif
        }
    }

    var testDescription: String { rawValue }
}

/// What a file-system node is, for comparing trees.
enum Node: Equatable, CustomStringConvertible {
    case file(Data)
    case directory
    case symlink(String)

    var description: String {
        switch self {
        case .file(let data): return "file(\(data.count) bytes)"
        case .directory: return "directory"
        case .symlink(let target): return "symlink(\(target))"
        }
    }
}

enum Trees {
    /// Every node under `root`, keyed by relative path.
    static func snapshot(_ root: URL) throws -> [String: Node] {
        var result: [String: Node] = [:]
        let manager = FileManager.default
        func walk(_ directory: URL, _ prefix: String) throws {
            for name in try manager.contentsOfDirectory(atPath: directory.path) {
                let url = directory.appendingPathComponent(name)
                let relative = prefix.isEmpty ? name : prefix + "/" + name
                let attributes = try manager.attributesOfItem(atPath: url.path)
                switch attributes[.type] as? FileAttributeType {
                case .typeDirectory?:
                    result[relative] = .directory
                    try walk(url, relative)
                case .typeSymbolicLink?:
                    result[relative] = .symlink(try manager.destinationOfSymbolicLink(atPath: url.path))
                default:
                    result[relative] = .file(try Data(contentsOf: url))
                }
            }
        }
        try walk(root, "")
        return result
    }

    /// Writes a mixed tree: text, compressible and incompressible binaries, an empty
    /// file, an empty directory, nested directories and a non-ASCII name.
    static func makeMixed(at root: URL, largeBytes: Int = 600_000) throws {
        let manager = FileManager.default
        try manager.createDirectory(at: root.appendingPathComponent("img/icons"), withIntermediateDirectories: true)
        try manager.createDirectory(at: root.appendingPathComponent("web/js"), withIntermediateDirectories: true)
        try manager.createDirectory(at: root.appendingPathComponent("empty-dir"), withIntermediateDirectories: true)
        var generator = SeededGenerator(seed: 42)
        func random(_ count: Int) -> Data {
            var bytes = [UInt8](repeating: 0, count: count)
            for index in 0..<count { bytes[index] = UInt8(truncatingIfNeeded: generator.next()) }
            return Data(bytes)
        }
        let text = String(repeating: "HotUpdate replaces resources after an app ships.\n", count: 400)
        try Data(text.utf8).write(to: root.appendingPathComponent("readme.txt"))
        try Data().write(to: root.appendingPathComponent("empty.txt"))
        try random(70_000).write(to: root.appendingPathComponent("img/photo.jpg"))
        try random(3_000).write(to: root.appendingPathComponent("img/icons/a@2x.png"))
        try random(1).write(to: root.appendingPathComponent("img/icons/one-byte.bin"))
        var js = Data()
        for line in 0..<(largeBytes / 40) { js.append(contentsOf: "var v\(line) = \(line % 97) * 3;\n".utf8) }
        try js.write(to: root.appendingPathComponent("web/js/app.js"))
        try Data("<html>héllo</html>".utf8).write(to: root.appendingPathComponent("web/índex.html"))
        try Data(text.utf8.prefix(500)).write(to: root.appendingPathComponent("web/js/mixed \u{1F600} name.txt"))
    }

    /// Expects the tree at `extracted` to equal the one at `source`, node for node.
    static func expectEqual(_ extracted: URL, _ source: URL, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let got = try snapshot(extracted)
        let want = try snapshot(source)
        #expect(got.keys.sorted() == want.keys.sorted(), sourceLocation: sourceLocation)
        for (path, node) in want where got[path] != node {
            Issue.record(
                "\(path): extracted \(got[path].map(String.init(describing:)) ?? "nothing"), source \(node)",
                sourceLocation: sourceLocation
            )
        }
    }
}

/// A deterministic random generator (SplitMix64).
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Expects `body` to throw a ``HotUpdateError`` with `code`, and returns it.
@discardableResult
func expectHotError<T>(
    _ code: HotUpdateError.Code,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> T
) async -> HotUpdateError? {
    do {
        _ = try await body()
        Issue.record("expected a \(code) error, got success", sourceLocation: sourceLocation)
        return nil
    } catch let error as HotUpdateError {
        #expect(error.code == code, "\(error.detailedDescription())", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected HotUpdateError \(code), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
