import CHotZlib
import HotCore

#if Deflate && canImport(CHotDeflate)
import CHotDeflate
#endif

/// Decodes entries' data: reads the compressed bytes with `pread`, decrypts
/// ZipCrypto and WinZip AES (``WinZipAESCipher``), inflates raw deflate, and hands out the uncompressed bytes chunk
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
    ///   - password: The password of encrypted entries (ZipCrypto or WinZip AES), if any.
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
    /// A WinZip AES entry's password verifier is checked before anything is decrypted, and its
    /// authentication code once every encrypted byte has been read, before the CRC-32 (AE-1) is
    /// compared; when its data turns out damaged on the way (bad deflate data, more bytes than
    /// declared), the rest is authenticated first, so that tampering is reported as such.
    ///
    /// - Parameters:
    ///   - name: The entry's name, for messages.
    ///   - isCancelled: Polled between chunks.
    ///   - consume: Receives each chunk; the buffer is valid only during the call.
    /// - Throws: ``HotUpdateError`` — `.corruptArchive` (bad deflate data, more or
    ///   fewer bytes than declared, a malformed AES field or an entry too short for its
    ///   encryption header), `.checksumMismatch`, `.wrongPassword`, `.authenticationFailed`
    ///   (WinZip AES), `.passwordRequired`, `.unsupportedMethod`, `.unsupportedEncryption`, `.cancelled`.
    func read(
        _ entry: ZipEntryRecord,
        name: String,
        isCancelled: () -> Bool,
        consume: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let archive = file.displayName
        let aes = try Self.checkReadable(entry, name: name, archive: archive, hasPassword: password != nil)
        var offset = entry.dataOffset
        var remaining = entry.compressedSize
        var decryptor: TraditionalCipher?
        var cipher: WinZipAESCipher?
        if let aes, let password {
            cipher = try openAES(entry, name: name, password: password, parameters: aes)
            let header = UInt64(aes.strength.saltLength + WinZipAES.verifierLength)
            offset += header
            remaining -= header + UInt64(WinZipAES.authenticationCodeLength)
        } else if entry.isEncrypted, let password {
            decryptor = try openEncryption(entry, name: name, password: password)
            offset += UInt64(ZipFormat.traditionalEncryptionHeaderLength)
            remaining -= UInt64(ZipFormat.traditionalEncryptionHeaderLength)
        }
        let method = aes?.method ?? entry.method
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
            if let cipher {
                try cipher.decrypt(chunk)
            } else {
                decryptor?.decrypt(chunk)
            }
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

        do {
            if method == ZipFormat.methodStored {
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
                let whole = try decodeWhole(
                    entry,
                    name: name,
                    at: offset,
                    compressed: remaining,
                    decrypt: cipher.map { cipher in
                        { bytes in
                            try cipher.decrypt(bytes)
                            offset += UInt64(bytes.count)
                            remaining = 0
                        }
                    }
                )
            {
                if isCancelled() { throw HotUpdateError(.cancelled, "extraction cancelled", subject: name) }
                try emit(whole)
            } else {
                try inflateData(entry, name: name, remaining: { remaining }, fill: fill, emit: emit)
            }
        } catch let error as HotUpdateError where error.code == .corruptArchive {
            // Damaged data in an authenticated entry: tampering, when the code says so.
            if let cipher { try authenticate(cipher, from: offset, count: remaining, name: name, cause: error) }
            throw error
        }
        if let cipher { try authenticate(cipher, from: offset, count: remaining, name: name, cause: nil) }

        guard written == declared else {
            throw ArchiveError.corrupt(
                archive,
                "its data inflates to \(written) bytes, fewer than the \(declared) it declares",
                entry: name
            )
        }
        // AE-2 records no CRC-32: its authentication code vouches for the bytes.
        guard crc == entry.crc32 || aes?.checksCRC == false else {
            if decryptor != nil {
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

    /// Authenticates the `count` encrypted bytes left at `offset`, then compares the code the
    /// entry ends with to the one computed.
    ///
    /// - Throws: `.authenticationFailed` when they differ (with `cause`, the damage found on
    ///   the way, if any); `.corruptArchive` when the file ends first.
    private func authenticate(
        _ cipher: WinZipAESCipher,
        from offset: UInt64,
        count: UInt64,
        name: String,
        cause: HotUpdateError?
    ) throws {
        let archive = file.displayName
        var position = offset
        var left = count
        while left > 0 {
            let chunk = Int(min(left, UInt64(input.count)))
            let buffer = UnsafeMutableRawBufferPointer(rebasing: input[0..<chunk])
            guard try file.read(into: buffer, at: Int64(position)) == chunk else {
                throw ArchiveError.corrupt(archive, "its data is cut short by the end of the file", entry: name)
            }
            try cipher.authenticate(UnsafeRawBufferPointer(buffer))
            position += UInt64(chunk)
            left -= UInt64(chunk)
        }
        let stored = try file.readExactly(
            WinZipAES.authenticationCodeLength,
            at: Int64(position),
            what: "the authentication code of '\(name)'"
        )
        guard try cipher.authenticationCode() == stored else {
            throw ArchiveError.make(
                .authenticationFailed,
                archive,
                "its WinZip AES authentication code does not match its encrypted bytes: they were altered (or the password is wrong)",
                entry: name,
                cause: cause
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

    /// Decodes a whole deflate entry of `compressed` bytes at `offset` (decrypted first by
    /// `decrypt`, for WinZip AES) into a buffer of exactly its declared size, or returns nil
    /// where libdeflate is not linked.
    /// The bytes are valid until the next call; the caller checks their CRC-32.
    ///
    /// - Throws: `.corruptArchive` when the data is cut short by the end of the file, is
    ///   damaged, or decodes to more or fewer bytes than declared.
    private func decodeWhole(
        _ entry: ZipEntryRecord,
        name: String,
        at offset: UInt64,
        compressed: UInt64,
        decrypt: ((UnsafeMutableRawBufferPointer) throws -> Void)?
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
        try decrypt?(source)
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

    /// Refuses entries this reader cannot decode, before any byte is written, and returns a
    /// WinZip AES entry's parameters.
    ///
    /// In this order: PKWARE strong encryption (`.unsupportedEncryption`); a WinZip AES field
    /// that is missing, malformed or lies (see ``WinZipAES/parameters(of:name:archive:)``); a
    /// build without a crypto library (`.unsupportedEncryption`, naming the traits); no password
    /// (`.passwordRequired`); data too short for its encryption header (`.corruptArchive`); a
    /// compression method other than stored and deflate (`.unsupportedMethod`).
    @discardableResult
    static func checkReadable(
        _ entry: ZipEntryRecord,
        name: String,
        archive: String,
        hasPassword: Bool
    ) throws -> WinZipAES.Parameters? {
        var aes: WinZipAES.Parameters?
        if entry.isEncrypted && entry.flags & ZipFormat.flagStrongEncryption != 0 {
            throw ArchiveError.make(
                .unsupportedEncryption,
                archive,
                "it uses PKWARE strong encryption, which is not supported",
                entry: name
            )
        }
        if entry.method == ZipFormat.methodAES {
            let parameters = try WinZipAES.parameters(of: entry, name: name, archive: archive)
            if let missing = CipherBackend.missing {
                throw ArchiveError.make(
                    .unsupportedEncryption,
                    archive,
                    "it uses WinZip AES-\(parameters.strength.bits) encryption, and \(missing)",
                    entry: name
                )
            }
            aes = parameters
        }
        if entry.isEncrypted {
            guard hasPassword else {
                throw ArchiveError.make(
                    .passwordRequired,
                    archive,
                    "it is encrypted and no password was given",
                    entry: name
                )
            }
            let header = aes?.strength.overhead ?? ZipFormat.traditionalEncryptionHeaderLength
            guard entry.compressedSize >= UInt64(header) else {
                let parts =
                    aes.map { "its \($0.strength.saltLength)-byte salt, password verifier and authentication code" }
                    ?? "the encryption header"
                throw ArchiveError.corrupt(
                    archive,
                    "it is encrypted but its \(entry.compressedSize) bytes are too few to hold \(parts) (\(header) bytes)",
                    entry: name
                )
            }
        }
        let method = aes?.method ?? entry.method
        guard method == ZipFormat.methodStored || method == ZipFormat.methodDeflate else {
            throw ArchiveError.make(
                .unsupportedMethod,
                archive,
                "it uses compression method \(method) (\(ZipFormat.methodName(method))); only stored (0) and deflate (8) are supported",
                entry: name
            )
        }
        return aes
    }

    /// Derives `entry`'s keys from the password and its salt and checks its password verifier.
    ///
    /// - Throws: `.wrongPassword` when the verifier differs (a wrong password, or a verifier
    ///   that was altered: the two cannot be told apart).
    private func openAES(
        _ entry: ZipEntryRecord,
        name: String,
        password: [UInt8],
        parameters: WinZipAES.Parameters
    ) throws -> WinZipAESCipher {
        let saltLength = parameters.strength.saltLength
        let header = try file.readExactly(
            saltLength + WinZipAES.verifierLength,
            at: Int64(entry.dataOffset),
            what: "the AES salt and password verifier of '\(name)'"
        )
        let keys = try WinZipAES.Keys(
            password: password,
            salt: Array(header[0..<saltLength]),
            strength: parameters.strength
        )
        guard keys.verifier == Array(header[saltLength...]) else {
            throw ArchiveError.make(
                .wrongPassword,
                file.displayName,
                "the password does not match its WinZip AES password verifier",
                entry: name
            )
        }
        return try WinZipAESCipher(keys: keys)
    }

    private func openEncryption(_ entry: ZipEntryRecord, name: String, password: [UInt8]) throws -> TraditionalCipher {
        var decryptor = TraditionalCipher(password: password)
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
                // ZipCrypto has no other check of its password; WinZip AES's authentication code decides.
                if entry.isEncrypted && entry.method != ZipFormat.methodAES {
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
