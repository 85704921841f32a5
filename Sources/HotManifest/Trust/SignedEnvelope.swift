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

    /// A rollout step served with the release manifest: the exact bytes of a
    /// ``RolloutPart`` and the rollout role's signatures over them.
    public struct Rollout: Sendable, Hashable {
        /// The rollout part, byte for byte as served.
        public var signed: Data
        /// The rollout role's signatures, in the order served.
        public var signatures: [Signature]

        /// Creates a served rollout part.
        public init(signed: Data, signatures: [Signature]) {
            self.signed = signed
            self.signatures = signatures
        }

        /// Checks every signature against the keys of `role`.
        package func tally(role: RolloutRole, verifier: any Verifier) throws -> Tally {
            try SignedEnvelope(signed: signed, signatures: signatures)
                .tally(keys: try role.keyTable(verifier: verifier), verifier: verifier)
        }
    }

    /// The signed part, byte for byte as served.
    public var signed: Data
    /// The signatures, in the order served.
    public var signatures: [Signature]
    /// The rollout role's step over the signed part, when one is served (`hot rollout`).
    public var rollout: Rollout?

    /// Creates an envelope.
    public init(signed: Data, signatures: [Signature], rollout: Rollout? = nil) {
        self.signed = signed
        self.signatures = signatures
        self.rollout = rollout
    }

    /// The manifest as clients act on it, signatures unchecked (for publishing tools): the
    /// signed part, with the packages of its shards when it is a sharded manifest's top
    /// document, and the rollout part applied when there is one.
    ///
    /// - Parameters:
    ///   - verifier: Checks the shards' digests and makes the release manifest's.
    ///   - shards: The shards' bytes by SHA-256, for a sharded manifest.
    /// - Throws: As ``SignedManifestBody/decode(_:)``, ``SignedManifestBody/assembled(from:verifier:)``
    ///   and ``RolloutPart/apply(to:releaseSHA256:role:)``; `HotUpdateError.Code.manifestInvalid`
    ///   for a sharded manifest without `shards`, and `HotUpdateError.Code.rolloutRoleExceeded`
    ///   for a rollout part in a manifest that declares no rollout role.
    public func effectiveBody(verifier: any Verifier, shards: [String: Data]? = nil) throws -> SignedManifestBody {
        try applyingRollout(
            to: releaseBody(verifier: verifier, shards: shards),
            verifier: verifier,
            checkingSignatures: false
        )
    }

    /// The signed part, with the packages of its shards when it is a sharded manifest's top
    /// document: the release manifest a rollout part applies to.
    ///
    /// - Throws: As ``effectiveBody(verifier:shards:)``, the rollout part aside.
    public func releaseBody(verifier: any Verifier, shards: [String: Data]?) throws -> SignedManifestBody {
        let release = try SignedManifestBody.decode(signed)
        guard release.isSharded else { return release }
        guard let shards else {
            throw HotUpdateError(
                .manifestInvalid,
                "the manifest is a sharded manifest's top document: its packages are in the shards it names, which were not read with it"
            )
        }
        return try release.assembled(from: shards, verifier: verifier)
    }

    /// `release`, the decoded signed part, with the rollout part applied when there is one;
    /// with `checkingSignatures`, a threshold of the rollout role's keys must have signed it.
    ///
    /// - Throws: `HotUpdateError.Code.rolloutRoleExceeded` for a rollout part where no role
    ///   is declared, and as ``RolloutPart/apply(to:releaseSHA256:role:)``;
    ///   `HotUpdateError.Code.signatureInvalid` when the role's threshold did not sign.
    package func applyingRollout(
        to release: SignedManifestBody,
        verifier: any Verifier,
        checkingSignatures: Bool
    ) throws -> SignedManifestBody {
        guard let rollout else { return release }
        guard let role = release.rolloutRole else {
            throw HotUpdateError(
                .rolloutRoleExceeded,
                "the manifest carries a rollout part but its release keys declare no rollout role"
            )
        }
        if checkingSignatures {
            try rollout.tally(role: role, verifier: verifier).require(role.threshold, whose: "rollout role")
        }
        return try RolloutPart.decode(rollout.signed).apply(
            to: release,
            releaseSHA256: try verifier.digest(of: signed, using: .sha256).hex,
            role: role
        )
    }

    /// Whether `data` is an envelope (a JSON object with a `signed` key, read by the strict
    /// reader) rather than a schema-1 document or no manifest at all.
    public static func isEnvelope(_ data: Data) -> Bool {
        guard case .object(let spans) = try? StrictJSON.read(data) else { return false }
        return spans["signed"] != nil
    }

    /// Reads served manifest bytes with the strict reader (`StrictJSON`): the envelope, or
    /// nil for a schema-1 document (an object with a `schema` and no `signed`).
    ///
    /// - Throws: `HotUpdateError` with what is wrong, each with its own code:
    ///   `manifestNotJSON`, `manifestTruncated`, `manifestTooDeep`, `manifestDuplicateKey`,
    ///   `manifestNumberOutOfRange`, `notAManifest` (JSON, but neither), `manifestInvalid`
    ///   (a `signed` part that is not an object, or bad `signatures`).
    public static func read(_ data: Data) throws -> SignedEnvelope? {
        guard case .object(let spans) = try StrictJSON.read(data) else {
            throw HotUpdateError(
                .notAManifest,
                "the document is JSON but not an object, so no manifest; it starts with \(StrictJSON.opening(of: data))"
            )
        }
        if spans["signed"] != nil { return try envelope(data, spans: spans) }
        guard spans["schema"] != nil else {
            let keys = spans.keys.sorted().prefix(8).map { "\"\($0)\"" }.joined(separator: ", ")
            throw HotUpdateError(
                .notAManifest,
                "the document is a JSON object but not a manifest: no \"signed\" part and no \"schema\" (its keys: \(keys.isEmpty ? "none" : keys))"
            )
        }
        return nil
    }

    /// Parses a served envelope, keeping the signed part's exact bytes.
    ///
    /// - Throws: As ``read(_:)``, and `HotUpdateError.Code.manifestUnsigned` for a schema-1
    ///   document (no `signed` part).
    public static func parse(_ data: Data) throws -> SignedEnvelope {
        guard let envelope = try read(data) else {
            throw HotUpdateError(.manifestUnsigned, "the manifest is not signed (no \"signed\" part)")
        }
        return envelope
    }

    private static func envelope(_ data: Data, spans: [String: Range<Data.Index>]) throws -> SignedEnvelope {
        guard let signedRange = spans["signed"], data[signedRange.lowerBound] == UInt8(ascii: "{") else {
            throw HotUpdateError(.manifestInvalid, "the manifest's \"signed\" part is not an object")
        }
        var rollout: Rollout?
        if let range = spans["rollout"] {
            let part = Data(data[range])
            guard case .object(let partSpans) = try StrictJSON.read(part, what: "the rollout part"),
                let partSigned = partSpans["signed"], part[partSigned.lowerBound] == UInt8(ascii: "{")
            else {
                throw HotUpdateError(
                    .manifestInvalid,
                    "the manifest's \"rollout\" is not an object with a \"signed\" object"
                )
            }
            rollout = Rollout(
                signed: Data(part[partSigned]),
                signatures: try signatures(in: part, at: partSpans["signatures"])
            )
        }
        return SignedEnvelope(
            signed: Data(data[signedRange]),
            signatures: try signatures(in: data, at: spans["signatures"]),
            rollout: rollout
        )
    }

    private static func signatures(in data: Data, at range: Range<Data.Index>?) throws -> [Signature] {
        guard let range else { return [] }
        do {
            return try JSONDecoder().decode([Signature].self, from: Data(data[range]))
        } catch {
            throw HotUpdateError.wrap(error, as: .manifestInvalid, "\"signatures\" is not a list of {keyid, sig}")
        }
    }

    /// The envelope as it is served: the rollout part when there is one, the signatures,
    /// then the signed bytes verbatim.
    public func encoded() throws -> Data {
        let (head, tail) = try frame()
        // One buffer: the signed bytes of a catalogue are megabytes, copied once.
        var data = Data()
        data.reserveCapacity(head.count + signed.count + tail.count)
        data.append(head)
        data.append(signed)
        data.append(tail)
        return data
    }

    /// What ``encoded()`` writes before and after the signed bytes: a file of the envelope
    /// can be written as the three without joining them.
    package func frame() throws -> (head: Data, tail: Data) {
        var head = Data("{\n".utf8)
        if let rollout {
            head.append(contentsOf: Array("  \"rollout\": {\n".utf8))
            try Self.encode(rollout.signatures, signed: rollout.signed, indent: "    ", into: &head)
            head.append(contentsOf: Array("\n  },\n".utf8))
        }
        try Self.encode(signatures, signed: nil, indent: "  ", into: &head)
        return (head, Data("\n}\n".utf8))
    }

    /// `"signatures": [...], "signed": BYTES` at `indent`, appended to `data`; without the
    /// bytes when `signed` is nil.
    private static func encode(_ signatures: [Signature], signed: Data?, indent: String, into data: inout Data) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var lines: [String] = []
        for signature in signatures {
            lines.append(indent + "  " + String(decoding: try encoder.encode(signature), as: UTF8.self))
        }
        var text = indent + "\"signatures\": ["
        text += lines.isEmpty ? "]" : "\n" + lines.joined(separator: ",\n") + "\n\(indent)]"
        text += ",\n\(indent)\"signed\": "
        data.append(contentsOf: Array(text.utf8))
        if let signed { data.append(signed) }
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
