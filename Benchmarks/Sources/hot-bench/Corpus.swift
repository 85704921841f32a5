import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One of the benchmark's resource trees: its size, file count and seed.
struct CorpusSpec: Sendable, Hashable {
    /// `small` or `large`, as `--sizes` names it.
    let name: String
    /// The bytes the files aim at together, in MiB.
    let megabytes: Int
    /// How many files.
    let files: Int
    /// The generator's seed.
    let seed: UInt64

    static let small = CorpusSpec(name: "small", megabytes: 20, files: 300, seed: 20_261_123)
    static let large = CorpusSpec(name: "large", megabytes: 200, files: 3_000, seed: 20_261_123)
    static let all = [small, large]

    /// "20 MB / 300 files".
    var title: String { "\(megabytes) MB / \(files.grouped) files" }
}

extension Int {
    /// The number with a thousands separator: 3,000.
    var grouped: String {
        let digits = String(self.magnitude)
        var out = ""
        for (index, character) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(character)
        }
        return self < 0 ? "-" + out : out
    }
}

/// A generated tree: where it is and what it holds.
struct Corpus: Sendable {
    /// A regular file of the tree.
    struct File: Sendable, Hashable {
        /// The path relative to the root, `/`-separated.
        let path: String
        /// Its size in bytes.
        let size: Int64
    }

    let spec: CorpusSpec
    let root: URL
    /// Every file, sorted by path.
    let files: [File]
    /// FNV-1a of every path and its bytes, in generation order: the same on every run.
    let fingerprint: String

    /// The bytes of all files together.
    var totalBytes: Int64 { files.reduce(0) { $0 + $1.size } }

    /// Writes the tree for `spec` under `root` (created if needed; it should be empty).
    ///
    /// About half the files (by count) are `.png`-named random bytes that no
    /// compressor shrinks; the others are JavaScript-like lines and JSON arrays
    /// drawn from a small vocabulary, which deflate well. Files sit at depth 0–3 in
    /// folders `dir0`…`dir9`; sizes vary from 0.2× to 1.8× the mean. It follows
    /// `scripts/make-corpus.py` in shape (not byte for byte: the generators differ).
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem`` when a folder or file cannot be written.
    static func generate(_ spec: CorpusSpec, at root: URL) throws -> Corpus {
        var random = SeededRandom(seed: spec.seed)
        let perFile = spec.megabytes * 1024 * 1024 / spec.files
        var created: Set<String> = []
        var files: [File] = []
        var fingerprint = Fingerprint()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(perFile * 3)
        do {
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "creating corpus root '\(root.path)'")
        }
        for index in 0..<spec.files {
            let depth = random.int(in: 0...3)
            let folders = (0..<depth).map { _ in "dir\(random.int(in: 0...9))" }
            let folder = folders.joined(separator: "/")
            if !folder.isEmpty && !created.contains(folder) {
                do {
                    try FileManager.default.createDirectory(
                        at: root.appendingPathComponent(folder, isDirectory: true),
                        withIntermediateDirectories: true
                    )
                } catch {
                    throw HotUpdateError.wrap(error, as: .fileSystem, "creating corpus folder '\(folder)'")
                }
                created.insert(folder)
            }
            let size = max(1, Int(Double(perFile) * random.uniform(0.2, 1.8)))
            let name: String
            bytes.removeAll(keepingCapacity: true)
            if index % 2 == 0 {
                name = "img\(index)@\(random.int(in: 1...3))x.png"
                bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                    random.fill(UnsafeMutableRawBufferPointer(buffer))
                    count = size
                }
            } else if index % 4 == 1 {
                name = "script\(index).js"
                TextMaker.script(into: &bytes, size: size, random: &random)
            } else {
                name = "data\(index).json"
                TextMaker.json(into: &bytes, size: size, random: &random)
            }
            let path = folder.isEmpty ? name : folder + "/" + name
            try writeFile(bytes, to: root.appendingPathComponent(path).path)
            files.append(File(path: path, size: Int64(bytes.count)))
            fingerprint.add(Array(path.utf8))
            fingerprint.add(bytes)
        }
        return Corpus(
            spec: spec,
            root: root,
            files: files.sorted { $0.path < $1.path },
            fingerprint: fingerprint.hex
        )
    }

    private static func writeFile(_ bytes: [UInt8], to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw systemError("creating", path) }
        defer { close(fd) }
        try bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = write(fd, raw.baseAddress.map { $0 + offset }, raw.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw systemError("writing", path)
                }
                offset += written
            }
        }
    }
}

/// A `.fileSystem` error for a failed system call on `path`, with `errno`'s text.
func systemError(_ action: String, _ path: String, errno code: Int32 = errno) -> HotUpdateError {
    HotUpdateError(.fileSystem, "\(action) '\(path)' failed: \(String(cString: strerror(code)))", subject: path)
}

/// The compressible half of a corpus: script lines and JSON records from a small vocabulary.
enum TextMaker {
    static let words: [[UInt8]] = [
        "function", "return", "const", "let", "module", "export", "import", "async", "await",
        "value", "resource", "image", "render", "update", "package", "version", "config",
    ].map { Array($0.utf8) }
    static let equals = Array(" = ".utf8)
    static let lineEnd = Array(";\n".utf8)
    static let separator = Array(", ".utf8)
    static let idKey = Array("{\"id\": ".utf8)
    static let nameKey = Array(", \"name\": \"".utf8)
    static let tagsKey = Array("\", \"tags\": [".utf8)
    static let recordEnd = Array("]}".utf8)

    /// Lines like `const render_417 = 90210;`, cut at exactly `size` bytes.
    static func script(into bytes: inout [UInt8], size: Int, random: inout SeededRandom) {
        while bytes.count < size {
            bytes += random.pick(words)
            bytes.append(0x20)
            bytes += random.pick(words)
            bytes.append(UInt8(ascii: "_"))
            appendDecimal(random.int(in: 0...999), to: &bytes)
            bytes += equals
            appendDecimal(random.int(in: 0...99_999), to: &bytes)
            bytes += lineEnd
        }
        bytes.removeLast(bytes.count - size)
    }

    /// A JSON array of `{"id": …, "name": …, "tags": [three words]}` records, one per
    /// 60 bytes of `size` (so the text ends up somewhat longer than `size`).
    static func json(into bytes: inout [UInt8], size: Int, random: inout SeededRandom) {
        let count = max(0, (size - 2 + 59) / 60)
        bytes.append(UInt8(ascii: "["))
        for item in 0..<count {
            if item > 0 { bytes += separator }
            bytes += idKey
            appendDecimal(random.int(in: 0...1_000_000), to: &bytes)
            bytes += nameKey
            bytes += random.pick(words)
            bytes += tagsKey
            var chosen: [Int] = []
            while chosen.count < 3 {
                let candidate = random.int(in: 0...(words.count - 1))
                if !chosen.contains(candidate) { chosen.append(candidate) }
            }
            for (position, word) in chosen.enumerated() {
                if position > 0 { bytes += separator }
                bytes.append(UInt8(ascii: "\""))
                bytes += words[word]
                bytes.append(UInt8(ascii: "\""))
            }
            bytes += recordEnd
        }
        bytes.append(UInt8(ascii: "]"))
    }

    private static func appendDecimal(_ value: Int, to bytes: inout [UInt8]) {
        if value == 0 {
            bytes.append(UInt8(ascii: "0"))
            return
        }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        var rest = value
        withUnsafeMutableBytes(of: &digits) { raw in
            while rest > 0 && count < 8 {
                raw[count] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
                count += 1
            }
            for index in stride(from: count - 1, through: 0, by: -1) { bytes.append(raw[index]) }
        }
    }
}
