import Foundation
import HotCore

/// The bytes of the store's name index (`index/names-<generation>`): every name the active
/// packages answer to, mapped to the file that wins it (package, version, relative path,
/// size), laid out to be queried in place through `mmap`.
///
/// Little-endian throughout. A 64-byte header:
///
/// | offset | field |
/// |---|---|
/// | 0 | `HOTNAMES` |
/// | 8 | format (u32, 4), header size (u32, 64) |
/// | 16 | the store generation the index belongs to (u64) |
/// | 24 | body length (u64), checksum of the block table (u64, ``checksum(_:seed:)``) |
/// | 40 | packages, files, entries (u32 each), log2 of the slot count (u32) |
/// | 56 | header checksum (u64, over bytes 0..<56) |
///
/// then the body, each section 8-byte aligned: the settings the names were worked out with
/// (u32 length, `3,2,1;png,jpg,…`), the packages (6 × u32: id, version and version path as
/// offset and length in the string pool), the files (path offset u32, path length u16,
/// package u16, size u64; every file of every package, those that win a name first), the
/// log2 of the path slot count and the number of paths (u32 each), then, 64-byte aligned,
/// the hash slots of the names (8 bytes each, a u64: the key's hash's upper 20 bits, key
/// length in 12 bits, key offset in the pool in 32; 0 marks an empty slot), those of the
/// paths (16 bytes each: the path's hash's upper 32 bits u32, path length u32, path offset
/// u32, file u32; a length of 0 marks an empty slot), both with linear probing, at most 70%
/// full for names and 80% for paths, and the string pool. Every path in the pool, and every
/// key stored apart, follows its file's number (u32): a key that is a prefix of its file's
/// path shares the path's bytes and reads the same number. A name lookup reads one slot (its
/// tag and length compared in one load) and the line of the key's bytes, where the file's
/// number lies too. The path slots answer which file of a given package has a given path
/// (its hash folded with the package's number, ``pathHash(_:package:)``), for the resolvers
/// that address one package.
///
/// After the body, the block table: one checksum (u64) per ``blockSize`` bytes of the body
/// (the last block may be shorter), block `n`'s seeded with `n`. Opening checks the header
/// and the table; each block is checked the first time a lookup reads it, so opening costs
/// the same whatever the store holds, and a damaged block is found before a byte of it is
/// believed.
///
/// Format 4 keeps 8-byte name slots and each file's number beside its key, where format 3 kept
/// the number in 16-byte slots (8 MB of name slots at 100,000 files instead of 4). Format 3
/// checks the body block by block where format 2 checked it whole when it was
/// opened (16 MB for 100,000 files, read on every launch), and format 2 kept each entry in
/// its slot where format 1 pointed from 4-byte slots to a separate entry table. An index of
/// another format is refused when opened, as a damaged one is, and rebuilt.
package enum NameIndexFormat {
    static let magic: [UInt8] = Array("HOTNAMES".utf8)
    static let format: UInt32 = 4
    static let headerSize = 64
    static let packageRecordSize = 24
    static let fileRecordSize = 16
    /// The bytes of a name slot and of a path slot.
    package static let nameSlotSize = 8
    package static let pathSlotSize = 16
    /// The longest key a name slot can hold (12 bits of length): longer than any path a
    /// system opens.
    package static let maxKeyLength = 4_095
    /// The index is written 64 KiB per call (see `FileSystem.replaceDurably(_:with:chunkSize:)`):
    /// a lookup then maps at most that much of the file around each page it touches.
    static let writeChunk = 64 * 1024
    /// The hash slots start at a multiple of this (a cache line), so no slot straddles two.
    static let slotAlignment = 64
    /// The bytes of the body each checksum of the block table covers: 16 KiB, four pages, so
    /// that a lookup checks little more than it maps.
    static let blockShift = 14
    static let blockSize = 1 << blockShift

    /// The number of blocks of a body of `length` bytes.
    static func blockCount(bodyLength length: Int) -> Int { (length + blockSize - 1) >> blockShift }

    /// The checksum of block `number`, `bytes` long.
    @inline(__always)
    static func blockChecksum(_ bytes: UnsafeRawBufferPointer, number: Int) -> UInt64 {
        checksum(bytes, seed: UInt64(truncatingIfNeeded: number) &* 0x9E37_79B9_7F4A_7C15)
    }

    /// The number of hash slots for `entries` keys (log2): a power of two at most
    /// `percentFull` full (70% for names, which are asked most and often missed; 80% for
    /// paths, which are asked by the resolvers that address one package).
    static func slotBits(forEntries entries: Int, percentFull: Int = 70) -> Int {
        var bits = 4
        while (1 << bits) * percentFull < entries * 100 { bits += 1 }
        return bits
    }

    /// One package of the index, in the order names are won (first wins).
    package struct Package: Sendable, Hashable {
        package var id: String
        package var version: String
        /// `packages/<id>/<version>`, relative to the store root.
        package var path: String
        package init(id: String, version: String, path: String) {
            self.id = id
            self.version = version
            self.path = path
        }
    }

    /// The settings names are worked out with by default: scales `[3, 2, 1]` and the
    /// extensions `png`, `jpg`, `jpeg`, `webp`, `gif`, `pdf` (as `HotAssets` resolvers default to).
    package static let defaultScales = [3, 2, 1]
    package static let defaultExtensionOrder = ["png", "jpg", "jpeg", "webp", "gif", "pdf"]

    /// The settings text stored in the index.
    package static func settings(scales: [Int], extensionOrder: [String]) -> String {
        scales.map(String.init).joined(separator: ",") + ";" + extensionOrder.joined(separator: ",")
    }

    /// The names of one package's files and the best file (position in `files`) for each.
    static func packageKeys(
        _ files: [FileList.Entry],
        scales: [Int],
        extensionRanks: [String: Int]
    )
        -> [String: (rank: AssetKeyRank, file: Int)]
    {
        var best: [String: (rank: AssetKeyRank, file: Int)] = [:]
        best.reserveCapacity(files.count * 3)
        for (position, file) in files.enumerated() {
            guard let path = AssetName.normalise(file.path) else { continue }
            let (folder, fileName) = AssetName.split(path)
            AssetName.forEachKey(
                path: path,
                folder: folder,
                fileName: fileName,
                scales: scales,
                extensionRanks: extensionRanks
            ) { key, rank in
                if let current = best[key], current.rank <= rank { return }
                best[key] = (rank, position)
            }
        }
        return best
    }

    /// Encodes the index of `packages` (first wins) with their file lists.
    ///
    /// - Throws: ``HotUpdateError/Code/unsupported`` beyond the format's limits (65,535
    ///   packages, paths of 65,535 bytes, names of 4,095 bytes, 4 GiB).
    package static func encode(
        generation: Int,
        packages: [(package: Package, files: [FileList.Entry])],
        scales: [Int] = defaultScales,
        extensionOrder: [String] = defaultExtensionOrder
    ) throws -> Data {
        guard packages.count <= Int(UInt16.max) else {
            throw HotUpdateError(.unsupported, "the name index holds at most 65,535 packages")
        }
        let ranks = AssetName.extensionRanks(extensionOrder)
        var pool: [UInt8] = []
        func intern(_ text: String) -> (UInt32, UInt32) {
            let offset = UInt32(truncatingIfNeeded: pool.count)
            pool.append(contentsOf: text.utf8)
            return (offset, UInt32(truncatingIfNeeded: text.utf8.count))
        }
        /// A path or a key, after the number of its file.
        func intern(_ text: String, file: UInt32) -> (UInt32, UInt32) {
            withUnsafeBytes(of: file.littleEndian) { pool.append(contentsOf: $0) }
            return intern(text)
        }
        var packageRecords: [UInt32] = []
        var fileRecords: [(offset: UInt32, length: UInt16, package: UInt16, size: UInt64, path: String)] = []
        var entries: [SlotEntry] = []
        var paths: [SlotEntry] = []
        var seen = Set<String>()
        // The packages' strings first, together at the pool's start: opening the index reads
        // them all, and one page of them is all it touches.
        for item in packages {
            for text in [item.package.id, item.package.version, item.package.path] {
                let (offset, length) = intern(text)
                packageRecords += [offset, length]
            }
        }
        for (number, item) in packages.enumerated() {
            let keys = packageKeys(item.files, scales: scales, extensionRanks: ranks)
            // Every file is stored once: first those that win a name, in the order of their
            // names (the files asked together lie together), then the others, so that a
            // package's own paths can be looked up as well (``NameIndex/file(package:path:)``).
            var filePositions: [Int: UInt32] = [:]
            func fileNumber(_ position: Int, path: String) throws -> UInt32 {
                if let known = filePositions[position] { return known }
                guard path.utf8.count <= Int(UInt16.max) else {
                    throw HotUpdateError(
                        .unsupported,
                        "a path of more than 65,535 bytes cannot be indexed",
                        packageID: item.package.id,
                        subject: String(path.prefix(200))
                    )
                }
                let fileNumber = UInt32(fileRecords.count)
                let (offset, length) = intern(path, file: fileNumber)
                fileRecords.append(
                    (offset, UInt16(length), UInt16(number), UInt64(max(0, item.files[position].size)), path)
                )
                filePositions[position] = fileNumber
                return fileNumber
            }
            for (key, value) in keys.sorted(by: { $0.key < $1.key }) where seen.insert(key).inserted {
                guard key.utf8.count <= maxKeyLength else {
                    throw HotUpdateError(
                        .unsupported,
                        "a name of more than 4,095 bytes cannot be indexed",
                        packageID: item.package.id,
                        subject: String(key.prefix(200))
                    )
                }
                let file = try fileNumber(value.file, path: value.rank.path)
                let record = fileRecords[Int(file)]
                let keyOffset: UInt32
                if record.path.utf8.starts(with: key.utf8) {
                    keyOffset = record.offset
                } else {
                    keyOffset = intern(key, file: file).0
                }
                entries.append((hash(key), keyOffset, UInt32(key.utf8.count), file))
            }
            for (position, file) in item.files.enumerated() {
                guard let path = AssetName.normalise(file.path) else { continue }
                let file = try fileNumber(position, path: path)
                let record = fileRecords[Int(file)]
                paths.append((pathHash(path, package: number), record.offset, UInt32(record.length), file))
            }
        }
        let slotBits = UInt32(Self.slotBits(forEntries: entries.count))
        let pathSlotBits = UInt32(Self.slotBits(forEntries: paths.count, percentFull: 80))

        var body = ByteWriter()
        let settingsText = Array(settings(scales: scales, extensionOrder: extensionOrder).utf8)
        body.u32(UInt32(settingsText.count))
        body.bytes(settingsText)
        body.align()
        for value in packageRecords { body.u32(value) }
        body.align()
        for file in fileRecords {
            body.u32(file.offset)
            body.u16(file.length)
            body.u16(file.package)
            body.u64(file.size)
        }
        body.u32(pathSlotBits)
        body.u32(UInt32(paths.count))
        body.align(to: slotAlignment, from: headerSize)
        writeSlots(entries, bits: Int(slotBits), into: &body, size: nameSlotSize) { entry, body in
            body.u64((entry.hash >> 44) << 44 | UInt64(entry.keyLength) << 32 | UInt64(entry.keyOffset))
        }
        writeSlots(paths, bits: Int(pathSlotBits), into: &body, size: pathSlotSize) { entry, body in
            body.u32(UInt32(truncatingIfNeeded: entry.hash >> 32))
            body.u32(entry.keyLength)
            body.u32(entry.keyOffset)
            body.u32(entry.file)
        }
        body.align()
        body.bytes(pool)
        body.align()
        guard body.data.count < Int(UInt32.max) else {
            throw HotUpdateError(.unsupported, "the name index would exceed 4 GiB")
        }
        let blocks = body.data.withUnsafeBytes { raw -> ByteWriter in
            var table = ByteWriter()
            for number in 0..<blockCount(bodyLength: raw.count) {
                let start = number << blockShift
                let block = UnsafeRawBufferPointer(rebasing: raw[start..<min(start + blockSize, raw.count)])
                table.u64(blockChecksum(block, number: number))
            }
            return table
        }
        let tableChecksum = blocks.data.withUnsafeBytes { checksum($0) }

        var header = ByteWriter()
        header.bytes(magic)
        header.u32(format)
        header.u32(UInt32(headerSize))
        header.u64(UInt64(generation))
        header.u64(UInt64(body.data.count))
        header.u64(tableChecksum)
        header.u32(UInt32(packages.count))
        header.u32(UInt32(fileRecords.count))
        header.u32(UInt32(entries.count))
        header.u32(slotBits)
        header.u64(header.data.withUnsafeBytes { checksum($0) })
        return header.data + body.data + blocks.data
    }

    /// A key (a name, or a path of one package) as its slot holds it: its hash, where its
    /// bytes lie in the pool, and the file it leads to.
    private typealias SlotEntry = (hash: UInt64, keyOffset: UInt32, keyLength: UInt32, file: UInt32)

    /// Writes the hash slots of `entries`, `1 << bits` of them (linear probing), each of
    /// `size` bytes written by `slot` (an empty one as zeros).
    private static func writeSlots(
        _ entries: [SlotEntry],
        bits: Int,
        into body: inout ByteWriter,
        size: Int,
        slot write: (_ entry: SlotEntry, _ body: inout ByteWriter) -> Void
    ) {
        let slotMask = (1 << bits) - 1
        // Entry number + 1 per slot, 0 for empty.
        var slots = [UInt32](repeating: 0, count: 1 << bits)
        for (number, entry) in entries.enumerated() {
            var slot = Int(truncatingIfNeeded: entry.hash) & slotMask
            while slots[slot] != 0 { slot = (slot + 1) & slotMask }
            slots[slot] = UInt32(number + 1)
        }
        for slot in slots {
            guard slot != 0 else {
                body.zeros(size)
                continue
            }
            write(entries[Int(slot) - 1], &body)
        }
    }

    /// The same index bytes claiming another generation (the body is unchanged): what a
    /// commit that changes nothing that resolves writes.
    package static func retagged(_ data: Data, generation: Int) -> Data {
        var copy = data
        copy.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt64(generation).littleEndian, toByteOffset: 16, as: UInt64.self)
            let sum = checksum(UnsafeRawBufferPointer(rebasing: raw[0..<56]))
            raw.storeBytes(of: sum.littleEndian, toByteOffset: 56, as: UInt64.self)
        }
        return copy
    }

    /// The hash of file `path` of package `package` in the path table: the path's hash
    /// folded with the package's number.
    static func pathHash(_ path: String, package: Int) -> UInt64 {
        var path = path
        return path.withUTF8 { pathHash(UnsafeRawBufferPointer($0), package: package) }
    }

    /// The hash of a path's UTF-8 bytes in the path table, for package `package`.
    @inline(__always)
    package static func pathHash(_ bytes: UnsafeRawBufferPointer, package: Int) -> UInt64 {
        fold(UInt64(truncatingIfNeeded: package) ^ 0x4528_21E6_38D0_1377, hash(bytes))
    }

    /// The hash of a key's UTF-8 bytes (``hash(_:)``).
    static func hash(_ key: String) -> UInt64 {
        var key = key
        return key.withUTF8 { hash(UnsafeRawBufferPointer($0)) }
    }

    /// The hash of keys (short strings), 64 bits: 8 bytes at a time, each word folded in with
    /// a 64 × 64 → 128-bit multiply whose halves are xor-ed (the last partial word read as
    /// the buffer's last 8 bytes when there are 8 or more), then the length. The low bits pick
    /// the slot, the upper 32 are kept in it to skip most byte comparisons.
    @inline(__always)
    package static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let count = bytes.count
        var value: UInt64 = 0x243F_6A88_85A3_08D3
        var offset = 0
        while offset + 8 <= count {
            value = fold(bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self).littleEndian, value)
            offset += 8
        }
        let rest = count - offset
        if rest > 0 {
            var word: UInt64
            if count >= 8 {
                // The last 8 bytes, shifted so that only the `rest` not yet folded remain.
                word = bytes.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self).littleEndian >> (64 - 8 * rest)
            } else {
                word = 0
                for index in 0..<rest { word |= UInt64(bytes[index]) << (8 * index) }
            }
            value = fold(word, value)
        }
        return fold(UInt64(count) ^ 0x1319_8A2E_0370_7344, value)
    }

    @inline(__always)
    private static func fold(_ word: UInt64, _ value: UInt64) -> UInt64 {
        let product = (word ^ 0xA409_3822_299F_31D0).multipliedFullWidth(by: value ^ 0x082E_FA98_EC4E_6C89)
        return product.high ^ product.low
    }

    /// A 64-bit checksum of `bytes`, four lanes of 8-byte words, each folded in with a
    /// multiply of its keyed halves, the word itself and a rotation of its lane: catches torn
    /// and flipped bytes at memory speed (it guards against damage, not attack).
    package static func checksum(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        var sum = ChunkedChecksum(seed: seed)
        sum.add(bytes)
        return sum.finish()
    }
}

/// ``NameIndexFormat/checksum(_:seed:)`` over bytes arriving in chunks whose sizes are
/// multiples of 32 (the last one excepted): the same value as one call over all of them.
struct ChunkedChecksum {
    private let prime1: UInt64 = 0x9E37_79B1_85EB_CA87
    private let prime2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    private let prime3: UInt64 = 0x1656_67B1_9E37_79F9
    private let prime4: UInt64 = 0x85EB_CA77_C2B2_AE63
    private var lanes: (UInt64, UInt64, UInt64, UInt64)
    private var total = 0
    private var tail: [UInt8] = []

    init(seed: UInt64 = 0) {
        lanes = (seed &+ prime1, seed &+ prime2, seed, seed &- prime1)
    }

    /// Folds one 8-byte word into a lane with one 32 × 32 → 64-bit multiply of the word's
    /// halves (keyed, so that a word of zeros counts too), the word itself, and a rotation of
    /// the lane (so that where a word lies counts): the multiplies do not wait on each other,
    /// and the checksum runs at about the speed memory is read.
    @inline(__always) private func round(_ lane: UInt64, _ word: UInt64, _ key: UInt64) -> UInt64 {
        let keyed = word ^ key
        let product = (keyed & 0xFFFF_FFFF) &* (keyed >> 32)
        return ((lane << 23) | (lane >> 41)) &+ product &+ word
    }

    /// Adds a chunk; every chunk but the last must be a multiple of 32 bytes long.
    mutating func add(_ bytes: UnsafeRawBufferPointer) {
        precondition(tail.isEmpty, "only the last chunk may have a length that is not a multiple of 32")
        let count = bytes.count
        var offset = 0
        while offset + 32 <= count {
            lanes.0 = round(lanes.0, bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self), prime1)
            lanes.1 = round(lanes.1, bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self), prime2)
            lanes.2 = round(lanes.2, bytes.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self), prime3)
            lanes.3 = round(lanes.3, bytes.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self), prime4)
            offset += 32
        }
        total += count
        tail = Array(bytes[offset...])
    }

    func finish() -> UInt64 {
        var value = UInt64(total) &+ lanes.0 &+ ((lanes.1 << 7) | (lanes.1 >> 57))
        value = value &+ ((lanes.2 << 12) | (lanes.2 >> 52)) &+ ((lanes.3 << 18) | (lanes.3 >> 46))
        for byte in tail { value = round(value, UInt64(byte), prime1) }
        for _ in 0..<2 {
            value ^= value >> 29
            value = value &* prime1
        }
        return value ^ (value >> 32)
    }
}

/// Appends little-endian integers and bytes.
struct ByteWriter {
    var data = Data()

    mutating func u16(_ value: UInt16) { withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) } }
    mutating func u32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) } }
    mutating func u64(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) } }
    mutating func bytes(_ bytes: [UInt8]) { data.append(contentsOf: bytes) }
    mutating func zeros(_ count: Int) { data.append(contentsOf: repeatElement(0 as UInt8, count: count)) }
    /// Pads with zeros until `base + data.count` is a multiple of `alignment`.
    mutating func align(to alignment: Int, from base: Int) {
        let padding = (alignment - (base + data.count) % alignment) % alignment
        if padding > 0 { zeros(padding) }
    }
    mutating func align() {
        let padding = (8 - data.count % 8) % 8
        if padding > 0 { data.append(contentsOf: [UInt8](repeating: 0, count: padding)) }
    }
}
