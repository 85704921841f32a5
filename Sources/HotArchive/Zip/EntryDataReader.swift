import CHotZlib
import HotCore

#if Deflate && canImport(CHotDeflate)
import CHotDeflate
#endif

/// Decodes entries' data: reads the compressed bytes with `pread`, decrypts
/// ZipCrypto, inflates raw deflate, and hands out the uncompressed bytes chunk
/// by chunk, checking the declared size and the CRC-32 (the data descriptor is
/// checked with the structure, by ``LocalHeaders``).
///
/// One reader per thread: it owns two 256 KiB buffers and a zlib stream that
/// are reused from entry to entry, so memory stays bounded whatever the sizes.
///
/// Where libdeflate is linked (the `Deflate` trait, off Apple platforms), a deflate entry that
/// declares at most ``wholeEntryLimit`` bytes is decoded in one call into a buffer of exactly its
/// declared size, and CRC-32 is libdeflate's (carry-less multiply where the processor has it): about
/// twice zlib's speed on small files. Its checks are the streaming path's: more or fewer bytes
/// than declared, damaged data and a wrong CRC-32 are refused before a byte is handed out.
/// Those two buffers grow to the largest such entry read, so a reader holds at most twice the
/// limit more.
package final class EntryDataReader {
    static let bufferSize = 256 * 1024
    /// The largest declared size decoded in one call; larger entries stream through zlib.
    static let defaultWholeEntryLimit: UInt64 = 1 << 20

    private let wholeEntryLimit: UInt64

    private let file: ReadOnlyFile
    private let password: [UInt8]?
    private let input: UnsafeMutableRawBufferPointer
    private let output: UnsafeMutableRawBufferPointer
    private let stream: UnsafeMutablePointer<z_stream>
    private var inflateReady = false

    #if Deflate && canImport(CHotDeflate)
    /// libdeflate's decoder and the whole-entry buffers, made on first use.
    private var decompressor: OpaquePointer?
    private var wholeInput = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    private var wholeOutput = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    #endif

    /// - Parameters:
    ///   - file: The archive.
    ///   - password: The ZipCrypto password, if any.
    ///   - wholeEntryLimit: The largest declared size decoded in one call where libdeflate is
    ///     linked (0: every entry streams through zlib).
    init(file: ReadOnlyFile, password: String?, wholeEntryLimit: UInt64 = EntryDataReader.defaultWholeEntryLimit) {
        self.file = file
        self.password = password.map { Array($0.utf8) }
        self.wholeEntryLimit = wholeEntryLimit
        input = .allocate(byteCount: Self.bufferSize, alignment: 16)
        output = .allocate(byteCount: Self.bufferSize, alignment: 16)
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
    }

    deinit {
        if inflateReady { inflateEnd(stream) }
        stream.deinitialize(count: 1)
        stream.deallocate()
        input.deallocate()
        output.deallocate()
        #if Deflate && canImport(CHotDeflate)
        if let decompressor { libdeflate_free_decompressor(decompressor) }
        wholeInput.deallocate()
        wholeOutput.deallocate()
        #endif
    }

    /// Whether the reader is linked with libdeflate (the whole-entry path exists).
    static var decodesWholeEntries: Bool {
        #if Deflate && canImport(CHotDeflate)
        true
        #else
        false
        #endif
    }

    /// Streams the uncompressed bytes of `entry` to `consume`.
    ///
    /// - Parameters:
    ///   - name: The entry's name, for messages.
    ///   - isCancelled: Polled between chunks.
    ///   - consume: Receives each chunk; the buffer is valid only during the call.
    /// - Throws: ``HotUpdateError`` — `.corruptArchive` (bad deflate data, more or
    ///   fewer bytes than declared), `.checksumMismatch`, `.wrongPassword`,
    ///   `.passwordRequired`, `.unsupportedMethod`, `.unsupportedEncryption`, `.cancelled`.
    func read(
        _ entry: ZipEntryRecord,
        name: String,
        isCancelled: () -> Bool,
        consume: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let archive = file.displayName
        try Self.checkReadable(entry, name: name, archive: archive, hasPassword: password != nil)
        var offset = entry.dataOffset
        var remaining = entry.compressedSize
        var decryptor: TraditionalDecryptor?
        if entry.isEncrypted, let password {
            decryptor = try openEncryption(entry, name: name, password: password)
            offset += UInt64(ZipFormat.traditionalEncryptionHeaderLength)
            remaining -= UInt64(ZipFormat.traditionalEncryptionHeaderLength)
        }
        var crc: UInt32 = 0
        var written: UInt64 = 0
        let declared = entry.uncompressedSize

        /// Reads the next chunk of compressed bytes into `input`.
        func fill() throws -> Int {
            if isCancelled() { throw HotUpdateError(.cancelled, "extraction cancelled", subject: name) }
            let count = Int(min(remaining, UInt64(input.count)))
            let chunk = UnsafeMutableRawBufferPointer(rebasing: input[0..<count])
            let got = try file.read(into: chunk, at: Int64(offset))
            guard got == count else {
                throw ArchiveError.corrupt(archive, "its data is cut short by the end of the file", entry: name)
            }
            decryptor?.decrypt(chunk)
            offset += UInt64(count)
            remaining -= UInt64(count)
            return count
        }

        func emit(_ bytes: UnsafeRawBufferPointer) throws {
            guard UInt64(bytes.count) <= declared - written else {
                throw ArchiveError.corrupt(
                    archive,
                    "its data inflates to more than the \(declared) bytes it declares",
                    entry: name
                )
            }
            crc = Self.crc32(crc, bytes)
            try consume(bytes)
            written += UInt64(bytes.count)
        }

        if entry.method == ZipFormat.methodStored {
            guard remaining == declared else {
                throw ArchiveError.corrupt(
                    archive,
                    "it is stored but declares \(remaining) compressed and \(declared) uncompressed bytes",
                    entry: name
                )
            }
            while remaining > 0 {
                let count = try fill()
                try emit(UnsafeRawBufferPointer(rebasing: input[0..<count]))
            }
        } else if decryptor == nil, declared <= wholeEntryLimit, remaining <= wholeEntryLimit + 65_536,
            let whole = try decodeWhole(entry, name: name, at: offset, compressed: remaining)
        {
            if isCancelled() { throw HotUpdateError(.cancelled, "extraction cancelled", subject: name) }
            try emit(whole)
        } else {
            try inflateData(entry, name: name, remaining: { remaining }, fill: fill, emit: emit)
        }

        guard written == declared else {
            throw ArchiveError.corrupt(
                archive,
                "its data inflates to \(written) bytes, fewer than the \(declared) it declares",
                entry: name
            )
        }
        guard crc == entry.crc32 else {
            if entry.isEncrypted {
                throw ArchiveError.make(
                    .wrongPassword,
                    archive,
                    "the password does not decrypt it (CRC-32 mismatch after decryption)",
                    entry: name
                )
            }
            throw ArchiveError.make(
                .checksumMismatch,
                archive,
                "its CRC-32 is \(hex(crc)) but the archive declares \(hex(entry.crc32))",
                entry: name
            )
        }
    }

    /// CRC-32 of `bytes` continuing `crc`: libdeflate's where it is linked, zlib's otherwise.
    package static func crc32(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        #if Deflate && canImport(CHotDeflate)
        return libdeflateCRC32(crc, bytes)
        #else
        return zlibCRC32(crc, bytes)
        #endif
    }

    /// zlib's CRC-32 of `bytes` continuing `crc`: the reader's on platforms without libdeflate,
    /// built everywhere so that its tests run here.
    package static func zlibCRC32(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return crc }
        return UInt32(
            truncatingIfNeeded: CHotZlib.crc32(uLong(crc), base.assumingMemoryBound(to: Bytef.self), uInt(bytes.count))
        )
    }

    #if Deflate && canImport(CHotDeflate)
    /// libdeflate's CRC-32 of `bytes` continuing `crc`.
    package static func libdeflateCRC32(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return crc }
        return libdeflate_crc32(crc, base, bytes.count)
    }
    #endif

    /// Decodes a whole unencrypted deflate entry of `compressed` bytes at `offset` into a
    /// buffer of exactly its declared size, or returns nil where libdeflate is not linked.
    /// The bytes are valid until the next call; the caller checks their CRC-32.
    ///
    /// - Throws: `.corruptArchive` when the data is cut short by the end of the file, is
    ///   damaged, or decodes to more or fewer bytes than declared.
    private func decodeWhole(
        _ entry: ZipEntryRecord,
        name: String,
        at offset: UInt64,
        compressed: UInt64
    ) throws -> UnsafeRawBufferPointer? {
        #if Deflate && canImport(CHotDeflate)
        let archive = file.displayName
        let declared = Int(entry.uncompressedSize)
        let count = Int(compressed)
        if decompressor == nil {
            decompressor = libdeflate_alloc_decompressor()
            guard decompressor != nil else {
                throw HotUpdateError(.internalInconsistency, "libdeflate could not make a decoder", subject: name)
            }
        }
        Self.grow(&wholeInput, to: count)
        Self.grow(&wholeOutput, to: declared)
        let source = UnsafeMutableRawBufferPointer(rebasing: wholeInput[0..<count])
        guard try file.read(into: source, at: Int64(offset)) == count else {
            throw ArchiveError.corrupt(archive, "its data is cut short by the end of the file", entry: name)
        }
        var produced = 0
        let status = libdeflate_deflate_decompress(
            decompressor,
            wholeInput.baseAddress,
            count,
            wholeOutput.baseAddress,
            declared,
            &produced
        )
        switch status {
        case LIBDEFLATE_SUCCESS:
            guard produced == declared else {
                throw ArchiveError.corrupt(
                    archive,
                    "its data inflates to \(produced) bytes, fewer than the \(declared) it declares",
                    entry: name
                )
            }
            return UnsafeRawBufferPointer(rebasing: wholeOutput[0..<declared])
        case LIBDEFLATE_INSUFFICIENT_SPACE:
            throw ArchiveError.corrupt(
                archive,
                "its data inflates to more than the \(declared) bytes it declares",
                entry: name
            )
        default:
            throw ArchiveError.corrupt(archive, "its deflate data is damaged or cut short", entry: name)
        }
        #else
        return nil
        #endif
    }

    #if Deflate && canImport(CHotDeflate)
    /// Makes `buffer` hold at least `count` bytes (at least one), keeping the larger of the two.
    private static func grow(_ buffer: inout UnsafeMutableRawBufferPointer, to count: Int) {
        guard buffer.count < max(count, 1) else { return }
        buffer.deallocate()
        buffer = .allocate(byteCount: max(count, 1), alignment: 16)
    }
    #endif

    /// Refuses entries this reader cannot decode, before any byte is written.
    static func checkReadable(_ entry: ZipEntryRecord, name: String, archive: String, hasPassword: Bool) throws {
        if entry.isEncrypted {
            if entry.flags & ZipFormat.flagStrongEncryption != 0 || entry.method == ZipFormat.methodAES {
                throw ArchiveError.make(
                    .unsupportedEncryption,
                    archive,
                    "it uses \(entry.method == ZipFormat.methodAES ? "WinZip AES" : "PKWARE strong") encryption, which is not supported",
                    entry: name
                )
            }
            guard hasPassword else {
                throw ArchiveError.make(
                    .passwordRequired,
                    archive,
                    "it is encrypted and no password was given",
                    entry: name
                )
            }
            guard entry.compressedSize >= UInt64(ZipFormat.traditionalEncryptionHeaderLength) else {
                throw ArchiveError.corrupt(
                    archive,
                    "it is encrypted but too short to hold the encryption header",
                    entry: name
                )
            }
        }
        guard entry.method == ZipFormat.methodStored || entry.method == ZipFormat.methodDeflate else {
            throw ArchiveError.make(
                .unsupportedMethod,
                archive,
                "it uses compression method \(entry.method) (\(ZipFormat.methodName(entry.method))); only stored (0) and deflate (8) are supported",
                entry: name
            )
        }
    }

    private func openEncryption(_ entry: ZipEntryRecord, name: String, password: [UInt8]) throws -> TraditionalDecryptor
    {
        var decryptor = TraditionalDecryptor(password: password)
        var header = try file.readExactly(
            ZipFormat.traditionalEncryptionHeaderLength,
            at: Int64(entry.dataOffset),
            what: "the encryption header of '\(name)'"
        )
        header.withUnsafeMutableBytes { decryptor.decrypt($0) }
        let check =
            entry.hasDataDescriptor
            ? UInt8(truncatingIfNeeded: entry.dosTime >> 8) : UInt8(truncatingIfNeeded: entry.crc32 >> 24)
        guard header[ZipFormat.traditionalEncryptionHeaderLength - 1] == check else {
            throw ArchiveError.make(.wrongPassword, file.displayName, "the password does not decrypt it", entry: name)
        }
        return decryptor
    }

    private func inflateData(
        _ entry: ZipEntryRecord,
        name: String,
        remaining: () -> UInt64,
        fill: () throws -> Int,
        emit: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let archive = file.displayName
        if inflateReady {
            inflateReset(stream)
        } else {
            guard hot_inflateInit2(stream, -15) == Z_OK else {
                throw HotUpdateError(.internalInconsistency, "zlib could not start an inflate stream", subject: name)
            }
            inflateReady = true
        }
        stream.pointee.next_in = nil
        stream.pointee.avail_in = 0
        let outBase = output.baseAddress?.assumingMemoryBound(to: Bytef.self)
        let inBase = input.baseAddress?.assumingMemoryBound(to: Bytef.self)
        while true {
            if stream.pointee.avail_in == 0, remaining() > 0 {
                let count = try fill()
                stream.pointee.next_in = inBase
                stream.pointee.avail_in = uInt(count)
            }
            let availableIn = stream.pointee.avail_in
            stream.pointee.next_out = outBase
            stream.pointee.avail_out = uInt(output.count)
            let status = inflate(stream, Z_NO_FLUSH)
            let produced = output.count - Int(stream.pointee.avail_out)
            if produced > 0 { try emit(UnsafeRawBufferPointer(rebasing: output[0..<produced])) }
            switch status {
            case Z_STREAM_END:
                return
            case Z_OK, Z_BUF_ERROR:
                if produced == 0, stream.pointee.avail_in == availableIn, remaining() == 0 {
                    throw ArchiveError.corrupt(
                        archive,
                        "its compressed data ends before the deflate stream does",
                        entry: name
                    )
                }
            case Z_MEM_ERROR:
                throw HotUpdateError(
                    .internalInconsistency,
                    "zlib ran out of memory inflating '\(name)'",
                    subject: name
                )
            default:
                let reason = stream.pointee.msg.map { String(cString: $0) } ?? "error \(status)"
                if entry.isEncrypted {
                    throw ArchiveError.make(
                        .wrongPassword,
                        archive,
                        "the password does not decrypt it (deflate: \(reason))",
                        entry: name
                    )
                }
                throw ArchiveError.corrupt(archive, "its deflate data is damaged (\(reason))", entry: name)
            }
        }
    }
}

/// Eight hexadecimal digits.
func hex(_ value: UInt32) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: 8 - digits.count) + digits
}
