import CHotZlib

/// PKWARE's traditional ("ZipCrypto") stream cipher, for reading archives made
/// with `zip -P`. It is weak; it is read for compatibility, never written.
struct TraditionalDecryptor {
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

    /// Decrypts `buffer` in place.
    mutating func decrypt(_ buffer: UnsafeMutableRawBufferPointer) {
        for index in 0..<buffer.count {
            let temp = (key2 | 2) & 0xFFFF
            let plain = buffer[index] ^ UInt8(truncatingIfNeeded: (temp &* (temp ^ 1)) >> 8)
            buffer[index] = plain
            update(plain)
        }
    }
}
