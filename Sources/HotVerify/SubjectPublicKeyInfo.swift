import Foundation
import HotCore

/// A public key's SubjectPublicKeyInfo (RFC 5280), read from PEM with no crypto library.
///
/// The libcrypto backend lets OpenSSL parse keys; the swift-crypto backend uses this to find
/// the algorithm and the raw key bits for swift-crypto's APIs.
package struct SubjectPublicKeyInfo: Sendable, Hashable {
    /// The algorithm OID in dotted form (`1.3.101.112` for Ed25519).
    var algorithmOID: String
    /// The contents of the `subjectPublicKey` BIT STRING, without its unused-bits byte.
    var keyBits: [UInt8]
    /// The whole DER encoding.
    var der: [UInt8]

    static let ed25519OID = "1.3.101.112"
    static let rsaEncryptionOID = "1.2.840.113549.1.1.1"
    static let rsaPSSOID = "1.2.840.113549.1.1.10"

    /// Whether the key's algorithm fits `scheme`.
    func fits(_ scheme: PublicKey.Scheme) -> Bool {
        switch scheme {
        case .ed25519: return algorithmOID == Self.ed25519OID
        case .rsaPKCS1SHA256, .rsaPKCS1Raw: return algorithmOID == Self.rsaEncryptionOID
        case .rsaPSSSHA256: return algorithmOID == Self.rsaEncryptionOID || algorithmOID == Self.rsaPSSOID
        default: return false
        }
    }

    /// A readable name of the key's algorithm, for messages.
    var algorithmName: String {
        switch algorithmOID {
        case Self.ed25519OID: return "Ed25519"
        case Self.rsaEncryptionOID: return "RSA"
        case Self.rsaPSSOID: return "RSA-PSS"
        default: return "OID \(algorithmOID)"
        }
    }

    /// Reads a `-----BEGIN PUBLIC KEY-----` block.
    ///
    /// - Throws: `HotUpdateError.Code.signatureInvalid` when `pem` holds no such block or
    ///   its content is not a SubjectPublicKeyInfo.
    init(pem: String) throws {
        let begin = "-----BEGIN PUBLIC KEY-----"
        let end = "-----END PUBLIC KEY-----"
        guard let start = pem.range(of: begin), let stop = pem.range(of: end, range: start.upperBound..<pem.endIndex)
        else {
            throw HotUpdateError(.signatureInvalid, "the key is not a PEM public key (no '\(begin)' block)")
        }
        let body = pem[start.upperBound..<stop.lowerBound].filter { !$0.isWhitespace }
        guard let data = Data(base64Encoded: String(body)) else {
            throw HotUpdateError(.signatureInvalid, "the PEM public key's body is not base64")
        }
        try self.init(der: Array(data))
    }

    /// Reads a DER SubjectPublicKeyInfo.
    ///
    /// - Throws: `HotUpdateError.Code.signatureInvalid` when `der` is not one.
    init(der: [UInt8]) throws {
        var outer = DERReader(der[...])
        var spki = try outer.read(tag: 0x30, what: "SubjectPublicKeyInfo")
        try outer.expectEnd(what: "SubjectPublicKeyInfo")
        var algorithm = try spki.read(tag: 0x30, what: "AlgorithmIdentifier")
        let oid = try algorithm.read(tag: 0x06, what: "algorithm OID")
        let bits = try spki.read(tag: 0x03, what: "subjectPublicKey")
        try spki.expectEnd(what: "SubjectPublicKeyInfo")
        guard let unused = bits.bytes.first, unused == 0 else {
            throw HotUpdateError(.signatureInvalid, "the public key's BIT STRING is not whole bytes")
        }
        self.algorithmOID = try Self.dotted(oid.bytes)
        self.keyBits = Array(bits.bytes.dropFirst())
        self.der = der
    }

    /// For an RSA key, the modulus and exponent as the PKCS#1 `RSAPublicKey` DER (which
    /// `keyBits` already is); checked to be a SEQUENCE of two INTEGERs.
    func rsaPublicKeyDER() throws -> [UInt8] {
        var outer = DERReader(keyBits[...])
        var sequence = try outer.read(tag: 0x30, what: "RSAPublicKey")
        try outer.expectEnd(what: "RSAPublicKey")
        _ = try sequence.read(tag: 0x02, what: "RSA modulus")
        _ = try sequence.read(tag: 0x02, what: "RSA exponent")
        try sequence.expectEnd(what: "RSAPublicKey")
        return keyBits
    }

    /// An OID's content bytes in dotted form.
    static func dotted(_ bytes: ArraySlice<UInt8>) throws -> String {
        var components: [UInt64] = []
        var value: UInt64 = 0
        var pending = false
        for byte in bytes {
            guard value < (1 << 56) else { throw HotUpdateError(.signatureInvalid, "an OID component is too large") }
            value = value << 7 | UInt64(byte & 0x7f)
            pending = byte & 0x80 != 0
            if !pending {
                components.append(value)
                value = 0
            }
        }
        guard let first = components.first, !pending else {
            throw HotUpdateError(.signatureInvalid, "the key's algorithm OID is malformed")
        }
        let head: [UInt64] = first < 80 ? [first / 40, first % 40] : [2, first - 80]
        return (head + components.dropFirst()).map(String.init).joined(separator: ".")
    }
}

/// Reads DER TLVs (definite lengths only) from a byte slice.
struct DERReader {
    private var rest: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { rest = bytes }

    /// The content bytes of the next element, as a reader.
    var bytes: ArraySlice<UInt8> { rest }

    /// Reads the next element, which must have tag `tag`.
    mutating func read(tag: UInt8, what: String) throws -> DERReader {
        guard let found = rest.first else {
            throw HotUpdateError(.signatureInvalid, "the public key ends before its \(what)")
        }
        guard found == tag else {
            throw HotUpdateError(.signatureInvalid, "the public key's \(what) has tag \(found), not \(tag)")
        }
        var index = rest.index(after: rest.startIndex)
        guard index < rest.endIndex else {
            throw HotUpdateError(.signatureInvalid, "the public key's \(what) has no length")
        }
        var length = Int(rest[index])
        index += 1
        if length & 0x80 != 0 {
            let count = length & 0x7f
            guard count >= 1, count <= 4, rest.endIndex - index >= count else {
                throw HotUpdateError(.signatureInvalid, "the public key's \(what) has a bad length")
            }
            length = 0
            for _ in 0..<count {
                length = length << 8 | Int(rest[index])
                index += 1
            }
        }
        guard rest.endIndex - index >= length else {
            throw HotUpdateError(.signatureInvalid, "the public key's \(what) is truncated")
        }
        let content = rest[index..<(index + length)]
        rest = rest[(index + length)...]
        return DERReader(content)
    }

    /// Throws unless every byte was read.
    func expectEnd(what: String) throws {
        guard rest.isEmpty else {
            throw HotUpdateError(.signatureInvalid, "the public key's \(what) has \(rest.count) trailing bytes")
        }
    }
}

extension SubjectPublicKeyInfo {
    /// The DER SubjectPublicKeyInfo of a raw 32-byte Ed25519 public key (RFC 8410).
    package static func ed25519DER(_ key: [UInt8]) -> [UInt8] {
        [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00] + key
    }

    /// The DER SubjectPublicKeyInfo (`rsaEncryption`, RFC 8017's `RSAPublicKey`) of an RSA key
    /// given as its big-endian modulus and public exponent, as a PKCS#11 token gives them.
    package static func rsaDER(modulus: [UInt8], exponent: [UInt8]) -> [UInt8] {
        func element(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
            var length: [UInt8] = []
            var rest = content.count
            while rest > 0 {
                length.insert(UInt8(rest & 0xFF), at: 0)
                rest >>= 8
            }
            let encodedLength = content.count < 0x80 ? [UInt8(content.count)] : [0x80 | UInt8(length.count)] + length
            return [tag] + encodedLength + content
        }
        /// A non-negative INTEGER: no leading zeros but one before a high bit.
        func integer(_ magnitude: [UInt8]) -> [UInt8] {
            var bytes = Array(magnitude.drop { $0 == 0 })
            if bytes.isEmpty || bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
            return element(0x02, bytes)
        }
        let rsaEncryption: [UInt8] = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01, 0x05, 0x00]
        let key = element(0x30, integer(modulus) + integer(exponent))
        return element(0x30, element(0x30, rsaEncryption) + element(0x03, [0x00] + key))
    }
}

/// A PKCS#8 `PrivateKeyInfo` (RFC 5208, and RFC 5958's `OneAsymmetricKey`), read far enough
/// to tell the algorithm and, for Ed25519, the seed.
struct PrivateKeyInfo: Sendable {
    /// The algorithm OID in dotted form.
    var algorithmOID: String
    /// The contents of the `privateKey` OCTET STRING.
    var privateKey: [UInt8]

    /// Reads a DER PrivateKeyInfo.
    ///
    /// - Throws: `HotUpdateError.Code.signatureInvalid` when `der` is not one.
    init(der: [UInt8]) throws {
        var outer = DERReader(der[...])
        var info = try outer.read(tag: 0x30, what: "PrivateKeyInfo")
        try outer.expectEnd(what: "PrivateKeyInfo")
        _ = try info.read(tag: 0x02, what: "PrivateKeyInfo version")
        var algorithm = try info.read(tag: 0x30, what: "AlgorithmIdentifier")
        let oid = try algorithm.read(tag: 0x06, what: "algorithm OID")
        // What follows the key (attributes, the public key) is not needed.
        self.privateKey = Array(try info.read(tag: 0x04, what: "privateKey").bytes)
        self.algorithmOID = try SubjectPublicKeyInfo.dotted(oid.bytes)
    }

    /// The 32-byte seed of an Ed25519 key, inside its `CurvePrivateKey` OCTET STRING.
    func ed25519Seed() throws -> [UInt8] {
        var outer = DERReader(privateKey[...])
        let seed = try outer.read(tag: 0x04, what: "Ed25519 private key")
        try outer.expectEnd(what: "Ed25519 private key")
        guard seed.bytes.count == 32 else {
            throw HotUpdateError(.signatureInvalid, "the Ed25519 private key has \(seed.bytes.count) bytes, not 32")
        }
        return Array(seed.bytes)
    }

    /// The DER PrivateKeyInfo of an Ed25519 seed, as `openssl genpkey -algorithm ed25519` writes it.
    static func ed25519(seed: [UInt8]) -> [UInt8] {
        [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20] + seed
    }
}

/// PEM armour (RFC 7468), written as OpenSSL writes it: 64 base64 characters a line.
package enum PEM {
    /// `der` as a PEM block with `label`, ending in a newline.
    package static func encode(_ der: [UInt8], label: String) -> String {
        let base64 = Data(der).base64EncodedString()
        var lines = ["-----BEGIN \(label)-----"]
        var start = base64.startIndex
        while start < base64.endIndex {
            let end = base64.index(start, offsetBy: 64, limitedBy: base64.endIndex) ?? base64.endIndex
            lines.append(String(base64[start..<end]))
            start = end
        }
        lines.append("-----END \(label)-----")
        return lines.joined(separator: "\n") + "\n"
    }

    /// The label and DER bytes of the first PEM block in `text`.
    ///
    /// - Throws: `HotUpdateError.Code.signatureInvalid` naming `what` when there is none.
    static func decode(_ text: String, what: String) throws -> (label: String, der: [UInt8]) {
        guard let begin = text.range(of: "-----BEGIN "),
            let labelEnd = text.range(of: "-----", range: begin.upperBound..<text.endIndex)
        else {
            throw HotUpdateError(.signatureInvalid, "the \(what) is not PEM (no '-----BEGIN' line)")
        }
        let label = String(text[begin.upperBound..<labelEnd.lowerBound])
        guard let end = text.range(of: "-----END \(label)-----", range: labelEnd.upperBound..<text.endIndex) else {
            throw HotUpdateError(.signatureInvalid, "the \(what) PEM has no '-----END \(label)-----' line")
        }
        let body = text[labelEnd.upperBound..<end.lowerBound].filter { !$0.isWhitespace }
        guard let data = Data(base64Encoded: String(body)) else {
            throw HotUpdateError(.signatureInvalid, "the \(what) PEM's body is not base64")
        }
        return (label, Array(data))
    }
}
