import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The store's name index, mapped read-only and queried in place: a lookup hashes the name,
/// probes the slots and compares bytes; nothing is loaded into Swift collections (see
/// ``NameIndexFormat`` for the layout).
///
/// Opening checks the header, the generation it belongs to and the body's checksum (read in
/// chunks with `pread`, so the check does not keep the file's pages in the process), then
/// maps the file.
package final class NameIndex: @unchecked Sendable {
    // Immutable after init; the mapping is read-only and private to this object.
    private let base: UnsafeRawPointer
    private let length: Int
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

    /// The index file of `generation` under `layout`: `index/names-<generation>`.
    package static func url(in layout: StoreLayout, generation: Int) -> URL {
        layout.indexDirectory.appendingPathComponent("names-\(generation)", isDirectory: false)
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
        // No read-ahead: the pages read for the checksum enter the page cache one by one
        // rather than in large folios, which a fault on the mapping would map whole.
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
        var info = stat()
        guard fstat(fd, &info) == 0, Int(info.st_size) == NameIndexFormat.headerSize + bodyLength, bodyLength > 0 else {
            throw HotUpdateError(.storeCorrupt, "the name index is truncated", subject: url.path)
        }
        // The body's checksum, read in chunks: the pages pass through one buffer.
        var sum = ChunkedChecksum()
        let chunk = 256 * 1024
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 8)
        defer { buffer.deallocate() }
        var offset = 0
        while offset < bodyLength {
            let want = min(chunk, bodyLength - offset)
            var got = 0
            while got < want {
                let read = pread(
                    fd,
                    buffer.baseAddress! + got,
                    want - got,
                    off_t(NameIndexFormat.headerSize + offset + got)
                )
                guard read > 0 else {
                    throw HotUpdateError(.storeCorrupt, "the name index cannot be read to its end", subject: url.path)
                }
                got += read
            }
            sum.add(UnsafeRawBufferPointer(rebasing: buffer[0..<want]))
            offset += want
        }
        guard sum.finish() == u64(32) else {
            throw HotUpdateError(.storeCorrupt, "the name index fails its checksum", subject: url.path)
        }

        let total = NameIndexFormat.headerSize + bodyLength
        guard let mapped = mmap(nil, total, PROT_READ, MAP_PRIVATE, fd, 0), mapped != MAP_FAILED else {
            throw HotUpdateError.system("cannot map the name index", errno: errno, subject: url.path)
        }
        // Lookups touch a few bytes here and there: no read-ahead around a fault, and no
        // huge mappings (a file in large folios could otherwise be mapped megabytes at a time
        // for one slot, raising the resident size with the store's size).
        _ = madvise(mapped, total, Int32(MADV_RANDOM))
        _ = madvise(mapped, total, Int32(MADV_NOHUGEPAGE))
        let base = UnsafeRawPointer(mapped)
        self.base = base
        self.length = total
        self.generation = generation
        packageCount = u32(40)
        fileCount = u32(44)
        entryCount = u32(48)
        let slotBits = u32(52)
        slotMask = (1 << slotBits) - 1

        let settingsLength = Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: 64, as: UInt32.self)))
        let settings = String(
            decoding: UnsafeRawBufferPointer(start: base + 68, count: min(settingsLength, total - 68)),
            as: UTF8.self
        )
        let halves = settings.split(separator: ";", omittingEmptySubsequences: false)
        scales = halves.first.map { $0.split(separator: ",").compactMap { Int($0) } } ?? []
        extensionOrder = halves.count > 1 ? halves[1].split(separator: ",").map(String.init) : []
        func aligned(_ value: Int) -> Int { (value + 7) & ~7 }
        packagesOffset = aligned(68 + settingsLength)
        filesOffset = aligned(packagesOffset + packageCount * NameIndexFormat.packageRecordSize)
        let filesEnd = filesOffset + fileCount * NameIndexFormat.fileRecordSize
        guard slotBits < 32, filesEnd + 8 <= total else {
            munmap(mapped, total)
            throw HotUpdateError(.storeCorrupt, "the name index's sections do not fit the file", subject: url.path)
        }
        let pathSlotBits = Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: filesEnd, as: UInt32.self)))
        let pathCount = Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: filesEnd + 4, as: UInt32.self)))
        pathSlotMask = (1 << min(pathSlotBits, 31)) - 1
        let slotsOffset = (filesEnd + 8 + NameIndexFormat.slotAlignment - 1) & ~(NameIndexFormat.slotAlignment - 1)
        let pathSlotsOffset = slotsOffset + (slotMask + 1) * NameIndexFormat.slotSize
        let poolOffset = pathSlotsOffset + (pathSlotMask + 1) * NameIndexFormat.slotSize
        guard pathSlotBits < 32, poolOffset <= total, slotMask + 1 > entryCount, pathSlotMask + 1 > pathCount else {
            munmap(mapped, total)
            throw HotUpdateError(.storeCorrupt, "the name index's sections do not fit the file", subject: url.path)
        }
        slots = base + slotsOffset
        pathSlots = base + pathSlotsOffset
        pool = base + poolOffset
        poolLength = total - poolOffset
        var numbers: [String: Int] = [:]
        for number in 0..<packageCount {
            let record = packagesOffset + number * NameIndexFormat.packageRecordSize
            let offset = Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: record, as: UInt32.self)))
            let length = Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: record + 4, as: UInt32.self)))
            guard offset + length <= poolLength else { continue }
            let id = String(decoding: UnsafeRawBufferPointer(start: pool + offset, count: length), as: UTF8.self)
            if numbers[id] == nil { numbers[id] = number }
        }
        packageNumbers = numbers
    }

    deinit {
        munmap(UnsafeMutableRawPointer(mutating: base), length)
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
    package func file(_ number: Int) -> File {
        let record = filesOffset + number * NameIndexFormat.fileRecordSize
        let pathLength = Int(UInt16(littleEndian: base.loadUnaligned(fromByteOffset: record + 4, as: UInt16.self)))
        let package = Int(UInt16(littleEndian: base.loadUnaligned(fromByteOffset: record + 6, as: UInt16.self)))
        let size = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: record + 8, as: UInt64.self))
        return File(package: package, path: string(u32(record), pathLength), size: Int64(truncatingIfNeeded: size))
    }

    /// The file that wins `name` (in normalised form), or nil.
    @inline(__always)
    package func lookup(_ name: String) -> Int? {
        // Native strings lend their UTF-8 in place (small ones from the stack); others are
        // copied once.
        if let found = name.utf8.withContiguousStorageIfAvailable({ lookup(bytes: UnsafeRawBufferPointer($0)) }) {
            return found
        }
        var copy = name
        return copy.withUTF8 { lookup(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// The file that wins the name of these UTF-8 bytes, or nil: the hash, then the slots
    /// from the one it picks until an empty one, each compared by its hash tag and key length
    /// in one 8-byte load, and by the key's bytes when those match.
    package func lookup(bytes: UnsafeRawBufferPointer) -> Int? {
        guard let address = bytes.baseAddress, !bytes.isEmpty else { return nil }
        return Self.probe(slots, mask: slotMask, hash: NameIndexFormat.hash(bytes), count: bytes.count) {
            offset,
            file in
            offset + bytes.count <= poolLength && Self.equal(pool + offset, address, bytes.count) ? file : nil
        }
    }

    /// Walks an open-addressed table of 16-byte slots (hash tag and key length, pool offset,
    /// file) from the slot `hash` picks until an empty one; `match` is asked about each slot
    /// whose tag and length are the wanted ones, and its first answer is returned.
    /// Bounded by the slot count: an index always has empty slots, but the bytes are only
    /// checksummed, not trusted to be well formed.
    @inline(__always)
    private static func probe(
        _ table: UnsafeRawPointer,
        mask: Int,
        hash: UInt64,
        count: Int,
        match: (_ offset: Int, _ file: Int) -> Int?
    ) -> Int? {
        let wanted = (hash >> 32) | (UInt64(truncatingIfNeeded: count) << 32)
        var slot = Int(truncatingIfNeeded: hash) & mask
        for _ in 0...mask {
            let record = table + slot &* NameIndexFormat.slotSize
            let head = UInt64(littleEndian: record.loadUnaligned(as: UInt64.self))
            if head == wanted {
                let offset = Int(UInt32(littleEndian: record.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
                let file = Int(UInt32(littleEndian: record.loadUnaligned(fromByteOffset: 12, as: UInt32.self)))
                if let found = match(offset, file) { return found }
            } else if head >> 32 == 0 {
                return nil
            }
            slot = (slot &+ 1) & mask
        }
        return nil
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
    package func file(package: Int, path: String) -> Int? {
        var path = path
        return path.withUTF8 { bytes -> Int? in
            let raw = UnsafeRawBufferPointer(bytes)
            guard let address = raw.baseAddress, !raw.isEmpty else { return nil }
            let count = raw.count
            let hash = NameIndexFormat.pathHash(raw, package: package)
            return Self.probe(pathSlots, mask: pathSlotMask, hash: hash, count: count) { offset, file in
                offset + count <= poolLength && file < fileCount && Self.equal(pool + offset, address, count)
                    && packageOfFile(file) == package ? file : nil
            }
        }
    }

    /// The package number of file `number`.
    private func packageOfFile(_ number: Int) -> Int {
        let record = filesOffset + number * NameIndexFormat.fileRecordSize
        return Int(UInt16(littleEndian: base.loadUnaligned(fromByteOffset: record + 6, as: UInt16.self)))
    }

    /// Every file the index names, for checks: package number and path.
    package func allFiles() -> [File] {
        (0..<fileCount).map(file)
    }
}
