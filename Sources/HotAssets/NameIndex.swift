import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

#if canImport(Synchronization)
import Synchronization
#endif

/// The store's name index, mapped read-only and queried in place: a lookup hashes the name,
/// probes the slots and compares bytes; nothing is loaded into Swift collections (see
/// ``NameIndexFormat`` for the layout).
///
/// Opening checks the header, the generation it belongs to and the block table, and the
/// blocks it reads itself (the settings and the packages): what it costs does not grow with
/// the number of files. Every other block is checked the first time a lookup reads it (one
/// atomic load per block read afterwards). A block that fails its checksum marks the index
/// damaged (``isDamaged``, which the store reads as a reason to rebuild it): a lookup that
/// reads that block answers ``Found/damaged`` or throws ``HotUpdateError/Code/storeCorrupt``
/// (it fails again each time), and callers answer from the package trees instead.
/// Where the system lacks `Synchronization`'s atomics, the whole body is checked when the
/// index is opened.
package final class NameIndex: @unchecked Sendable {
    // Immutable after init; the mapping is read-only and private to this object. The checked
    // blocks are recorded atomically (`CheckedBlocks`).
    private let base: UnsafeRawPointer
    private let length: Int
    /// The index file, for messages.
    private let path: String
    /// The store generation the index belongs to.
    package let generation: Int
    /// The number of packages, files and names.
    package let packageCount: Int
    package let fileCount: Int
    package let entryCount: Int
    /// The scales and extension order the names were worked out with.
    package let scales: [Int]
    package let extensionOrder: [String]
    private let slotMask: Int
    private let packagesOffset: Int
    private let filesOffset: Int
    /// Where the body ends in the mapping (the block table follows).
    private let bodyEnd: Int
    /// Each block's checksum, read and checked when the index was opened.
    private let blockSums: [UInt64]
    /// Which blocks have been checked; nil when every block was checked at open.
    private let checked: CheckedBlocks?
    /// The first hash slot of the names and of the paths, and the string pool, in the mapping.
    private let slots: UnsafeRawPointer
    private let pathSlots: UnsafeRawPointer
    private let pathSlotMask: Int
    /// Package id → its number (a few per store: made when the index is opened).
    private let packageNumbers: [String: Int]
    private let pool: UnsafeRawPointer
    /// The pool's length in bytes.
    private let poolLength: Int

    /// A file the index names.
    package struct File: Sendable, Hashable {
        /// Its position among the index's packages (0 wins first).
        package var package: Int
        /// Its path inside the package's tree.
        package var path: String
        /// Its size in bytes.
        package var size: Int64
    }

    /// `index/` under the store root: the index of each recent generation, kept by
    /// ``NameIndexWriter``.
    package static func directory(in layout: StoreLayout) -> URL {
        layout.root.appendingPathComponent("index", isDirectory: true)
    }

    /// The index file of `generation` under `layout`: `index/names-<generation>`.
    package static func url(in layout: StoreLayout, generation: Int) -> URL {
        directory(in: layout).appendingPathComponent("names-\(generation)", isDirectory: false)
    }

    /// Opens the index of `generation`.
    ///
    /// - Throws: ``HotUpdateError/Code/notFound`` when there is none;
    ///   ``HotUpdateError/Code/storeCorrupt`` naming what is wrong (another generation, a bad
    ///   checksum, a truncated file).
    package init(layout: StoreLayout, generation: Int) throws {
        let url = Self.url(in: layout, generation: generation)
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT {
                throw HotUpdateError(.notFound, "no name index for generation \(generation)", subject: url.path)
            }
            throw HotUpdateError.system("cannot open the name index", errno: code, subject: url.path)
        }
        defer { close(fd) }
        #if os(Linux)
        // No read-ahead: the pages a lookup reads enter the page cache one by one rather than
        // in large folios, which a fault on the mapping would map whole.
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM)
        #endif
        var header = [UInt8](repeating: 0, count: NameIndexFormat.headerSize)
        guard pread(fd, &header, header.count, 0) == header.count else {
            throw HotUpdateError(.storeCorrupt, "the name index is shorter than its header", subject: url.path)
        }
        func u32(_ offset: Int) -> Int {
            header.withUnsafeBytes {
                Int(UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            }
        }
        func u64(_ offset: Int) -> UInt64 {
            header.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
        }
        guard Array(header[0..<8]) == NameIndexFormat.magic,
            header.withUnsafeBytes({ NameIndexFormat.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<56])) })
                == u64(56)
        else {
            throw HotUpdateError(.storeCorrupt, "the name index's header is damaged", subject: url.path)
        }
        guard u32(8) == Int(NameIndexFormat.format), u32(12) == NameIndexFormat.headerSize else {
            throw HotUpdateError(.storeCorrupt, "the name index has another format (\(u32(8)))", subject: url.path)
        }
        guard u64(16) == UInt64(generation) else {
            throw HotUpdateError(
                .storeCorrupt,
                "the name index belongs to generation \(u64(16)), not \(generation)",
                subject: url.path
            )
        }
        let bodyLength = Int(truncatingIfNeeded: u64(24))
        let blockCount = NameIndexFormat.blockCount(bodyLength: bodyLength)
        let total = NameIndexFormat.headerSize + bodyLength + blockCount * 8
        var info = stat()
        guard bodyLength > 0, bodyLength < Int(UInt32.max), fstat(fd, &info) == 0, Int(info.st_size) == total else {
            throw HotUpdateError(.storeCorrupt, "the name index is truncated", subject: url.path)
        }
        // The block table, read once and kept: the checksums a block is checked against are
        // the ones checked here, whatever happens to the file afterwards.
        var table = [UInt64](repeating: 0, count: blockCount)
        let tableBytes = blockCount * 8
        let read = table.withUnsafeMutableBytes { raw -> Int in
            var got = 0
            while got < tableBytes {
                let count = pread(
                    fd,
                    raw.baseAddress! + got,
                    tableBytes - got,
                    off_t(NameIndexFormat.headerSize + bodyLength + got)
                )
                guard count > 0 else { break }
                got += count
            }
            return got
        }
        guard read == tableBytes,
            table.withUnsafeBytes({ NameIndexFormat.checksum($0) }) == u64(32)
        else {
            throw HotUpdateError(.storeCorrupt, "the name index's block table is damaged", subject: url.path)
        }
        let blockSums = table.map { UInt64(littleEndian: $0) }
        self.blockSums = blockSums

        guard let mapped = mmap(nil, total, PROT_READ, MAP_PRIVATE, fd, 0), mapped != MAP_FAILED else {
            throw HotUpdateError.system("cannot map the name index", errno: errno, subject: url.path)
        }
        // Lookups touch a few bytes here and there: no read-ahead around a fault, and no
        // huge mappings (a file in large folios could otherwise be mapped megabytes at a time
        // for one slot, raising the resident size with the store's size).
        _ = madvise(mapped, total, Int32(MADV_RANDOM))
        _ = madvise(mapped, total, Int32(MADV_NOHUGEPAGE))
        let base = UnsafeRawPointer(mapped)
        let bodyEnd = NameIndexFormat.headerSize + bodyLength
        let checked = CheckedBlocks.make(count: blockCount)
        // Until the index is whole, a throw gives the mapping and the words back.
        var opened = false
        defer {
            if !opened {
                munmap(mapped, total)
                checked?.free()
            }
        }
        let sums = blockSums
        // The bytes opening reads are checked before they are read; every block at once when
        // blocks cannot be recorded as checked one by one.
        func check(_ start: Int, _ end: Int) throws {
            let upTo = checked == nil ? bodyEnd : min(max(end, start + 1), bodyEnd)
            let from = checked == nil ? NameIndexFormat.headerSize : start
            if let block = Self.damagedBlock(from, upTo, base: base, bodyEnd: bodyEnd, sums: sums, checked: checked) {
                throw HotUpdateError(
                    .storeCorrupt,
                    "the name index fails its checksum (block \(block))",
                    subject: url.path
                )
            }
        }
        func load32(_ offset: Int) -> Int {
            Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
        }
        let packageCount = u32(40)
        let fileCount = u32(44)
        let entryCount = u32(48)
        let slotBits = u32(52)
        try check(NameIndexFormat.headerSize, NameIndexFormat.headerSize + 4)
        let settingsLength = load32(NameIndexFormat.headerSize)
        func aligned(_ value: Int) -> Int { (value + 7) & ~7 }
        let packagesOffset = aligned(68 + settingsLength)
        let filesOffset = aligned(packagesOffset + packageCount * NameIndexFormat.packageRecordSize)
        let filesEnd = filesOffset + fileCount * NameIndexFormat.fileRecordSize
        guard slotBits < 32, settingsLength < bodyLength, filesEnd + 8 <= bodyEnd else {
            throw HotUpdateError(.storeCorrupt, "the name index's sections do not fit the file", subject: url.path)
        }
        try check(NameIndexFormat.headerSize, filesOffset)
        try check(filesEnd, filesEnd + 8)
        let settings = String(
            decoding: UnsafeRawBufferPointer(start: base + 68, count: settingsLength),
            as: UTF8.self
        )
        let halves = settings.split(separator: ";", omittingEmptySubsequences: false)
        scales = halves.first.map { $0.split(separator: ",").compactMap { Int($0) } } ?? []
        extensionOrder = halves.count > 1 ? halves[1].split(separator: ",").map(String.init) : []
        let slotMask = (1 << slotBits) - 1
        let pathSlotBits = load32(filesEnd)
        let pathCount = load32(filesEnd + 4)
        let pathSlotMask = (1 << min(pathSlotBits, 31)) - 1
        let slotsOffset = (filesEnd + 8 + NameIndexFormat.slotAlignment - 1) & ~(NameIndexFormat.slotAlignment - 1)
        let pathSlotsOffset = slotsOffset + (slotMask + 1) * NameIndexFormat.nameSlotSize
        let poolOffset = pathSlotsOffset + (pathSlotMask + 1) * NameIndexFormat.pathSlotSize
        guard pathSlotBits < 32, poolOffset <= bodyEnd, slotMask + 1 > entryCount, pathSlotMask + 1 > pathCount else {
            throw HotUpdateError(.storeCorrupt, "the name index's sections do not fit the file", subject: url.path)
        }
        let poolLength = bodyEnd - poolOffset
        // The packages' strings, together at the pool's start.
        var stringsEnd = 0
        for field in stride(from: 0, to: packageCount * 6, by: 2) {
            let record = packagesOffset + field * 4
            let end = load32(record) + load32(record + 4)
            if end <= poolLength { stringsEnd = max(stringsEnd, end) }
        }
        try check(poolOffset, poolOffset + stringsEnd)
        var numbers: [String: Int] = [:]
        for number in 0..<packageCount {
            let record = packagesOffset + number * NameIndexFormat.packageRecordSize
            let offset = load32(record)
            let length = load32(record + 4)
            guard offset + length <= poolLength else { continue }
            let id = String(
                decoding: UnsafeRawBufferPointer(start: base + poolOffset + offset, count: length),
                as: UTF8.self
            )
            if numbers[id] == nil { numbers[id] = number }
        }
        self.base = base
        self.length = total
        self.path = url.path
        self.generation = generation
        self.bodyEnd = bodyEnd
        self.checked = checked
        self.packageCount = packageCount
        self.fileCount = fileCount
        self.entryCount = entryCount
        self.slotMask = slotMask
        self.packagesOffset = packagesOffset
        self.filesOffset = filesOffset
        self.pathSlotMask = pathSlotMask
        slots = base + slotsOffset
        pathSlots = base + pathSlotsOffset
        pool = base + poolOffset
        self.poolLength = poolLength
        packageNumbers = numbers
        opened = true
    }

    deinit {
        munmap(UnsafeMutableRawPointer(mutating: base), length)
        checked?.free()
    }

    @inline(__always) private func u32(_ offset: Int) -> Int {
        Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
    }

    /// The string of `length` bytes at `offset` in the pool.
    private func string(_ offset: Int, _ length: Int) -> String {
        guard offset >= 0, length >= 0, offset + length <= poolLength else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: pool + offset, count: length), as: UTF8.self)
    }

    /// The id, version and version path (`packages/<id>/<version>`) of package `number`.
    package func package(_ number: Int) -> NameIndexFormat.Package {
        let record = packagesOffset + number * NameIndexFormat.packageRecordSize
        return NameIndexFormat.Package(
            id: string(u32(record), u32(record + 4)),
            version: string(u32(record + 8), u32(record + 12)),
            path: string(u32(record + 16), u32(record + 20))
        )
    }

    /// File `number`.
    ///
    /// - Throws: ``HotUpdateError/Code/storeCorrupt`` when the index is damaged.
    package func file(_ number: Int) throws(HotUpdateError) -> File {
        let record = filesOffset + number * NameIndexFormat.fileRecordSize
        guard isChecked(record, NameIndexFormat.fileRecordSize) else { throw damageError() }
        let pathLength = Int(UInt16(littleEndian: base.loadUnaligned(fromByteOffset: record + 4, as: UInt16.self)))
        guard isChecked((pool - base) + u32(record), pathLength) else { throw damageError() }
        let package = Int(UInt16(littleEndian: base.loadUnaligned(fromByteOffset: record + 6, as: UInt16.self)))
        let size = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: record + 8, as: UInt64.self))
        return File(package: package, path: string(u32(record), pathLength), size: Int64(truncatingIfNeeded: size))
    }

    /// What the lookups inside return besides a file number (no error is made on their path).
    private static let absent = -1
    private static let damaged = -2

    /// What a name finds in the index, without an error on the way: for the resolvers'
    /// hot path.
    package enum Found: Sendable, Equatable {
        /// The file that wins the name.
        case file(Int)
        /// No file answers to the name.
        case none
        /// A block the lookup read fails its checksum (``isDamaged`` is now true).
        case damaged
    }

    /// The file that wins `name` (in normalised form), none, or damage found on the way.
    @inline(__always)
    package func find(_ name: String) -> Found {
        // Native strings lend their UTF-8 in place (small ones from the stack); others are
        // copied once.
        let found =
            name.utf8.withContiguousStorageIfAvailable { find(UnsafeRawBufferPointer($0)) }
            ?? {
                var copy = name
                return copy.withUTF8 { find(UnsafeRawBufferPointer($0)) }
            }()
        return found >= 0 ? .file(found) : found == Self.damaged ? .damaged : .none
    }

    /// A file number, or nil, or the error of a damaged index.
    @inline(__always)
    private func answer(_ found: Int) throws(HotUpdateError) -> Int? {
        if found >= 0 { return found }
        if found == Self.damaged { throw damageError() }
        return nil
    }

    /// The file that wins the name of these UTF-8 bytes: the hash, then the name slots from
    /// the one it picks until an empty one, each compared by its hash tag and key length in
    /// one 8-byte load, and by the key's bytes when those match (the file's number lies just
    /// before them). A file number, ``absent`` or ``damaged``.
    @inline(__always)
    private func find(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard let address = bytes.baseAddress, !bytes.isEmpty, bytes.count <= NameIndexFormat.maxKeyLength else {
            return Self.absent
        }
        let count = bytes.count
        let hash = NameIndexFormat.hash(bytes)
        let wanted = (hash >> 44) << 12 | UInt64(truncatingIfNeeded: count)
        let poolStart = pool - base
        let tableStart = slots - base
        var slot = Int(truncatingIfNeeded: hash) & slotMask
        // Bounded by the slot count: an index always has empty slots, but the bytes are only
        // checksummed, not trusted to be well formed.
        for _ in 0...slotMask {
            // A slot never straddles two blocks (its size divides the slots' alignment).
            let position = tableStart + slot &* NameIndexFormat.nameSlotSize
            guard isChecked(slotAt: position, NameIndexFormat.nameSlotSize) else { return Self.damaged }
            let value = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: position, as: UInt64.self))
            if value >> 32 == wanted {
                let offset = Int(truncatingIfNeeded: value & 0xFFFF_FFFF)
                if offset >= 4, offset + count <= poolLength {
                    guard isChecked(poolStart + offset - 4, count + 4) else { return Self.damaged }
                    if Self.equal(pool + offset, address, count) {
                        return Int(
                            UInt32(littleEndian: pool.loadUnaligned(fromByteOffset: offset - 4, as: UInt32.self))
                        )
                    }
                }
            } else if value == 0 {
                return Self.absent
            }
            slot = (slot &+ 1) & slotMask
        }
        return Self.absent
    }

    /// Walks the path table, open-addressed with 16-byte slots (hash tag and path length, pool
    /// offset, file), from the slot `hash` picks until an empty one; `match` is asked about each slot
    /// whose tag and length are the wanted ones, and its first answer is returned.
    /// Bounded by the slot count: an index always has empty slots, but the bytes are only
    /// checksummed, not trusted to be well formed.
    @inline(__always)
    private func probe(
        _ table: UnsafeRawPointer,
        mask: Int,
        hash: UInt64,
        count: Int,
        match: (_ offset: Int, _ file: Int) -> Int
    ) -> Int {
        let wanted = (hash >> 32) | (UInt64(truncatingIfNeeded: count) << 32)
        var slot = Int(truncatingIfNeeded: hash) & mask
        let tableStart = table - base
        for _ in 0...mask {
            // A slot never straddles two blocks (its size divides the slots' alignment).
            let position = tableStart + slot &* NameIndexFormat.pathSlotSize
            guard isChecked(slotAt: position, NameIndexFormat.pathSlotSize) else { return Self.damaged }
            let record = table + slot &* NameIndexFormat.pathSlotSize
            let head = UInt64(littleEndian: record.loadUnaligned(as: UInt64.self))
            if head == wanted {
                let offset = Int(UInt32(littleEndian: record.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
                let file = Int(UInt32(littleEndian: record.loadUnaligned(fromByteOffset: 12, as: UInt32.self)))
                let found = match(offset, file)
                if found != Self.absent { return found }
            } else if head >> 32 == 0 {
                return Self.absent
            }
            slot = (slot &+ 1) & mask
        }
        return Self.absent
    }

    /// Whether `count` bytes at `a` and `b` are equal: 8 bytes at a time (the last word read
    /// as the last 8 bytes), no call for the short keys names are.
    @inline(__always)
    private static func equal(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ count: Int) -> Bool {
        guard count >= 8 else {
            var index = 0
            while index < count {
                if a.load(fromByteOffset: index, as: UInt8.self) != b.load(fromByteOffset: index, as: UInt8.self) {
                    return false
                }
                index += 1
            }
            return true
        }
        var offset = 0
        while offset + 8 < count {
            if a.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                != b.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            {
                return false
            }
            offset += 8
        }
        return a.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
            == b.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
    }

    /// The number of the package `id`, or nil when the index does not hold it.
    package func packageNumber(id: String) -> Int? {
        packageNumbers[id]
    }

    /// The file of package `package` at `path` (relative to the package's tree, in
    /// normalised form), or nil when the package has no such file: what the resolvers that
    /// address one package ask, answered from the path slots without touching the tree.
    ///
    /// - Throws: ``HotUpdateError/Code/storeCorrupt`` when the index is damaged.
    package func file(package: Int, path: String) throws(HotUpdateError) -> Int? {
        var path = path
        let poolStart = pool - base
        let found = path.withUTF8 { bytes -> Int in
            let raw = UnsafeRawBufferPointer(bytes)
            guard let address = raw.baseAddress, !raw.isEmpty else { return Self.absent }
            let count = raw.count
            let hash = NameIndexFormat.pathHash(raw, package: package)
            return probe(pathSlots, mask: pathSlotMask, hash: hash, count: count) { offset, file in
                guard offset + count <= poolLength, file < fileCount else { return Self.absent }
                guard isChecked(poolStart + offset, count) else { return Self.damaged }
                guard Self.equal(pool + offset, address, count) else { return Self.absent }
                let record = filesOffset + file * NameIndexFormat.fileRecordSize
                guard isChecked(record, NameIndexFormat.fileRecordSize) else { return Self.damaged }
                let owner = Int(UInt16(littleEndian: base.loadUnaligned(fromByteOffset: record + 6, as: UInt16.self)))
                return owner == package ? file : Self.absent
            }
        }
        return try answer(found)
    }

    /// Every file the index names, for checks: package number and path.
    ///
    /// - Throws: ``HotUpdateError/Code/storeCorrupt`` when the index is damaged.
    package func allFiles() throws(HotUpdateError) -> [File] {
        try verifyAll()
        var files: [File] = []
        files.reserveCapacity(fileCount)
        for number in 0..<fileCount { files.append(try file(number)) }
        return files
    }

    /// Whether a block of the index has failed its checksum: the store then reads the index
    /// as damaged, and rebuilds it.
    package var isDamaged: Bool { checked?.damagedBlock != nil }

    /// Checks every block not checked yet (what a lookup would check as it reads them).
    ///
    /// - Throws: ``HotUpdateError/Code/storeCorrupt`` naming the first block that fails.
    package func verifyAll() throws(HotUpdateError) {
        guard isChecked(NameIndexFormat.headerSize, bodyEnd - NameIndexFormat.headerSize) else { throw damageError() }
    }

    /// Whether the blocks holding `count` bytes at `offset` of the mapping pass their
    /// checksums: one atomic load when the bytes lie in one block checked before, else each
    /// block not checked yet is checked now.
    @inline(__always)
    private func isChecked(_ offset: Int, _ count: Int) -> Bool {
        guard let checked else { return true }
        let first = (offset &- NameIndexFormat.headerSize) >> NameIndexFormat.blockShift
        let last = (offset &+ count &- 1 &- NameIndexFormat.headerSize) >> NameIndexFormat.blockShift
        if first == last, checked.isChecked(first) { return true }
        return checkBlocks(offset, count)
    }

    /// ``isChecked(_:_:)`` for a slot of `size` bytes, which lies in one block.
    @inline(__always)
    private func isChecked(slotAt offset: Int, _ size: Int) -> Bool {
        guard let checked else { return true }
        if checked.isChecked((offset &- NameIndexFormat.headerSize) >> NameIndexFormat.blockShift) { return true }
        return checkBlocks(offset, size)
    }

    @inline(never)
    private func checkBlocks(_ offset: Int, _ count: Int) -> Bool {
        Self.damagedBlock(
            offset,
            offset + max(count, 1),
            base: base,
            bodyEnd: bodyEnd,
            sums: blockSums,
            checked: checked
        )
            == nil
    }

    /// The error a damaged index gives, naming the block found failing.
    package func damageError() -> HotUpdateError {
        HotUpdateError(
            .storeCorrupt,
            checked?.damagedBlock.map { "the name index fails its checksum (block \($0))" }
                ?? "the name index is damaged",
            subject: path
        )
    }

    /// Checks the blocks holding bytes `start..<end` of the mapping (clamped to the body)
    /// that are not checked yet, marking each that passes; the first that fails marks the
    /// index damaged and is returned.
    private static func damagedBlock(
        _ start: Int,
        _ end: Int,
        base: UnsafeRawPointer,
        bodyEnd: Int,
        sums: [UInt64],
        checked: CheckedBlocks?
    ) -> Int? {
        let header = NameIndexFormat.headerSize
        guard start < bodyEnd, end > start else { return nil }
        let first = max(start - header, 0) >> NameIndexFormat.blockShift
        let last = min((min(end, bodyEnd) - 1 - header) >> NameIndexFormat.blockShift, sums.count - 1)
        guard first <= last else { return nil }
        for block in first...last {
            if let checked, checked.isChecked(block) { continue }
            let from = header + (block << NameIndexFormat.blockShift)
            let bytes = UnsafeRawBufferPointer(
                start: base + from,
                count: min(NameIndexFormat.blockSize, bodyEnd - from)
            )
            guard NameIndexFormat.blockChecksum(bytes, number: block) == sums[block] else {
                checked?.markDamaged(block)
                return block
            }
            checked?.markChecked(block)
        }
        return nil
    }
}

/// Which blocks of a ``NameIndex`` have passed their checksum, and the first that failed:
/// atomic words in memory the index owns and frees, shared by every thread that reads the
/// index, read on the lookup path without counting a reference. A block is marked checked
/// (release ordering) only after its checksum matched, and read with acquire ordering.
struct CheckedBlocks: @unchecked Sendable {
    // `Atomic<UInt64>` words, touched only atomically: one bit per block, then one word
    // holding the failed block's number plus one (0 while none has failed).
    private let words: UnsafeMutableRawPointer
    private let wordCount: Int

    private init(words: UnsafeMutableRawPointer, wordCount: Int) {
        self.words = words
        self.wordCount = wordCount
    }

    /// The record for `count` blocks, or nil where the system lacks `Synchronization`'s
    /// atomics (the index then checks every block when it is opened).
    static func make(count: Int) -> CheckedBlocks? {
        #if canImport(Synchronization)
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            let wordCount = max((count + 63) / 64, 1)
            let words = UnsafeMutablePointer<Atomic<UInt64>>.allocate(capacity: wordCount + 1)
            for position in 0...wordCount { (words + position).initialize(to: Atomic<UInt64>(0)) }
            return CheckedBlocks(words: UnsafeMutableRawPointer(words), wordCount: wordCount)
        }
        #endif
        return nil
    }

    /// Releases the words (when the index goes).
    func free() {
        #if canImport(Synchronization)
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            let typed = words.assumingMemoryBound(to: Atomic<UInt64>.self)
            typed.deinitialize(count: wordCount + 1)
            typed.deallocate()
        }
        #endif
    }

    @inline(__always)
    func isChecked(_ block: Int) -> Bool {
        #if canImport(Synchronization)
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            let typed = words.assumingMemoryBound(to: Atomic<UInt64>.self)
            return typed[block >> 6].load(ordering: .acquiring) & (1 << UInt64(block & 63)) != 0
        }
        #endif
        return false
    }

    func markChecked(_ block: Int) {
        #if canImport(Synchronization)
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            let typed = words.assumingMemoryBound(to: Atomic<UInt64>.self)
            typed[block >> 6].bitwiseOr(1 << UInt64(block & 63), ordering: .releasing)
        }
        #endif
    }

    /// The first block found failing, if any.
    var damagedBlock: Int? {
        #if canImport(Synchronization)
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            let value = words.assumingMemoryBound(to: Atomic<UInt64>.self)[wordCount].load(ordering: .relaxed)
            return value == 0 ? nil : Int(value - 1)
        }
        #endif
        return nil
    }

    func markDamaged(_ block: Int) {
        #if canImport(Synchronization)
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            _ = words.assumingMemoryBound(to: Atomic<UInt64>.self)[wordCount].compareExchange(
                expected: 0,
                desired: UInt64(block + 1),
                ordering: .relaxed
            )
        }
        #endif
    }
}
