import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A write-only file with a 256 KiB buffer, counting what it wrote.
final class BufferedOutput {
    private let descriptor: Int32
    private let path: String
    private let buffer: UnsafeMutableRawBufferPointer
    private var used = 0
    /// Bytes written so far, buffered ones included.
    private(set) var written: UInt64 = 0

    init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
        buffer = .allocate(byteCount: 256 * 1024, alignment: 16)
    }

    deinit { buffer.deallocate() }

    func append(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try append($0) }
    }

    func append(_ bytes: UnsafeRawBufferPointer) throws {
        if bytes.count > buffer.count - used {
            try flush()
            if bytes.count >= buffer.count {
                try writeAll(descriptor, bytes, path: path)
                written += UInt64(bytes.count)
                return
            }
        }
        guard let base = bytes.baseAddress, let target = buffer.baseAddress else { return }
        (target + used).copyMemory(from: base, byteCount: bytes.count)
        used += bytes.count
        written += UInt64(bytes.count)
    }

    /// Copies `count` bytes at `offset` of `source` into the output.
    func copy(from source: Int32, offset: UInt64, count: UInt64, sourcePath: String) throws {
        var position = offset
        var left = count
        while left > 0 {
            if used == buffer.count { try flush() }
            guard let base = buffer.baseAddress else { return }
            let want = Int(min(left, UInt64(buffer.count - used)))
            let n = pread(source, base + used, want, off_t(position))
            if n < 0 {
                if errno == EINTR { continue }
                throw ArchiveError.system("reading back", path: sourcePath, errno: errno)
            }
            guard n > 0 else {
                throw HotUpdateError(.internalInconsistency, "the spill file '\(sourcePath)' ended early")
            }
            used += n
            written += UInt64(n)
            position += UInt64(n)
            left -= UInt64(n)
        }
    }

    func flush() throws {
        guard used > 0 else { return }
        try writeAll(descriptor, UnsafeRawBufferPointer(rebasing: buffer[0..<used]), path: path)
        used = 0
    }
}

/// Lays out local headers, data, the central directory and the end records.
struct ArchiveAssembler {
    private let output: BufferedOutput
    private let timestamp: DOSTimestamp
    private var central: [UInt8] = []
    private var count: UInt64 = 0
    private var usesZip64 = false

    private static let versionMadeBy: UInt16 = (UInt16(ZipFormat.hostUnix) << 8) | 45
    private static let saturated32: UInt64 = 0xFFFF_FFFF

    init(output: BufferedOutput, timestamp: DOSTimestamp) {
        self.output = output
        self.timestamp = timestamp
    }

    /// Writes one entry: its local header and data; remembers its central header.
    mutating func add(_ item: SourceItem, data: Deflater.Result?, spills: [Deflater]) throws {
        let name = Array(item.archiveName.utf8)
        guard name.count <= Int(UInt16.max) else {
            throw HotUpdateError(
                .invalidArgument,
                "the path '\(item.path)' is too long for a ZIP entry",
                subject: item.path
            )
        }
        let method: UInt16
        let crc: UInt32
        let usize: UInt64
        let csize: UInt64
        let mode: UInt32
        switch item.kind {
        case .directory:
            (method, crc, usize, csize) = (ZipFormat.methodStored, 0, 0, 0)
            mode = 0o040000 | UInt32(item.permissions)
        case .file, .symlink:
            guard let data else {
                throw HotUpdateError(.internalInconsistency, "'\(item.path)' was not compressed", subject: item.path)
            }
            // WinZip AES: method 99, the data's method in the AES field, and (AE-2) no CRC-32.
            let aes = data.aes != nil
            (method, crc, usize, csize) = (
                aes ? ZipFormat.methodAES : data.method, aes ? 0 : data.crc32, data.uncompressedSize, data.storedSize
            )
            if case .symlink = item.kind { mode = 0o120000 | 0o777 } else { mode = 0o100000 | UInt32(item.permissions) }
        }
        let offset = output.written
        let bigSizes = usize >= Self.saturated32 || csize >= Self.saturated32
        let bigOffset = offset >= Self.saturated32
        let aesField = data?.aes?.bytes ?? []
        let flags = ZipFormat.flagUTF8 | (data?.isEncrypted == true ? ZipFormat.flagEncrypted : 0)
        let needed: UInt16 =
            !aesField.isEmpty
            ? 51
            : bigSizes || bigOffset
                ? 45 : (method == ZipFormat.methodDeflate || item.archiveName.hasSuffix("/") ? 20 : 10)

        var local: [UInt8] = []
        local.reserveCapacity(ZipFormat.localHeaderLength + name.count + 20)
        local.appendLE(ZipFormat.localHeaderSignature)
        local.appendLE(needed)
        local.appendLE(flags)
        local.appendLE(method)
        local.appendLE(timestamp.time)
        local.appendLE(timestamp.date)
        local.appendLE(crc)
        local.appendLE(UInt32(bigSizes ? Self.saturated32 : csize))
        local.appendLE(UInt32(bigSizes ? Self.saturated32 : usize))
        local.appendLE(UInt16(name.count))
        local.appendLE(UInt16((bigSizes ? 20 : 0) + aesField.count))
        local.append(contentsOf: name)
        if bigSizes {
            local.appendLE(ZipFormat.extraZip64)
            local.appendLE(UInt16(16))
            local.appendLE(usize)
            local.appendLE(csize)
        }
        local.append(contentsOf: aesField)
        try output.append(local)
        if let data {
            try output.append(data.encryptionHeader)
            if data.compressedSize > 0 {
                let spill = spills[data.worker]
                try output.copy(
                    from: spill.descriptor,
                    offset: data.spillOffset,
                    count: data.compressedSize,
                    sourcePath: item.path
                )
            }
            try output.append(data.encryptionTrailer)
        }

        var extra: [UInt8] = []
        if bigSizes || bigOffset {
            var fields: [UInt8] = []
            if usize >= Self.saturated32 { fields.appendLE(usize) }
            if csize >= Self.saturated32 { fields.appendLE(csize) }
            if bigOffset { fields.appendLE(offset) }
            extra.appendLE(ZipFormat.extraZip64)
            extra.appendLE(UInt16(fields.count))
            extra.append(contentsOf: fields)
            usesZip64 = true
        }
        if let digest = data?.sha256, digest.count == ZipFormat.sha256Length {
            extra.appendLE(ZipFormat.extraSHA256)
            extra.appendLE(UInt16(digest.count))
            extra.append(contentsOf: digest)
        }
        extra.append(contentsOf: aesField)
        central.appendLE(ZipFormat.centralHeaderSignature)
        central.appendLE(Self.versionMadeBy)
        central.appendLE(needed)
        central.appendLE(flags)
        central.appendLE(method)
        central.appendLE(timestamp.time)
        central.appendLE(timestamp.date)
        central.appendLE(crc)
        central.appendLE(UInt32(min(csize, Self.saturated32)))
        central.appendLE(UInt32(min(usize, Self.saturated32)))
        central.appendLE(UInt16(name.count))
        central.appendLE(UInt16(extra.count))
        central.appendLE(UInt16(0))  // comment
        central.appendLE(UInt16(0))  // disk
        central.appendLE(UInt16(0))  // internal attributes
        central.appendLE(mode << 16 | (item.archiveName.hasSuffix("/") ? 0x10 : 0))
        central.appendLE(UInt32(min(offset, Self.saturated32)))
        central.append(contentsOf: name)
        central.append(contentsOf: extra)
        count += 1
    }

    /// Writes the central directory and the end records; returns whether zip64 was used.
    mutating func finish() throws -> Bool {
        let cdOffset = output.written
        try output.append(central)
        let cdSize = UInt64(central.count)
        let needsZip64 = usesZip64 || count >= 0xFFFF || cdOffset >= Self.saturated32 || cdSize >= Self.saturated32
        if needsZip64 {
            let recordOffset = output.written
            var record: [UInt8] = []
            record.appendLE(ZipFormat.zip64EndSignature)
            record.appendLE(UInt64(ZipFormat.zip64EndLength - 12))
            record.appendLE(Self.versionMadeBy)
            record.appendLE(UInt16(45))
            record.appendLE(UInt32(0))
            record.appendLE(UInt32(0))
            record.appendLE(count)
            record.appendLE(count)
            record.appendLE(cdSize)
            record.appendLE(cdOffset)
            record.appendLE(ZipFormat.zip64LocatorSignature)
            record.appendLE(UInt32(0))
            record.appendLE(recordOffset)
            record.appendLE(UInt32(1))
            try output.append(record)
        }
        var end: [UInt8] = []
        end.appendLE(ZipFormat.endOfCentralDirectorySignature)
        end.appendLE(UInt16(0))
        end.appendLE(UInt16(0))
        end.appendLE(UInt16(min(count, 0xFFFF)))
        end.appendLE(UInt16(min(count, 0xFFFF)))
        end.appendLE(UInt32(min(cdSize, Self.saturated32)))
        end.appendLE(UInt32(min(cdOffset, Self.saturated32)))
        end.appendLE(UInt16(0))
        try output.append(end)
        return needsZip64
    }
}
