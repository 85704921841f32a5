import Foundation
import HotCore

/// Builds ZIP files byte by byte, honest or hostile, with no archive library: the archives
/// ``UnarchiverConformance`` feeds an unarchiver, and yours for your own tests.
///
/// Entries are stored (method 0) or deflated with fixed Huffman codes from a run of one
/// byte (``Entry/deflatedRun(_:byte:count:)``), which is enough to make a compression bomb.
/// Every field an attacker controls can be set: the name (raw bytes), the declared CRC and
/// size, the Unix mode (file type included), a local header name that disagrees with the
/// central directory's, the flags and the extra fields (a WinZip AES entry's, with
/// ``Entry/winZipAES(_:payload:crc32:uncompressedSize:vendorVersion:vendorID:strength:method:)``).
///
/// ```swift
/// let zip = RawZipArchive([
///     .file("ok.txt", Array("fine".utf8)),
///     .file("../evil.txt", Array("x".utf8)),
/// ])
/// try zip.write(to: scratch.appendingPathComponent("slip.zip"))
/// ```
public struct RawZipArchive: Sendable, Hashable {
    /// One entry, as written into both the local header and the central directory.
    public struct Entry: Sendable, Hashable {
        /// The name's raw bytes (UTF-8 for names built from a `String`).
        public var name: [UInt8]
        /// The entry's data as stored in the archive (compressed for method 8).
        public var payload: [UInt8]
        /// The compression method: 0 stored, 8 deflate.
        public var method: UInt16
        /// The CRC-32 declared in the headers.
        public var crc32: UInt32
        /// The uncompressed size declared in the headers.
        public var uncompressedSize: UInt32
        /// The Unix mode, file type bits included (`0o100644` a file, `0o40755` a directory,
        /// `0o120777` a symbolic link).
        public var mode: UInt32
        /// A different name for the local header only; nil writes ``name`` in both.
        public var localName: [UInt8]?
        /// General purpose flags besides UTF-8 (bit 11, set for names with non-ASCII bytes):
        /// 1 for an encrypted entry.
        public var flags: UInt16 = 0
        /// Extra fields (id, length, data each), written into both headers.
        public var extra: [UInt8] = []

        /// Creates an entry from raw fields, for archives that lie.
        public init(
            name: [UInt8],
            payload: [UInt8],
            method: UInt16 = 0,
            crc32: UInt32,
            uncompressedSize: UInt32,
            mode: UInt32 = 0o100644,
            localName: [UInt8]? = nil
        ) {
            self.name = name
            self.payload = payload
            self.method = method
            self.crc32 = crc32
            self.uncompressedSize = uncompressedSize
            self.mode = mode
            self.localName = localName
        }

        /// A stored regular file with a correct CRC and size.
        public static func file(_ name: String, _ content: [UInt8], mode: UInt32 = 0o100644) -> Entry {
            Entry(
                name: Array(name.utf8),
                payload: content,
                crc32: RawZipArchive.crc32(content),
                uncompressedSize: UInt32(truncatingIfNeeded: content.count),
                mode: mode
            )
        }

        /// A directory entry; `name` gets a trailing `/` if it lacks one.
        public static func directory(_ name: String) -> Entry {
            let slashed = name.hasSuffix("/") ? name : name + "/"
            return Entry(name: Array(slashed.utf8), payload: [], crc32: 0, uncompressedSize: 0, mode: 0o40755)
        }

        /// A symbolic link whose stored data is its target, as Info-ZIP writes them.
        public static func symlink(_ name: String, to target: String) -> Entry {
            let bytes = Array(target.utf8)
            return Entry(
                name: Array(name.utf8),
                payload: bytes,
                crc32: RawZipArchive.crc32(bytes),
                uncompressedSize: UInt32(bytes.count),
                mode: 0o120777
            )
        }

        /// A deflated file holding `count` copies of `byte`: about 160 times smaller than its
        /// content, so a few kilobytes inflate to megabytes.
        public static func deflatedRun(_ name: String, byte: UInt8 = 0, count: Int) -> Entry {
            let content = [UInt8](repeating: byte, count: count)
            return Entry(
                name: Array(name.utf8),
                payload: RawZipArchive.deflateRun(byte: byte, count: count),
                method: 8,
                crc32: RawZipArchive.crc32(content),
                uncompressedSize: UInt32(truncatingIfNeeded: count)
            )
        }

        /// A copy declaring another uncompressed size (a size lie).
        public func declaring(uncompressedSize: UInt32) -> Entry {
            var copy = self
            copy.uncompressedSize = uncompressedSize
            return copy
        }

        /// A WinZip AES entry (method 99, encrypted) whose data is `payload` (salt, password
        /// verifier, encrypted bytes, authentication code, as a WinZip AES writer made them),
        /// with an AES extra field (0x9901) saying `vendorVersion`, `vendorID` ("AE" is 0x4541),
        /// `strength` (1, 2, 3: AES-128, -192, -256) and the data's `method`; nil `vendorVersion`
        /// leaves the field out. AE-2 (vendor version 2) entries declare a CRC-32 of 0.
        public static func winZipAES(
            _ name: String,
            payload: [UInt8],
            crc32: UInt32 = 0,
            uncompressedSize: UInt32,
            vendorVersion: UInt16? = 2,
            vendorID: UInt16 = 0x4541,
            strength: UInt8 = 3,
            method: UInt16 = 0
        ) -> Entry {
            var entry = Entry(
                name: Array(name.utf8),
                payload: payload,
                method: 99,
                crc32: crc32,
                uncompressedSize: uncompressedSize
            )
            entry.flags = 1
            if let vendorVersion {
                entry.extra.append16(0x9901)
                entry.extra.append16(7)
                entry.extra.append16(vendorVersion)
                entry.extra.append16(vendorID)
                entry.extra.append(strength)
                entry.extra.append16(method)
            }
            return entry
        }

        /// A copy declaring another CRC-32.
        public func declaring(crc32: UInt32) -> Entry {
            var copy = self
            copy.crc32 = crc32
            return copy
        }
    }

    /// The entries, in archive order.
    public var entries: [Entry]

    /// Creates an archive of `entries`.
    public init(_ entries: [Entry]) {
        self.entries = entries
    }

    /// The archive's bytes: local headers with data, the central directory, the end record.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        var central: [UInt8] = []
        for entry in entries {
            let offset = UInt32(truncatingIfNeeded: out.count)
            let localName = entry.localName ?? entry.name
            let flags: UInt16 = (entry.name.contains { $0 >= 0x80 } ? 0x0800 : 0) | entry.flags
            out.append32(0x0403_4b50)
            out.append16(20)
            out.append16(flags)
            out.append16(entry.method)
            out.append16(0)  // time
            out.append16(0x21)  // 1980-01-01
            out.append32(entry.crc32)
            out.append32(UInt32(truncatingIfNeeded: entry.payload.count))
            out.append32(entry.uncompressedSize)
            out.append16(UInt16(truncatingIfNeeded: localName.count))
            out.append16(UInt16(truncatingIfNeeded: entry.extra.count))
            out.append(contentsOf: localName)
            out.append(contentsOf: entry.extra)
            out.append(contentsOf: entry.payload)

            central.append32(0x0201_4b50)
            central.append16(0x0314)  // made by Unix, version 2.0
            central.append16(20)
            central.append16(flags)
            central.append16(entry.method)
            central.append16(0)
            central.append16(0x21)
            central.append32(entry.crc32)
            central.append32(UInt32(truncatingIfNeeded: entry.payload.count))
            central.append32(entry.uncompressedSize)
            central.append16(UInt16(truncatingIfNeeded: entry.name.count))
            central.append16(UInt16(truncatingIfNeeded: entry.extra.count))
            central.append16(0)  // comment
            central.append16(0)  // disk
            central.append16(0)  // internal attributes
            let dosDirectory: UInt32 = entry.mode & 0o170000 == 0o040000 ? 0x10 : 0
            central.append32(entry.mode << 16 | dosDirectory)
            central.append32(offset)
            central.append(contentsOf: entry.name)
            central.append(contentsOf: entry.extra)
        }
        let centralOffset = UInt32(truncatingIfNeeded: out.count)
        out.append(contentsOf: central)
        out.append32(0x0605_4b50)
        out.append16(0)
        out.append16(0)
        out.append16(UInt16(truncatingIfNeeded: entries.count))
        out.append16(UInt16(truncatingIfNeeded: entries.count))
        out.append32(UInt32(truncatingIfNeeded: central.count))
        out.append32(centralOffset)
        out.append16(0)
        return out
    }

    /// Writes the archive to `url`.
    ///
    /// - Throws: `HotUpdateError.Code.fileSystem` when the file cannot be written.
    public func write(to url: URL) throws {
        do {
            try Data(bytes).write(to: url)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot write the archive \(url.path)")
        }
    }

    /// The CRC-32 (ISO-HDLC, as ZIP uses) of `bytes`.
    public static func crc32<Bytes: Sequence>(_ bytes: Bytes) -> UInt32 where Bytes.Element == UInt8 {
        var crc: UInt32 = 0xffff_ffff
        for byte in bytes {
            crc = crcTable[Int((crc ^ UInt32(byte)) & 0xff)] ^ (crc >> 8)
        }
        return crc ^ 0xffff_ffff
    }

    private static let crcTable: [UInt32] = (0..<256).map { index in
        var value = UInt32(index)
        for _ in 0..<8 { value = value & 1 == 1 ? 0xedb8_8320 ^ (value >> 1) : value >> 1 }
        return value
    }

    /// A raw deflate stream (RFC 1951, one final block of fixed Huffman codes) of `count`
    /// copies of `byte`: one literal, then matches of 258 bytes at distance 1.
    public static func deflateRun(byte: UInt8, count: Int) -> [UInt8] {
        var bits = BitWriter()
        bits.write(1, count: 1)  // BFINAL
        bits.write(1, count: 2)  // BTYPE 01: fixed Huffman
        func literal(_ value: UInt8) {
            if value < 144 {
                bits.writeCode(0x30 + UInt32(value), length: 8)
            } else {
                bits.writeCode(0x190 + UInt32(value) - 144, length: 9)
            }
        }
        var remaining = count
        if remaining > 0 {
            literal(byte)
            remaining -= 1
        }
        while remaining >= 258 {
            bits.writeCode(0xc5, length: 8)  // length code 285: 258 bytes
            bits.writeCode(0, length: 5)  // distance code 0: distance 1
            remaining -= 258
        }
        while remaining > 0 {
            literal(byte)
            remaining -= 1
        }
        bits.writeCode(0, length: 7)  // end of block (256)
        return bits.finish()
    }
}

/// Writes bits least significant first, as deflate packs them.
private struct BitWriter {
    private var bytes: [UInt8] = []
    private var current: UInt32 = 0
    private var used: UInt32 = 0

    mutating func write(_ value: UInt32, count: UInt32) {
        for index in 0..<count {
            current |= ((value >> index) & 1) << used
            used += 1
            if used == 8 {
                bytes.append(UInt8(current))
                current = 0
                used = 0
            }
        }
    }

    /// Writes a Huffman code, most significant bit first.
    mutating func writeCode(_ code: UInt32, length: UInt32) {
        var reversed: UInt32 = 0
        for index in 0..<length { reversed |= ((code >> index) & 1) << (length - 1 - index) }
        write(reversed, count: length)
    }

    mutating func finish() -> [UInt8] {
        if used > 0 { bytes.append(UInt8(current)) }
        return bytes
    }
}

extension [UInt8] {
    fileprivate mutating func append16(_ value: UInt16) {
        append(UInt8(value & 0xff))
        append(UInt8(value >> 8))
    }

    fileprivate mutating func append32(_ value: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) { append(UInt8((value >> UInt32(shift)) & 0xff)) }
    }
}
