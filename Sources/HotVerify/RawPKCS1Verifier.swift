import Foundation
import HotCore

/// RSA PKCS#1 v1.5 verification over the raw message (`PublicKey.Scheme.rsaPKCS1Raw`), in
/// plain Swift: the public operation `s^e mod n`, then a byte-for-byte comparison with the
/// padded message `00 01 FF…FF 00 M`.
///
/// swift-crypto (and CryptoKit) verify PKCS#1 v1.5 only over a digest wrapped in a
/// DigestInfo; older patch servers sign the message itself. So the swift-crypto backend
/// checks these signatures here, the same code on every platform. Only public values are
/// involved, so the arithmetic need not run in constant time. The expected block is built in
/// full and compared whole, never parsed, so no lenient padding check can be fooled.
struct RawPKCS1Verifier: Sendable {
    /// The modulus, big-endian, without leading zero bytes.
    let modulus: [UInt8]
    /// The public exponent, big-endian, without leading zero bytes.
    let exponent: [UInt8]

    /// Reads the key from a PKCS#1 `RSAPublicKey` (`SEQUENCE { INTEGER n, INTEGER e }`).
    ///
    /// - Throws: `HotUpdateError.Code.signatureInvalid` when it is not one, or the modulus
    ///   is even or shorter than 512 bits.
    init(rsaPublicKeyDER der: [UInt8]) throws {
        var outer = DERReader(der[...])
        var sequence = try outer.read(tag: 0x30, what: "RSAPublicKey")
        try outer.expectEnd(what: "RSAPublicKey")
        let modulus = Array(try sequence.read(tag: 0x02, what: "RSA modulus").bytes.drop(while: { $0 == 0 }))
        let exponent = Array(try sequence.read(tag: 0x02, what: "RSA exponent").bytes.drop(while: { $0 == 0 }))
        try sequence.expectEnd(what: "RSAPublicKey")
        guard modulus.count >= 64, let last = modulus.last, last & 1 == 1, !exponent.isEmpty else {
            throw HotUpdateError(.signatureInvalid, "the RSA key's modulus or exponent is unusable")
        }
        self.modulus = modulus
        self.exponent = exponent
    }

    /// Whether `signature` is the PKCS#1 v1.5 signature of exactly `message`, with no digest.
    func isValid(signature: Data, of message: Data) -> Bool {
        let size = modulus.count
        guard signature.count == size, message.count <= size - 11,
            let recovered = MontgomeryModulus(modulus).power(Array(signature), exponent)
        else { return false }
        var expected = [UInt8](repeating: 0xFF, count: size)
        expected[0] = 0x00
        expected[1] = 0x01
        expected[size - message.count - 1] = 0x00
        expected.replaceSubrange((size - message.count)..., with: message)
        return recovered == expected
    }
}

/// Modular exponentiation by Montgomery multiplication, over little-endian 32-bit limbs.
struct MontgomeryModulus {
    private let limbs: [UInt32]
    private let byteCount: Int
    /// `-n⁻¹ mod 2³²`.
    private let inverse: UInt32

    /// - Precondition: `modulus` (big-endian) is odd.
    init(_ modulus: [UInt8]) {
        byteCount = modulus.count
        limbs = Self.limbs(of: modulus, count: (modulus.count + 3) / 4)
        var x: UInt32 = 1
        for _ in 0..<5 { x = x &* (2 &- limbs[0] &* x) }  // Newton: doubles the correct bits each round.
        inverse = 0 &- x
    }

    /// `base^exponent mod n` as `byteCount` big-endian bytes; nil when `base` is not below n.
    func power(_ base: [UInt8], _ exponent: [UInt8]) -> [UInt8]? {
        let count = limbs.count
        guard base.count <= count * 4 else { return nil }
        let value = Self.limbs(of: base, count: count)
        guard Self.compare(value, limbs) < 0 else { return nil }
        let rSquared = residueOfRSquared()
        let one = [1] + [UInt32](repeating: 0, count: count - 1)
        let montgomeryBase = multiply(value, rSquared)
        var accumulator = multiply(one, rSquared)
        for byte in exponent {
            for bit in (0..<8).reversed() {
                accumulator = multiply(accumulator, accumulator)
                if byte >> bit & 1 == 1 { accumulator = multiply(accumulator, montgomeryBase) }
            }
        }
        let result = multiply(accumulator, one)
        var bytes = [UInt8](repeating: 0, count: count * 4)
        for (index, limb) in result.enumerated() {
            for shift in 0..<4 {
                bytes[bytes.count - 1 - index * 4 - shift] = UInt8(truncatingIfNeeded: limb >> (8 * shift))
            }
        }
        return Array(bytes.suffix(byteCount))
    }

    /// `R² mod n` with `R = 2^(32·limbs)`, by doubling 1 modulo n `2·32·limbs` times.
    private func residueOfRSquared() -> [UInt32] {
        var value = [1] + [UInt32](repeating: 0, count: limbs.count - 1)
        for _ in 0..<(64 * limbs.count) {
            var carry: UInt32 = 0
            for index in value.indices {
                let next = value[index] >> 31
                value[index] = value[index] << 1 | carry
                carry = next
            }
            if carry == 1 || Self.compare(value, limbs) >= 0 { Self.subtract(&value, limbs) }
        }
        return value
    }

    /// `a·b·R⁻¹ mod n` (CIOS), for `a, b < n`.
    private func multiply(_ a: [UInt32], _ b: [UInt32]) -> [UInt32] {
        let count = limbs.count
        var t = [UInt32](repeating: 0, count: count + 2)
        for i in 0..<count {
            var carry: UInt64 = 0
            for j in 0..<count {
                let x = UInt64(t[j]) + UInt64(a[j]) * UInt64(b[i]) + carry
                t[j] = UInt32(truncatingIfNeeded: x)
                carry = x >> 32
            }
            var x = UInt64(t[count]) + carry
            t[count] = UInt32(truncatingIfNeeded: x)
            t[count + 1] = UInt32(x >> 32)
            let m = t[0] &* inverse
            x = UInt64(t[0]) + UInt64(m) * UInt64(limbs[0])
            carry = x >> 32
            for j in 1..<count {
                x = UInt64(t[j]) + UInt64(m) * UInt64(limbs[j]) + carry
                t[j - 1] = UInt32(truncatingIfNeeded: x)
                carry = x >> 32
            }
            x = UInt64(t[count]) + carry
            t[count - 1] = UInt32(truncatingIfNeeded: x)
            t[count] = t[count + 1] + UInt32(x >> 32)
            t[count + 1] = 0
        }
        var result = Array(t[0..<count])
        if t[count] != 0 || Self.compare(result, limbs) >= 0 { Self.subtract(&result, limbs) }
        return result
    }

    /// Big-endian bytes as `count` little-endian limbs.
    private static func limbs(of bytes: [UInt8], count: Int) -> [UInt32] {
        var limbs = [UInt32](repeating: 0, count: count)
        for (offset, byte) in bytes.reversed().enumerated() {
            limbs[offset / 4] |= UInt32(byte) << (8 * (offset % 4))
        }
        return limbs
    }

    /// -1, 0 or 1 as `a` is below, equal to or above `b` (same limb count).
    private static func compare(_ a: [UInt32], _ b: [UInt32]) -> Int {
        for index in a.indices.reversed() where a[index] != b[index] {
            return a[index] < b[index] ? -1 : 1
        }
        return 0
    }

    /// `a -= b`, modulo `2^(32·limbs)`.
    private static func subtract(_ a: inout [UInt32], _ b: [UInt32]) {
        var borrow: UInt32 = 0
        for index in a.indices {
            let (partial, overflow1) = a[index].subtractingReportingOverflow(b[index])
            let (result, overflow2) = partial.subtractingReportingOverflow(borrow)
            a[index] = result
            borrow = overflow1 || overflow2 ? 1 : 0
        }
    }
}
