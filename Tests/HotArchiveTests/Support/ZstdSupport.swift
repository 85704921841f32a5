import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

/// The zstd tests' generator: ``SeededGenerator`` (SplitMix64), the same bytes on every run,
/// machine and Swift version (the standard library's generators and `random(in:using:)`
/// algorithms are not promised to stay put).
typealias ZstdSeededRandom = SeededGenerator

extension SeededGenerator {
    /// A value in `0..<bound` (multiply-shift).
    mutating func below(_ bound: Int) -> Int {
        Int(((next() >> 32) &* UInt64(bound)) >> 32)
    }

    /// Fills `buffer` with random bytes, eight at a time.
    mutating func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        var offset = 0
        while offset + 8 <= buffer.count {
            buffer.storeBytes(of: next().littleEndian, toByteOffset: offset, as: UInt64.self)
            offset += 8
        }
        while offset < buffer.count {
            buffer[offset] = UInt8(truncatingIfNeeded: next())
            offset += 1
        }
    }

    /// `count` random bytes.
    mutating func data(_ count: Int) -> Data {
        var data = Data(count: count)
        data.withUnsafeMutableBytes { fill($0) }
        return data
    }

    mutating func bytes(_ count: Int) -> [UInt8] {
        var result = [UInt8]()
        result.reserveCapacity(count + 8)
        while result.count < count {
            withUnsafeBytes(of: next().littleEndian) { result.append(contentsOf: $0) }
        }
        return Array(result.prefix(count))
    }
}

/// Deterministic inputs for the zstd tests.
enum ZstdSamples {
    static let words = [
        "update", "bundle", "asset", "manifest", "package", "script", "resource", "version", "signature",
        "install", "patch", "delta", "window", "frame", "block", "literal", "sequence", "offset", "match",
        "the", "a", "of", "to", "and", "in", "is", "for", "with", "on", "that",
    ]

    /// `size` bytes of mixed content from `seed`: English-like text, JSON records, JavaScript-like
    /// lines, structured binary (little-endian tables), random bytes (already compressed) and zero
    /// runs, in pieces of 1–48 KiB, with a few long repeats of earlier content.
    static func mixed(size: Int, seed: UInt64) -> Data {
        var random = ZstdSeededRandom(seed: seed)
        var out = [UInt8]()
        out.reserveCapacity(size + 65_536)
        while out.count < size {
            let piece = 1_024 + random.below(48 * 1_024)
            switch random.below(7) {
            case 0: out += text(piece, &random)
            case 1: out += json(piece, &random)
            case 2: out += javaScript(piece, &random)
            case 3:
                // A table of records: u32 counters, u16 small numbers, a float-like word.
                var counter = UInt32(random.below(1 << 20))
                for _ in 0..<(piece / 8) {
                    counter &+= UInt32(1 + random.below(7))
                    withUnsafeBytes(of: counter.littleEndian) { out += $0 }
                    withUnsafeBytes(of: UInt16(random.below(300)).littleEndian) { out += $0 }
                    withUnsafeBytes(of: UInt16(0x3F80 + random.below(16)).littleEndian) { out += $0 }
                }
            case 4: out += random.bytes(piece)
            case 5: out += [UInt8](repeating: 0, count: piece * 2)
            default:
                // A repeat of earlier content, near or far.
                if out.count > 4_096 {
                    let length = min(piece, out.count / 2)
                    let start = random.below(out.count - length)
                    out += out[start..<(start + length)]
                }
            }
        }
        return Data(out.prefix(size))
    }

    static func text(_ count: Int, _ random: inout ZstdSeededRandom) -> [UInt8] {
        var line = [UInt8]()
        while line.count < count {
            line += Array(words[random.below(words.count)].utf8)
            line.append(random.below(12) == 0 ? 0x0A : 0x20)
        }
        return line
    }

    static func json(_ count: Int, _ random: inout ZstdSeededRandom) -> [UInt8] {
        var text = ""
        while text.utf8.count < count {
            let id = random.below(1_000_000)
            text += "{\"id\":\(id),\"name\":\"\(words[random.below(words.count)])-\(id % 97)\","
            text += "\"size\":\(random.below(1 << 24)),\"tags\":[\"\(words[random.below(words.count)])\"]}\n"
        }
        return Array(text.utf8)
    }

    static func javaScript(_ count: Int, _ random: inout ZstdSeededRandom) -> [UInt8] {
        var text = ""
        while text.utf8.count < count {
            let name = words[random.below(words.count)]
            text += "export function \(name)\(random.below(500))(value) { return value * \(random.below(100)) + "
            text += "\"\(words[random.below(words.count)])\"; }\n"
        }
        return Array(text.utf8)
    }

    /// One HTTP response header block, as the golden dictionary was made for.
    static func http(_ random: inout ZstdSeededRandom) -> Data {
        let status = ["200 OK", "304 Not Modified", "404 Not Found", "206 Partial Content"][random.below(4)]
        let type = ["text/html; charset=utf-8", "application/json", "image/png", "application/javascript"][
            random.below(4)
        ]
        var text = "HTTP/1.1 \(status)\r\n"
        text += "Date: Mon, \(10 + random.below(18)) Nov 2025 \(10 + random.below(13)):\(10 + random.below(49)):"
        text += "\(10 + random.below(49)) GMT\r\nServer: nginx/1.\(18 + random.below(8)).\(random.below(3))\r\n"
        text += "Content-Type: \(type)\r\nContent-Length: \(random.below(1 << 20))\r\n"
        text += "Cache-Control: max-age=\(random.below(86_400))\r\nETag: \"\(String(random.next(), radix: 16))\"\r\n"
        text += "Connection: keep-alive\r\nAccept-Ranges: bytes\r\n"
        if random.below(2) == 0 { text += "Vary: Accept-Encoding\r\nX-Frame-Options: SAMEORIGIN\r\n" }
        return Data((text + "\r\n").utf8)
    }

    /// `base` with about `percent`% of it changed: every 64 KiB (or every 1/16 of a small base),
    /// a run is overwritten, and, when `resize` is set, a few runs are inserted and removed.
    static func changed(_ base: Data, percent: Int, resize: Bool, seed: UInt64) -> Data {
        var random = ZstdSeededRandom(seed: seed)
        var bytes = [UInt8](base)
        let stride = max(16, min(65_536, bytes.count / 16))
        let run = max(1, stride * percent / 100)
        var offset = random.below(stride)
        while offset + run <= bytes.count {
            let fresh = random.bytes(run)
            bytes.replaceSubrange(offset..<(offset + run), with: fresh)
            offset += stride
        }
        if resize {
            bytes.insert(contentsOf: Array("inserted near the start".utf8), at: min(bytes.count, 7))
            let cut = bytes.count / 2
            bytes.removeSubrange(cut..<min(bytes.count, cut + max(1, bytes.count / 50)))
            bytes += Array("appended at the end".utf8)
        }
        return Data(bytes)
    }
}

/// The `zstd` command-line tool (Debian's, libzstd 1.5.4), run as a process: the oracle.
enum ZstdTool {
    /// `zstd ARGUMENTS` run on `input` written to a file; the frame it writes.
    static func compress(_ input: Data, _ arguments: [String], in scratch: Scratch) async throws -> Data {
        let name = UUID().uuidString
        let source = scratch.path(name)
        let target = scratch.path(name + ".zst")
        try input.write(to: source)
        defer {
            try? FileManager.default.removeItem(at: source)
            try? FileManager.default.removeItem(at: target)
        }
        try await Subprocess.check("zstd", ["-q", "-f"] + arguments + [source.path, "-o", target.path])
        return try Data(contentsOf: target)
    }

    /// What `zstd -d ARGUMENTS` makes of `frames`, or nil when it refuses them.
    static func decompress(_ frames: Data, _ arguments: [String] = [], in scratch: Scratch) async throws -> Data? {
        let name = UUID().uuidString
        let source = scratch.path(name + ".zst")
        let target = scratch.path(name)
        try frames.write(to: source)
        defer {
            try? FileManager.default.removeItem(at: source)
            try? FileManager.default.removeItem(at: target)
        }
        let output = try await Subprocess.run(
            "zstd",
            ["-q", "-d", "-f", "--memory=2048MB"] + arguments + [source.path, "-o", target.path]
        )
        guard output.status == 0 else { return nil }
        return try Data(contentsOf: target)
    }

    /// `zstd -d` over many inputs in one process: for each, its output or nil when refused.
    static func decompressAll(_ inputs: [Data], in scratch: Scratch) async throws -> [Data?] {
        let folder = scratch.path("batch-\(UUID().uuidString)")
        let outputs = folder.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: outputs, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var paths: [String] = []
        for (index, input) in inputs.enumerated() {
            let file = folder.appendingPathComponent("\(index).zst")
            try input.write(to: file)
            paths.append(file.path)
        }
        let list = folder.appendingPathComponent("list")
        try paths.joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
        // zstd goes on to the next file after one it refuses, and exits non-zero at the end.
        _ = try await Subprocess.run(
            "zstd",
            ["-q", "-d", "-f", "--output-dir-flat", outputs.path, "--filelist", list.path]
        )
        return inputs.indices.map { index in
            try? Data(contentsOf: outputs.appendingPathComponent("\(index)"))
        }
    }
}

/// Builds and reads the outer structure of zstd frames (RFC 8878, section 3.1), independently
/// of the decoder under test: what a test made, and what the tool wrote.
enum ZstdFrameShape {
    static let magic: [UInt8] = [0x28, 0xB5, 0x2F, 0xFD]

    /// A skippable frame: magic 0x184D2A50 + `variant`, the payload's length (u32 LE), the payload.
    static func skippable(_ payload: [UInt8], variant: UInt8 = 0) -> Data {
        var bytes: [UInt8] = [0x50 | (variant & 0x0F), 0x2A, 0x4D, 0x18]
        withUnsafeBytes(of: UInt32(payload.count).littleEndian) { bytes += $0 }
        return Data(bytes + payload)
    }

    /// A frame with an 8-byte content size field of `contentSize`, the window descriptor
    /// `windowDescriptor`, and one last raw block holding `payload`: a header that declares
    /// whatever the test wants, with content that does not have to match it.
    static func rawFrame(contentSize: UInt64?, windowDescriptor: UInt8, payload: [UInt8]) -> Data {
        var bytes = magic
        // Frame header descriptor: content size flag 3 (8 bytes) or 0 (none), not single segment.
        bytes.append(contentSize == nil ? 0x00 : 0xC0)
        bytes.append(windowDescriptor)
        if let contentSize { withUnsafeBytes(of: contentSize.littleEndian) { bytes += $0 } }
        let header = UInt32(payload.count) << 3 | 0 << 1 | 1  // raw block, last
        bytes += [UInt8(header & 0xFF), UInt8(header >> 8 & 0xFF), UInt8(header >> 16 & 0xFF)]
        return Data(bytes + payload)
    }

    /// The window descriptor byte for a window of 2^`log` bytes (log 10...41).
    static func windowDescriptor(log: Int) -> UInt8 { UInt8((log - 10) << 3) }

    struct Frame: Equatable {
        var headerBytes: Int
        var windowSize: UInt64?
        var contentSize: UInt64?
        var dictionaryID: UInt32?
        var hasChecksum: Bool
        /// Block types in order: 0 raw, 1 RLE, 2 compressed.
        var blockTypes: [Int]
        var totalBytes: Int
    }

    /// The frames of `data` (zstd frames only; skippable frames are passed over), read from
    /// their headers and block headers.
    static func frames(of data: Data) throws -> [Frame] {
        let bytes = [UInt8](data)
        var offset = 0
        var result: [Frame] = []
        func u32(_ at: Int) -> UInt32 {
            UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24
        }
        func little(_ at: Int, _ count: Int) -> UInt64 {
            (0..<count).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * $1) }
        }
        while offset < bytes.count {
            try #require(offset + 8 <= bytes.count, "a frame header runs past the end")
            let start = offset
            if u32(offset) & 0xFFFF_FFF0 == 0x184D_2A50 {
                offset += 8 + Int(u32(offset + 4))
                continue
            }
            try #require(Array(bytes[offset..<(offset + 4)]) == magic, "no zstd magic at \(offset)")
            let descriptor = bytes[offset + 4]
            let singleSegment = descriptor & 0x20 != 0
            let checksum = descriptor & 0x04 != 0
            let dictionaryBytes = [0, 1, 2, 4][Int(descriptor & 0x03)]
            let fcsFlag = Int(descriptor >> 6)
            let fcsBytes = [singleSegment ? 1 : 0, 2, 4, 8][fcsFlag]
            offset += 5
            var window: UInt64?
            if !singleSegment {
                let exponent = UInt64(bytes[offset] >> 3)
                let base = UInt64(1) << (10 + exponent)
                window = base + base / 8 * UInt64(bytes[offset] & 7)
                offset += 1
            }
            let dictionary = dictionaryBytes == 0 ? nil : UInt32(little(offset, dictionaryBytes))
            offset += dictionaryBytes
            var content: UInt64?
            if fcsBytes > 0 {
                content = little(offset, fcsBytes) + (fcsBytes == 2 ? 256 : 0)
                offset += fcsBytes
            }
            if singleSegment { window = content }
            let headerBytes = offset - start
            var types: [Int] = []
            while true {
                try #require(offset + 3 <= bytes.count, "a block header runs past the end")
                let header = Int(little(offset, 3))
                let type = header >> 1 & 3
                let size = header >> 3
                types.append(type)
                offset += 3 + (type == 1 ? 1 : size)
                if header & 1 == 1 { break }
            }
            if checksum { offset += 4 }
            try #require(offset <= bytes.count, "a frame runs past the end")
            result.append(
                Frame(
                    headerBytes: headerBytes,
                    windowSize: window,
                    contentSize: content,
                    dictionaryID: dictionary,
                    hasChecksum: checksum,
                    blockTypes: types,
                    totalBytes: offset - start
                )
            )
        }
        return result
    }
}
