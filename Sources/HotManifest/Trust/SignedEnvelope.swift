import Foundation
import HotCore

/// A signed manifest as it is served: the exact bytes of the signed part and the
/// signatures over them.
///
/// ```json
/// {
///   "signatures": [{"keyid": "3b1f…", "sig": "9e04…"}],
///   "signed": {"_type": "hot-manifest", "schema": 2, "version": 8, …}
/// }
/// ```
///
/// Signatures cover the bytes of the `signed` value exactly as they appear in the file,
/// never a re-encoding: ``parse(_:)`` cuts those bytes out of the document and the body
/// is decoded from the same bytes that were verified, so no JSON library's ordering or
/// escaping can make the verified and the used content differ. A document with the key
/// `signed` twice, or with anything but an object there, is refused.
public struct SignedEnvelope: Sendable, Hashable {
    /// One signature: which key made it and the signature bytes.
    public struct Signature: Codable, Sendable, Hashable {
        /// The signing key's id (`Verifier.keyID(of:)`).
        public var keyid: String
        /// The signature, hex.
        public var sig: String

        /// Creates a signature entry.
        public init(keyid: String, sig: String) {
            self.keyid = keyid
            self.sig = sig
        }
    }

    /// The signed part, byte for byte as served.
    public var signed: Data
    /// The signatures, in the order served.
    public var signatures: [Signature]

    /// Creates an envelope.
    public init(signed: Data, signatures: [Signature]) {
        self.signed = signed
        self.signatures = signatures
    }

    /// Whether `data` looks like an envelope (a JSON object with a `signed` key) rather
    /// than a schema-1 document.
    public static func isEnvelope(_ data: Data) -> Bool {
        (try? JSONSpans.topLevelValues(of: data))?["signed"] != nil
    }

    /// Parses a served envelope, keeping the signed part's exact bytes.
    ///
    /// - Throws: `HotUpdateError.Code.manifestInvalid` when the document is not an envelope.
    public static func parse(_ data: Data) throws -> SignedEnvelope {
        let spans = try JSONSpans.topLevelValues(of: data)
        guard let signedRange = spans["signed"], data[signedRange.lowerBound] == UInt8(ascii: "{") else {
            throw HotUpdateError(.manifestInvalid, "the manifest has no \"signed\" object")
        }
        var signatures: [Signature] = []
        if let range = spans["signatures"] {
            do {
                signatures = try JSONDecoder().decode([Signature].self, from: Data(data[range]))
            } catch {
                throw HotUpdateError.wrap(
                    error,
                    as: .manifestInvalid,
                    "\"signatures\" is not a list of {keyid, sig}"
                )
            }
        }
        return SignedEnvelope(signed: Data(data[signedRange]), signatures: signatures)
    }

    /// The envelope as it is served: signatures first, then the signed bytes verbatim.
    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var lines: [String] = []
        for signature in signatures {
            lines.append("    " + String(decoding: try encoder.encode(signature), as: UTF8.self))
        }
        var text = "{\n  \"signatures\": ["
        text += lines.isEmpty ? "]" : "\n" + lines.joined(separator: ",\n") + "\n  ]"
        text += ",\n  \"signed\": "
        var data = Data(text.utf8)
        data.append(signed)
        data.append(contentsOf: Array("\n}\n".utf8))
        return data
    }

    /// Which signatures verify with which of `keys`: the engine's and `hot verify`'s, not API.
    package struct Tally: Sendable, Hashable {
        /// Key ids whose signature verifies (each counted once).
        package var valid: Set<String>
        /// Key ids of `keys` whose signature does not verify.
        package var invalid: [String]
        /// Key ids not in `keys`.
        package var unknown: [String]

        /// Throws unless at least `threshold` keys signed validly.
        ///
        /// - Parameters:
        ///   - threshold: How many valid signatures are needed.
        ///   - whose: Names the key set in the message ("trusted", "declared").
        ///   - subject: The file or URL the error names, if any.
        /// - Throws: `HotUpdateError.Code.signatureInvalid` naming the failures.
        package func require(_ threshold: Int, whose: String, subject: String? = nil) throws {
            guard valid.count < threshold else { return }
            var reasons: [String] = []
            let short = { (ids: [String]) in ids.map { String($0.prefix(12)) }.joined(separator: ", ") }
            if !invalid.isEmpty { reasons.append("signatures that do not verify by \(short(invalid))") }
            if !unknown.isEmpty { reasons.append("signatures by unknown keys \(short(unknown))") }
            throw HotUpdateError(
                .signatureInvalid,
                "the manifest has \(valid.count) valid signatures by \(whose) keys, \(threshold) needed"
                    + (reasons.isEmpty ? "" : " (\(reasons.joined(separator: "; ")))"),
                subject: subject
            )
        }
    }

    /// Checks every signature against `keys` (key id → key).
    ///
    /// - Throws: `HotUpdateError.Code.signatureInvalid` when a key cannot be used.
    package func tally(keys: [String: PublicKey], verifier: any Verifier) throws -> Tally {
        var tally = Tally(valid: [], invalid: [], unknown: [])
        for signature in signatures {
            guard let key = keys[signature.keyid] else {
                tally.unknown.append(signature.keyid)
                continue
            }
            if let bytes = HexBytes.decode(signature.sig), try verifier.verify(signature: bytes, of: signed, with: key)
            {
                tally.valid.insert(signature.keyid)
            } else {
                tally.invalid.append(signature.keyid)
            }
        }
        return tally
    }

    /// Signs `signed` with every signer and returns the envelope.
    ///
    /// - Parameters:
    ///   - signed: The exact bytes to sign and serve (``SignedManifestBody/canonicalBytes()``).
    ///   - signers: The keys to sign with; each adds one signature.
    ///   - verifier: Derives each key's id.
    /// - Throws: `HotUpdateError.Code.signatureInvalid` when a key cannot sign.
    public static func sign(
        _ signed: Data,
        with signers: [any Signer],
        verifier: any Verifier
    ) throws
        -> SignedEnvelope
    {
        var signatures: [Signature] = []
        for signer in signers {
            let keyID = try verifier.keyID(of: signer.publicKey)
            guard !signatures.contains(where: { $0.keyid == keyID }) else { continue }
            signatures.append(Signature(keyid: keyID, sig: HexBytes.encode(try signer.sign(signed))))
        }
        return SignedEnvelope(signed: signed, signatures: signatures)
    }
}

/// Finds the byte range of each value of a JSON document's top-level object, without
/// decoding the values, so signed bytes can be verified exactly as served.
enum JSONSpans {
    static func topLevelValues(of data: Data) throws -> [String: Range<Data.Index>] {
        var scanner = Scanner(bytes: data)
        var result: [String: Range<Data.Index>] = [:]
        scanner.skipWhitespace()
        try scanner.expect(UInt8(ascii: "{"))
        scanner.skipWhitespace()
        if scanner.peek() == UInt8(ascii: "}") {
            scanner.index += 1
        } else {
            while true {
                scanner.skipWhitespace()
                let keyStart = scanner.index
                try scanner.skipString()
                guard
                    let key = try? JSONDecoder().decode(String.self, from: Data(data[keyStart..<scanner.index]))
                else {
                    throw scanner.failure("a key that is not a valid string")
                }
                scanner.skipWhitespace()
                try scanner.expect(UInt8(ascii: ":"))
                scanner.skipWhitespace()
                let valueStart = scanner.index
                try scanner.skipValue(depth: 0)
                guard result.updateValue(valueStart..<scanner.index, forKey: key) == nil else {
                    throw HotUpdateError(.manifestInvalid, "the manifest has the key \"\(key)\" twice")
                }
                scanner.skipWhitespace()
                if scanner.peek() == UInt8(ascii: ",") {
                    scanner.index += 1
                    continue
                }
                try scanner.expect(UInt8(ascii: "}"))
                break
            }
        }
        scanner.skipWhitespace()
        guard scanner.index == data.endIndex else { throw scanner.failure("bytes after the top-level object") }
        return result
    }

    private struct Scanner {
        let bytes: Data
        var index: Data.Index

        init(bytes: Data) {
            self.bytes = bytes
            self.index = bytes.startIndex
        }

        func peek() -> UInt8? { index < bytes.endIndex ? bytes[index] : nil }

        func failure(_ what: String) -> HotUpdateError {
            HotUpdateError(
                .manifestInvalid,
                "the manifest is not a JSON object: \(what) at byte \(index - bytes.startIndex)"
            )
        }

        mutating func skipWhitespace() {
            while let c = peek(), c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { index += 1 }
        }

        mutating func expect(_ c: UInt8) throws {
            guard peek() == c else { throw failure("expected '\(Character(Unicode.Scalar(c)))'") }
            index += 1
        }

        mutating func skipString() throws {
            try expect(UInt8(ascii: "\""))
            while let c = peek() {
                index += 1
                if c == UInt8(ascii: "\\") {
                    guard peek() != nil else { break }
                    index += 1
                } else if c == UInt8(ascii: "\"") {
                    return
                } else if c < 0x20 {
                    throw failure("a control character in a string")
                }
            }
            throw failure("an unterminated string")
        }

        mutating func skipValue(depth: Int) throws {
            guard depth < 64 else { throw failure("nesting deeper than 64") }
            switch peek() {
            case UInt8(ascii: "\""):
                try skipString()
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                let open = bytes[index]
                let close = open == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                index += 1
                skipWhitespace()
                if peek() == close {
                    index += 1
                    return
                }
                while true {
                    skipWhitespace()
                    if open == UInt8(ascii: "{") {
                        try skipString()
                        skipWhitespace()
                        try expect(UInt8(ascii: ":"))
                        skipWhitespace()
                    }
                    try skipValue(depth: depth + 1)
                    skipWhitespace()
                    if peek() == UInt8(ascii: ",") {
                        index += 1
                        continue
                    }
                    try expect(close)
                    return
                }
            case .some:
                // A number or a literal: up to the next delimiter.
                let start = index
                while let c = peek(),
                    !(c == UInt8(ascii: ",") || c == UInt8(ascii: "}") || c == UInt8(ascii: "]")
                        || c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09)
                {
                    index += 1
                }
                guard index > start else { throw failure("a missing value") }
            case .none:
                throw failure("the end of the document where a value was expected")
            }
        }
    }
}
