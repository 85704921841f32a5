/// One WinZip AES entry's cipher: AES in counter mode with WinZip's counter (a 16-byte
/// little-endian number starting at 1), and HMAC-SHA1 over the encrypted bytes.
///
/// The keystream is made in batches: up to ``batchBlocks`` counter blocks are laid out in a
/// buffer and encrypted by one call into the crypto library (libcrypto's ECB mode, or
/// swift-crypto's, see ``AESBlockEncryptor``), then XORed into the data eight bytes at a
/// time; the MAC is fed the caller's chunks whole. One cipher per entry, used by one thread.
final class WinZipAESCipher {
    /// Counter blocks encrypted per call into the crypto library: 64 KiB of keystream.
    static let batchBlocks = 4096

    private let aes: AESBlockEncryptor
    private let mac: HMACSHA1
    private let keystream: UnsafeMutableRawBufferPointer
    /// The last counter value used (the first block's is 1).
    private var counter: UInt64 = 0
    private var position = 0
    private var available = 0

    /// Keys the cipher and the MAC with `keys`.
    ///
    /// - Throws: `HotUpdateError.Code.unsupportedEncryption` when the build has no crypto library;
    ///   `.internalInconsistency` when the library fails.
    init(keys: WinZipAES.Keys) throws {
        aes = try AESBlockEncryptor(key: keys.encryption)
        mac = try HMACSHA1(key: keys.authentication)
        keystream = .allocate(byteCount: Self.batchBlocks * 16, alignment: 16)
    }

    deinit { keystream.deallocate() }

    /// Authenticates then decrypts `buffer` in place.
    func decrypt(_ buffer: UnsafeMutableRawBufferPointer) throws {
        try mac.update(UnsafeRawBufferPointer(buffer))
        try apply(buffer)
    }

    /// Encrypts `buffer` in place, then authenticates it.
    func encrypt(_ buffer: UnsafeMutableRawBufferPointer) throws {
        try apply(buffer)
        try mac.update(UnsafeRawBufferPointer(buffer))
    }

    /// Authenticates encrypted bytes without decrypting them (what follows a damaged stream).
    func authenticate(_ buffer: UnsafeRawBufferPointer) throws {
        try mac.update(buffer)
    }

    /// The 10-byte authentication code of every encrypted byte seen so far.
    func authenticationCode() throws -> [UInt8] {
        Array(try mac.finalize().prefix(WinZipAES.authenticationCodeLength))
    }

    /// XORs the keystream into `buffer`.
    private func apply(_ buffer: UnsafeMutableRawBufferPointer) throws {
        guard let base = buffer.baseAddress, let stream = keystream.baseAddress else { return }
        var done = 0
        while done < buffer.count {
            if position == available { try refill(wanted: buffer.count - done) }
            let count = min(available - position, buffer.count - done)
            xorBytes(base + done, stream + position, count)
            position += count
            done += count
        }
    }

    /// Encrypts the next counter blocks: enough for `wanted` bytes, at most a batch.
    private func refill(wanted: Int) throws {
        let blocks = min(Self.batchBlocks, (wanted + 15) / 16)
        for block in 0..<blocks {
            keystream.storeBytes(
                of: (counter &+ UInt64(block) &+ 1).littleEndian,
                toByteOffset: block * 16,
                as: UInt64.self
            )
            keystream.storeBytes(of: 0, toByteOffset: block * 16 + 8, as: UInt64.self)
        }
        counter &+= UInt64(blocks)
        try aes.encrypt(UnsafeMutableRawBufferPointer(rebasing: keystream[0..<(blocks * 16)]))
        position = 0
        available = blocks * 16
    }
}

/// `target[i] ^= source[i]` for `count` bytes, eight at a time.
@inline(__always)
func xorBytes(_ target: UnsafeMutableRawPointer, _ source: UnsafeRawPointer, _ count: Int) {
    var index = 0
    while index + 8 <= count {
        let value =
            target.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            ^ source.loadUnaligned(fromByteOffset: index, as: UInt64.self)
        target.storeBytes(of: value, toByteOffset: index, as: UInt64.self)
        index += 8
    }
    while index < count {
        let value =
            target.load(fromByteOffset: index, as: UInt8.self) ^ source.load(fromByteOffset: index, as: UInt8.self)
        target.storeBytes(of: value, toByteOffset: index, as: UInt8.self)
        index += 1
    }
}
