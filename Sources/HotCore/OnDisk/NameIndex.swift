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
    private let entriesOffset: Int
    private let slotsOffset: Int
    private let poolOffset: Int

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
        entriesOffset = filesOffset + fileCount * NameIndexFormat.fileRecordSize
        slotsOffset = entriesOffset + entryCount * NameIndexFormat.entryRecordSize
        poolOffset = aligned(slotsOffset + (slotMask + 1) * 4)
        guard poolOffset <= total, slotBits < 32 else {
            munmap(mapped, total)
            throw HotUpdateError(.storeCorrupt, "the name index's sections do not fit the file", subject: url.path)
        }
    }

    deinit {
        munmap(UnsafeMutableRawPointer(mutating: base), length)
    }

    @inline(__always) private func u32(_ offset: Int) -> Int {
        Int(UInt32(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
    }

    /// The string of `length` bytes at `offset` in the pool.
    private func string(_ offset: Int, _ length: Int) -> String {
        let start = poolOffset + offset
        guard start >= 0, length >= 0, start + length <= self.length else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: base + start, count: length), as: UTF8.self)
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
    package func lookup(_ name: String) -> Int? {
        var name = name
        return name.withUTF8 { lookup(bytes: $0) }
    }

    /// The file that wins the name of these UTF-8 bytes, or nil.
    package func lookup(bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard let address = bytes.baseAddress, !bytes.isEmpty else { return nil }
        let hash = NameIndexFormat.hash(bytes)
        let tag = UInt32(truncatingIfNeeded: hash >> 32)
        var slot = Int(truncatingIfNeeded: hash) & slotMask
        let count = bytes.count
        while true {
            let entry = u32(slotsOffset + slot * 4)
            if entry == 0 { return nil }
            let record = entriesOffset + (entry - 1) * NameIndexFormat.entryRecordSize
            if UInt32(u32(record)) == tag, u32(record + 8) == count {
                let start = poolOffset + u32(record + 4)
                if start + count <= length, memcmp(base + start, address, count) == 0 {
                    return u32(record + 12)
                }
            }
            slot = (slot + 1) & slotMask
        }
    }

    /// Every file the index names, for checks: package number and path.
    package func allFiles() -> [File] {
        (0..<fileCount).map(file)
    }
}
