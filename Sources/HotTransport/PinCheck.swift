import Foundation
import HotCore

/// The pin decision both HTTP transports share, apart from any TLS library: take the server
/// certificate's DER SubjectPublicKeyInfo, hash it with SHA-256, and compare with the pins.
///
/// libcurl decides the same way itself (`CURLOPT_PINNEDPUBLICKEY`); `URLSessionTransport` on
/// Apple platforms calls ``evaluate(leafCertificate:pins:host:sha256:)`` from its
/// server-trust challenge, after the system has evaluated the chain, with CryptoKit's SHA-256.
/// Only the leaf (the server's own certificate) is pinned, as curl does.
package enum PinCheck {
    /// The DER SubjectPublicKeyInfo of a DER X.509 certificate, tag and length included.
    ///
    /// - Parameter certificate: The certificate's DER bytes.
    /// - Returns: The bytes a pin hashes.
    /// - Throws: `HotUpdateError.Code.invalidArgument` when the bytes are not a certificate.
    package static func subjectPublicKeyInfo(ofCertificate certificate: [UInt8]) throws -> ArraySlice<UInt8> {
        var outer = DERReader(certificate[...])
        var certificateBody = try outer.enter(tag: 0x30, "Certificate")
        var tbs = try certificateBody.enter(tag: 0x30, "TBSCertificate")
        if tbs.peekTag == 0xA0 { _ = try tbs.element(tag: 0xA0, "version") }
        _ = try tbs.element(tag: 0x02, "serialNumber")
        _ = try tbs.element(tag: 0x30, "signature")
        _ = try tbs.element(tag: 0x30, "issuer")
        _ = try tbs.element(tag: 0x30, "validity")
        _ = try tbs.element(tag: 0x30, "subject")
        return try tbs.element(tag: 0x30, "subjectPublicKeyInfo")
    }

    /// The pin of a DER certificate's public key.
    ///
    /// - Parameters:
    ///   - certificate: The certificate's DER bytes.
    ///   - sha256: A SHA-256 function.
    package static func pin(
        ofCertificate certificate: [UInt8],
        sha256: (ArraySlice<UInt8>) -> [UInt8]
    ) throws -> SPKIPin {
        try SPKIPin(sha256: sha256(try subjectPublicKeyInfo(ofCertificate: certificate)))
    }

    /// Decides whether a server whose certificate is `leafCertificate` matches `pins`.
    ///
    /// - Parameters:
    ///   - leafCertificate: The server's own certificate, DER.
    ///   - pins: The pins; an empty set accepts every key.
    ///   - host: The host connected to, for the message.
    ///   - sha256: A SHA-256 function.
    /// - Throws: `HotUpdateError.Code.pinMismatch` naming the server's key and the pins when
    ///   none matches; `HotUpdateError.Code.invalidArgument` when the certificate cannot be read.
    package static func evaluate(
        leafCertificate: [UInt8],
        pins: Set<SPKIPin>,
        host: String,
        sha256: (ArraySlice<UInt8>) -> [UInt8]
    ) throws {
        guard !pins.isEmpty else { return }
        let presented = try pin(ofCertificate: leafCertificate, sha256: sha256)
        guard !pins.contains(presented) else { return }
        throw HotUpdateError(
            .pinMismatch,
            "the server's public key \(presented) is not one of the pinned keys "
                + pins.map(\.description).sorted().joined(separator: ", "),
            subject: host
        )
    }
}

/// Reads DER TLVs: just enough of X.509 to find a SubjectPublicKeyInfo.
struct DERReader {
    private var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    /// The tag of the next element, if any.
    var peekTag: UInt8? { bytes.first }

    /// The next element, tag and length included, which must have `tag`.
    mutating func element(tag: UInt8, _ name: String) throws -> ArraySlice<UInt8> {
        let (whole, _) = try next(tag: tag, name)
        return whole
    }

    /// The content of the next element, which must have `tag`, as a reader.
    mutating func enter(tag: UInt8, _ name: String) throws -> DERReader {
        let (_, content) = try next(tag: tag, name)
        return DERReader(content)
    }

    private mutating func next(tag: UInt8, _ name: String) throws -> (ArraySlice<UInt8>, ArraySlice<UInt8>) {
        func fail(_ why: String) -> HotUpdateError {
            HotUpdateError(.invalidArgument, "not a DER certificate: \(name) \(why)")
        }
        let start = bytes.startIndex
        guard let found = bytes.first else { throw fail("is missing") }
        guard found == tag else { throw fail("has tag \(found), not \(tag)") }
        var index = bytes.index(after: start)
        guard index < bytes.endIndex else { throw fail("has no length") }
        let first = bytes[index]
        index += 1
        var length = 0
        if first < 0x80 {
            length = Int(first)
        } else {
            let count = Int(first & 0x7F)
            guard count >= 1, count <= 4, bytes.endIndex - index >= count else { throw fail("has a bad length") }
            for _ in 0..<count {
                length = length << 8 | Int(bytes[index])
                index += 1
            }
        }
        guard bytes.endIndex - index >= length else { throw fail("is cut short") }
        let end = index + length
        let whole = bytes[start..<end]
        let content = bytes[index..<end]
        bytes = bytes[end...]
        return (whole, content)
    }
}
