import Foundation

/// The bytes of the store's name index (`index/names-<generation>`): every name the active
/// packages answer to, mapped to the file that wins it (package, version, relative path,
/// size), laid out to be queried in place through `mmap`.
///
/// Little-endian throughout. A 64-byte header:
///
/// | offset | field |
/// |---|---|
/// | 0 | `HOTNAMES` |
/// | 8 | format (u32, 1), header size (u32, 64) |
/// | 16 | the store generation the index belongs to (u64) |
/// | 24 | body length (u64), body checksum (u64, ``checksum(_:seed:)``) |
/// | 40 | packages, files, entries (u32 each), log2 of the slot count (u32) |
/// | 56 | header checksum (u64, over bytes 0..<56) |
///
/// then the body, each section 8-byte aligned: the settings the names were worked out with
/// (u32 length, `3,2,1;png,jpg,…`), the packages (6 × u32: id, version and version path as
/// offset and length in the string pool), the files (path offset u32, path length u16,
/// package u16, size u64), the entries (key hash u32, key offset u32, key length u32, file
/// u32), the hash slots (u32 entry + 1, 0 for empty; linear probing, at most half full), and
/// the string pool. A key that is a prefix of its file's path shares the path's bytes.
package enum NameIndexFormat {
    static let magic: [UInt8] = Array("HOTNAMES".utf8)
    static let format: UInt32 = 1
    static let headerSize = 64
    static let packageRecordSize = 24
    static let fileRecordSize = 16
    static let entryRecordSize = 16

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
    ///   packages, paths of 65,535 bytes, 4 GiB).
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
        var packageRecords: [UInt32] = []
        var fileRecords: [(offset: UInt32, length: UInt16, package: UInt16, size: UInt64, path: String)] = []
        var entries: [(hash: UInt64, keyOffset: UInt32, keyLength: UInt32, file: UInt32)] = []
        var seen = Set<String>()
        for (number, item) in packages.enumerated() {
            for text in [item.package.id, item.package.version, item.package.path] {
                let (offset, length) = intern(text)
                packageRecords += [offset, length]
            }
            let keys = packageKeys(item.files, scales: scales, extensionRanks: ranks)
            // The files that win a name, each stored once, in a stable order.
            var filePositions: [Int: UInt32] = [:]
            for (key, value) in keys.sorted(by: { $0.key < $1.key }) where seen.insert(key).inserted {
                let fileNumber: UInt32
                if let known = filePositions[value.file] {
                    fileNumber = known
                } else {
                    let file = item.files[value.file]
                    let path = value.rank.path
                    guard path.utf8.count <= Int(UInt16.max) else {
                        throw HotUpdateError(
                            .unsupported,
                            "a path of more than 65,535 bytes cannot be indexed",
                            packageID: item.package.id,
                            subject: String(path.prefix(200))
                        )
                    }
                    let (offset, length) = intern(path)
                    fileNumber = UInt32(fileRecords.count)
                    fileRecords.append((offset, UInt16(length), UInt16(number), UInt64(max(0, file.size)), path))
                    filePositions[value.file] = fileNumber
                }
                let record = fileRecords[Int(fileNumber)]
                let keyOffset: UInt32
                if record.path.utf8.starts(with: key.utf8) {
                    keyOffset = record.offset
                } else {
                    keyOffset = intern(key).0
                }
                entries.append((hash(key.utf8), keyOffset, UInt32(key.utf8.count), fileNumber))
            }
        }
        var slotBits: UInt32 = 4
        while (1 << slotBits) < entries.count * 2 { slotBits += 1 }
        let slotMask = (1 << Int(slotBits)) - 1
        var slots = [UInt32](repeating: 0, count: 1 << Int(slotBits))
        for (number, entry) in entries.enumerated() {
            var slot = Int(truncatingIfNeeded: entry.hash) & slotMask
            while slots[slot] != 0 { slot = (slot + 1) & slotMask }
            slots[slot] = UInt32(number + 1)
        }

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
        for entry in entries {
            body.u32(UInt32(truncatingIfNeeded: entry.hash >> 32))
            body.u32(entry.keyOffset)
            body.u32(entry.keyLength)
            body.u32(entry.file)
        }
        for slot in slots { body.u32(slot) }
        body.align()
        body.bytes(pool)
        body.align()
        guard body.data.count < Int(UInt32.max) else {
            throw HotUpdateError(.unsupported, "the name index would exceed 4 GiB")
        }
        let bodyChecksum = body.data.withUnsafeBytes { checksum($0) }

        var header = ByteWriter()
        header.bytes(magic)
        header.u32(format)
        header.u32(UInt32(headerSize))
        header.u64(UInt64(generation))
        header.u64(UInt64(body.data.count))
        header.u64(bodyChecksum)
        header.u32(UInt32(packages.count))
        header.u32(UInt32(fileRecords.count))
        header.u32(UInt32(entries.count))
        header.u32(slotBits)
        header.u64(header.data.withUnsafeBytes { checksum($0) })
        return header.data + body.data
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

    /// FNV-1a, 64 bits: the hash of keys (short strings).
    @inline(__always)
    static func hash<Bytes: Sequence>(_ bytes: Bytes) -> UInt64 where Bytes.Element == UInt8 {
        var value: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            value = (value ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return value
    }

    /// A 64-bit checksum of `bytes`, four lanes of 8-byte words mixed by multiplication:
    /// catches torn and flipped bytes at memory speed (it guards against damage, not attack).
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
    private var lanes: (UInt64, UInt64, UInt64, UInt64)
    private var total = 0
    private var tail: [UInt8] = []

    init(seed: UInt64 = 0) {
        lanes = (seed &+ prime1, seed &+ prime2, seed, seed &- prime1)
    }

    @inline(__always) private func round(_ lane: UInt64, _ word: UInt64) -> UInt64 {
        let mixed = lane &+ word &* prime2
        return ((mixed << 31) | (mixed >> 33)) &* prime1
    }

    /// Adds a chunk; every chunk but the last must be a multiple of 32 bytes long.
    mutating func add(_ bytes: UnsafeRawBufferPointer) {
        precondition(tail.isEmpty, "only the last chunk may have a length that is not a multiple of 32")
        let count = bytes.count
        var offset = 0
        while offset + 32 <= count {
            lanes.0 = round(lanes.0, bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            lanes.1 = round(lanes.1, bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
            lanes.2 = round(lanes.2, bytes.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self))
            lanes.3 = round(lanes.3, bytes.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self))
            offset += 32
        }
        total += count
        tail = Array(bytes[offset...])
    }

    func finish() -> UInt64 {
        var value = UInt64(total) &+ lanes.0 &+ ((lanes.1 << 7) | (lanes.1 >> 57))
        value = value &+ ((lanes.2 << 12) | (lanes.2 >> 52)) &+ ((lanes.3 << 18) | (lanes.3 >> 46))
        for byte in tail { value = round(value, UInt64(byte)) }
        value ^= value >> 29
        value = value &* prime1
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
    mutating func align() {
        let padding = (8 - data.count % 8) % 8
        if padding > 0 { data.append(contentsOf: [UInt8](repeating: 0, count: padding)) }
    }
}
