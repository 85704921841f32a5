import CHotZlib

/// PKWARE's traditional ("ZipCrypto") stream cipher: read for archives made with `zip -P`,
/// written by ``ZipWriter`` when asked for it (``ZipWriter/Encryption/Method/zipCrypto``).
///
/// It is weak: a known-plaintext attack (Biham and Kocher) recovers the keys from 12 known
/// bytes of an entry. It is here for compatibility; WinZip AES is what protects anything.
struct TraditionalCipher {
    private var key0: UInt32 = 0x1234_5678
    private var key1: UInt32 = 0x2345_6789
    private var key2: UInt32 = 0x3456_7890
    private let table: UnsafePointer<z_crc_t>

    /// Keys the cipher with `password`'s bytes.
    init(password: [UInt8]) {
        table = get_crc_table()
        for byte in password { update(byte) }
    }

    @inline(__always) private func crcStep(_ crc: UInt32, _ byte: UInt8) -> UInt32 {
        UInt32(truncatingIfNeeded: table[Int((crc ^ UInt32(byte)) & 0xFF)]) ^ (crc >> 8)
    }

    @inline(__always) private mutating func update(_ byte: UInt8) {
        key0 = crcStep(key0, byte)
        key1 = (key1 &+ (key0 & 0xFF)) &* 134_775_813 &+ 1
        key2 = crcStep(key2, UInt8(truncatingIfNeeded: key1 >> 24))
    }

    @inline(__always) private var keystreamByte: UInt8 {
        let temp = (key2 | 2) & 0xFFFF
        return UInt8(truncatingIfNeeded: (temp &* (temp ^ 1)) >> 8)
    }

    /// Decrypts `buffer` in place.
    mutating func decrypt(_ buffer: UnsafeMutableRawBufferPointer) {
        for index in 0..<buffer.count {
            let plain = buffer[index] ^ keystreamByte
            buffer[index] = plain
            update(plain)
        }
    }

    /// Encrypts `buffer` in place.
    mutating func encrypt(_ buffer: UnsafeMutableRawBufferPointer) {
        for index in 0..<buffer.count {
            let plain = buffer[index]
            buffer[index] = plain ^ keystreamByte
            update(plain)
        }
    }
}
