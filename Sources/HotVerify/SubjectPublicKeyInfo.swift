import Foundation
import HotCore

/// A public key's SubjectPublicKeyInfo (RFC 5280), read from PEM with no crypto library.
///
/// The libcrypto backend lets OpenSSL parse keys; platforms without libcrypto use this
/// to find the algorithm and the raw key bits for their own crypto APIs.
struct SubjectPublicKeyInfo: Sendable, Hashable {
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

    private static func dotted(_ bytes: ArraySlice<UInt8>) throws -> String {
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
