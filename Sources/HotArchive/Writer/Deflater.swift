import CHotZlib
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Compresses files into a worker's spill file: one raw deflate stream and two
/// 256 KiB buffers per worker, reused for every file.
///
/// Used by one thread at a time: its worker while compressing, then the thread
/// that assembles the archive once the workers have finished (hence `@unchecked`).
final class Deflater: @unchecked Sendable {
    static let bufferSize = 256 * 1024

    /// Where an entry's compressed bytes were put.
    struct Result: Sendable {
        var method: UInt16
        var crc32: UInt32
        var uncompressedSize: UInt64
        var compressedSize: UInt64
        var spillOffset: UInt64
        /// The worker whose spill file holds the bytes.
        var worker: Int = 0
        /// The SHA-256 of the uncompressed bytes, when a SHA-256 hasher was given.
        var sha256: [UInt8]? = nil
        /// Encrypted entries: what precedes the spilled bytes in the archive (WinZip AES's salt
        /// and password verifier, or ZipCrypto's 12-byte header).
        var encryptionHeader: [UInt8] = []
        /// Encrypted entries: what follows them (WinZip AES's authentication code).
        var encryptionTrailer: [UInt8] = []
        /// WinZip AES entries: the extra field the headers carry (`method` is the data's).
        var aes: WinZipAES.ExtraField? = nil
        /// Whether the entry is encrypted.
        var isEncrypted = false

        /// The entry's data size in the archive: the spilled bytes and what encryption adds.
        var storedSize: UInt64 {
            compressedSize + UInt64(encryptionHeader.count + encryptionTrailer.count)
        }
    }

    private let level: Int32
    private let spill: Int32
    private let spillPath: String
    private var spillSize: UInt64 = 0
    private let input: UnsafeMutableRawBufferPointer
    private let output: UnsafeMutableRawBufferPointer
    private let stream: UnsafeMutablePointer<z_stream>
    private var ready = false

    /// - Parameters:
    ///   - level: zlib level 0…9; 0 stores every file.
    ///   - spill: An open, writable, seekable descriptor this deflater owns from now on.
    init(level: Int32, spill: Int32, spillPath: String) {
        self.level = level
        self.spill = spill
        self.spillPath = spillPath
        input = .allocate(byteCount: Self.bufferSize, alignment: 16)
        output = .allocate(byteCount: Self.bufferSize, alignment: 16)
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
    }

    deinit {
        if ready { deflateEnd(stream) }
        stream.deinitialize(count: 1)
        stream.deallocate()
        input.deallocate()
        output.deallocate()
        close(spill)
    }

    /// The spill file, for reading back.
    var descriptor: Int32 { spill }
    /// The spill file's path, for messages.
    var path: String { spillPath }
    /// A 256 KiB buffer free between files.
    var scratch: UnsafeMutableRawBufferPointer { input }

    /// Compresses (or stores, when deflate does not shrink it) the file at `path`,
    /// whose `lstat` size was `expectedSize`, appending the result to the spill file.
    /// A SHA-256 `hasher` is fed the file's bytes on the first pass over them.
    func add(path: String, expectedSize: Int64, hasher: (any DigestHasher)? = nil) throws -> Result {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw ArchiveError.system("opening", path: path, errno: errno) }
        defer { close(fd) }
        let hasher = hasher?.algorithm == .sha256 ? hasher : nil
        var result = try compress(fd, path: path, expectedSize: expectedSize, hasher: hasher)
        result.sha256 = hasher?.finalize().bytes
        return result
    }

    private func compress(
        _ fd: Int32,
        path: String,
        expectedSize: Int64,
        hasher: (any DigestHasher)?
    ) throws -> Result {
        let start = spillSize
        if level > 0 {
            let (crc, size, compressed) = try deflateFile(fd, path: path, hasher: hasher)
            guard size == UInt64(expectedSize) else { throw changed(path) }
            if compressed < size {
                return Result(
                    method: ZipFormat.methodDeflate,
                    crc32: crc,
                    uncompressedSize: size,
                    compressedSize: compressed,
                    spillOffset: start
                )
            }
            // Deflate did not help (images, media): store the bytes instead.
            guard ftruncate(spill, off_t(start)) == 0, lseek(spill, off_t(start), SEEK_SET) == off_t(start) else {
                throw ArchiveError.system("truncating", path: spillPath, errno: errno)
            }
            spillSize = start
            let (storedCRC, storedSize) = try storeFile(fd, path: path, rewind: true, hasher: nil)
            guard storedCRC == crc, storedSize == size else { throw changed(path) }
            return Result(
                method: ZipFormat.methodStored,
                crc32: crc,
                uncompressedSize: size,
                compressedSize: size,
                spillOffset: start
            )
        }
        let (crc, size) = try storeFile(fd, path: path, rewind: false, hasher: hasher)
        guard size == UInt64(expectedSize) else { throw changed(path) }
        return Result(
            method: ZipFormat.methodStored,
            crc32: crc,
            uncompressedSize: size,
            compressedSize: size,
            spillOffset: start
        )
    }

    /// Appends `bytes` as a stored entry (symlink targets).
    func addStored(_ bytes: [UInt8]) throws -> Result {
        let start = spillSize
        try bytes.withUnsafeBytes { try appendSpill($0) }
        let crc = bytes.withUnsafeBufferPointer {
            UInt32(truncatingIfNeeded: crc32(0, $0.baseAddress, uInt($0.count)))
        }
        return Result(
            method: ZipFormat.methodStored,
            crc32: crc,
            uncompressedSize: UInt64(bytes.count),
            compressedSize: UInt64(bytes.count),
            spillOffset: start
        )
    }

    private func changed(_ path: String) -> HotUpdateError {
        HotUpdateError(.fileSystem, "'\(path)' changed while it was being packed", subject: path)
    }

    private func readChunk(_ fd: Int32, path: String) throws -> Int {
        while true {
            let n = read(fd, input.baseAddress, input.count)
            if n < 0 {
                if errno == EINTR { continue }
                throw ArchiveError.system("reading", path: path, errno: errno)
            }
            return n
        }
    }

    private func appendSpill(_ bytes: UnsafeRawBufferPointer) throws {
        try writeAll(spill, bytes, path: spillPath)
        spillSize += UInt64(bytes.count)
    }

    private func crcUpdate(_ crc: UInt32, _ count: Int) -> UInt32 {
        UInt32(
            truncatingIfNeeded: crc32(uLong(crc), input.baseAddress?.assumingMemoryBound(to: Bytef.self), uInt(count))
        )
    }

    private func deflateFile(_ fd: Int32, path: String, hasher: (any DigestHasher)?) throws -> (UInt32, UInt64, UInt64)
    {
        if ready {
            deflateReset(stream)
        } else {
            guard hot_deflateInit2(stream, level, -15, 8) == Z_OK else {
                throw HotUpdateError(.internalInconsistency, "zlib could not start a deflate stream")
            }
            ready = true
        }
        var crc = UInt32(truncatingIfNeeded: crc32(0, nil, 0))
        var size: UInt64 = 0
        var compressed: UInt64 = 0
        var finished = false
        while !finished {
            let count = try readChunk(fd, path: path)
            crc = crcUpdate(crc, count)
            hasher?.update(UnsafeRawBufferPointer(rebasing: input[0..<count]))
            size += UInt64(count)
            stream.pointee.next_in = input.baseAddress?.assumingMemoryBound(to: Bytef.self)
            stream.pointee.avail_in = uInt(count)
            let flush = count == 0 ? Z_FINISH : Z_NO_FLUSH
            repeat {
                stream.pointee.next_out = output.baseAddress?.assumingMemoryBound(to: Bytef.self)
                stream.pointee.avail_out = uInt(output.count)
                let status = deflate(stream, flush)
                guard status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR else {
                    throw HotUpdateError(.internalInconsistency, "zlib failed deflating '\(path)' (\(status))")
                }
                let produced = output.count - Int(stream.pointee.avail_out)
                if produced > 0 {
                    try appendSpill(UnsafeRawBufferPointer(rebasing: output[0..<produced]))
                    compressed += UInt64(produced)
                }
                if status == Z_STREAM_END { finished = true }
            } while flush == Z_FINISH ? !finished : stream.pointee.avail_out == 0
        }
        return (crc, size, compressed)
    }

    private func storeFile(
        _ fd: Int32,
        path: String,
        rewind: Bool,
        hasher: (any DigestHasher)?
    ) throws -> (UInt32, UInt64) {
        if rewind, lseek(fd, 0, SEEK_SET) != 0 { throw ArchiveError.system("rewinding", path: path, errno: errno) }
        var crc = UInt32(truncatingIfNeeded: crc32(0, nil, 0))
        var size: UInt64 = 0
        while true {
            let count = try readChunk(fd, path: path)
            if count == 0 { break }
            crc = crcUpdate(crc, count)
            hasher?.update(UnsafeRawBufferPointer(rebasing: input[0..<count]))
            size += UInt64(count)
            try appendSpill(UnsafeRawBufferPointer(rebasing: input[0..<count]))
        }
        return (crc, size)
    }
}
