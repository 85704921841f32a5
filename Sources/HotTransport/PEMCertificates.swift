import Foundation
import HotCore

/// The certificates of a PEM bundle, as DER: the anchors `URLSessionTransport` gives the
/// Security framework on Apple platforms, read the same way everywhere.
package enum PEMCertificates {
    /// The DER bytes of every `CERTIFICATE` block of `text`, in order.
    ///
    /// - Throws: `HotUpdateError.Code.invalidArgument` when a block's base64 does not decode,
    ///   or there is no block.
    package static func parse(_ text: String, source: String) throws -> [[UInt8]] {
        let begin = "-----BEGIN CERTIFICATE-----"
        let end = "-----END CERTIFICATE-----"
        var certificates: [[UInt8]] = []
        var rest = text[...]
        while let start = rest.range(of: begin) {
            guard let stop = rest.range(of: end, range: start.upperBound..<rest.endIndex) else {
                throw HotUpdateError(.invalidArgument, "a certificate block has no END line", subject: source)
            }
            let body = rest[start.upperBound..<stop.lowerBound].filter { !$0.isWhitespace }
            guard let der = Data(base64Encoded: String(body)), !der.isEmpty else {
                throw HotUpdateError(.invalidArgument, "a certificate block is not base64", subject: source)
            }
            certificates.append([UInt8](der))
            rest = rest[stop.upperBound...]
        }
        guard !certificates.isEmpty else {
            throw HotUpdateError(.invalidArgument, "the CA bundle holds no PEM certificate", subject: source)
        }
        return certificates
    }

    /// The certificates of the PEM file at `path`.
    ///
    /// - Throws: `HotUpdateError.Code.invalidArgument` when it cannot be read or holds none.
    package static func read(path: String) throws -> [[UInt8]] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw HotUpdateError(
                .invalidArgument,
                "cannot read the CA bundle: \(error.localizedDescription)",
                subject: path
            )
        }
        return try parse(String(decoding: data, as: UTF8.self), source: path)
    }
}
