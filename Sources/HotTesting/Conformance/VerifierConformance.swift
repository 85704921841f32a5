import Foundation
import HotCore

/// The conformance suite of `Verifier`, through its public API.
///
/// HotTesting has no cryptography of its own: digests are checked against published test
/// vectors (FIPS 180-2 for SHA-256, RFC 1321 for MD5), and signatures against the vectors
/// the caller supplies (a key, a message and a valid signature, made with `openssl` or a
/// signer of the caller's choice).
///
/// The checks, each a ``ConformanceCheck``:
/// - `Verifier.supportedDigests` holds SHA-256, and each hasher reports its algorithm;
/// - SHA-256 (and MD5 where supported) of the known vectors, the empty message included;
/// - incremental hashing (chunks of varied sizes, empty updates included) equals one-shot,
///   and two hashers used interleaved do not disturb each other;
/// - an algorithm outside `Verifier.supportedDigests` is refused with
///   `HotUpdateError.Code.unsupported`;
/// - for every ``SignatureVector``: the valid signature verifies; a changed message, a
///   changed signature, a truncated signature and another key of the same scheme are
///   refused (`false`, or `HotUpdateError.Code.signatureInvalid`); a PEM that is no key
///   throws `HotUpdateError.Code.signatureInvalid`; `Verifier.keyID(of:)` is 64 lowercase
///   hex digits, stable, different for different keys and equal to the vector's when given;
/// - an unknown signature scheme throws `HotUpdateError.Code.unsupported`.
///
/// ```swift
/// let suite = VerifierConformance(signatures: [
///     SignatureVector(name: "ed25519", key: PublicKey(scheme: .ed25519, pem: pem), message: message, signature: signature),
/// ]) { MyVerifier() }
/// ```
public struct VerifierConformance: Sendable {
    /// A key, a message and a valid signature of the message by that key.
    public struct SignatureVector: Sendable, Hashable {
        /// A name for messages (`"ed25519"`, `"rsa-pss 2048"`).
        public var name: String
        /// The public key, with the scheme its signatures use.
        public var key: PublicKey
        /// The signed bytes.
        public var message: Data
        /// A valid signature of ``message`` by ``key``.
        public var signature: Data
        /// The key's expected `Verifier.keyID(of:)` (SHA-256 of its DER SubjectPublicKeyInfo,
        /// hex), when known (`openssl pkey -pubin -outform DER | sha256sum`).
        public var keyID: String?

        /// Creates a vector.
        public init(name: String, key: PublicKey, message: Data, signature: Data, keyID: String? = nil) {
            self.name = name
            self.key = key
            self.message = message
            self.signature = signature
            self.keyID = keyID
        }
    }

    /// Makes the verifier under test.
    public let makeVerifier: @Sendable () -> any Verifier
    /// The signature vectors; give at least two keys of a scheme to check that another key is refused.
    public let signatures: [SignatureVector]

    /// Creates the suite.
    ///
    /// - Parameters:
    ///   - signatures: Valid signatures to check, and to tamper with.
    ///   - makeVerifier: Makes the verifier under test; called once per check.
    public init(signatures: [SignatureVector] = [], makeVerifier: @escaping @Sendable () -> any Verifier) {
        self.signatures = signatures
        self.makeVerifier = makeVerifier
    }

    static let suite = "Verifier"

    /// Known digests: message, SHA-256, MD5.
    static let vectors: [(message: [UInt8], sha256: String, md5: String)] = [
        (
            [], "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "d41d8cd98f00b204e9800998ecf8427e"
        ),
        (
            Array("abc".utf8), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "900150983cd24fb0d6963f7d28e17f72"
        ),
        (
            Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1", "8215ef0796a20bcaaae116d3876c664a"
        ),
        (
            [UInt8](repeating: 0x61, count: 1_000_000),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0", "7707d6ae4e027c70eea2a935c2296f21"
        ),
    ]

    /// Every check of the suite.
    public var checks: [ConformanceCheck] {
        var all = [
            check("supports SHA-256", "supportedDigests holds SHA-256 and each hasher reports its algorithm") {
                verifier in
                try Conformance.require(
                    verifier.supportedDigests.contains(.sha256),
                    "supportedDigests is \(verifier.supportedDigests.map(\.name).sorted()), without sha256"
                )
                for algorithm in verifier.supportedDigests {
                    let hasher = try verifier.makeHasher(for: algorithm)
                    try Conformance.require(
                        hasher.algorithm == algorithm,
                        "makeHasher(for: \(algorithm)) made a \(hasher.algorithm) hasher"
                    )
                    let digest = hasher.finalize()
                    try Conformance.require(
                        digest.algorithm == algorithm && digest.bytes.count == algorithm.byteCount,
                        "a \(algorithm) hasher returned \(digest)"
                    )
                }
            },
            check("known digests", "SHA-256 (and MD5 where supported) of published test vectors are exact") {
                verifier in
                for vector in Self.vectors {
                    var expected = [(DigestAlgorithm.sha256, vector.sha256)]
                    if verifier.supportedDigests.contains(.md5) { expected.append((.md5, vector.md5)) }
                    for (algorithm, hex) in expected {
                        let digest = try verifier.digest(of: Data(vector.message), using: algorithm)
                        try Conformance.require(
                            digest.hex == hex,
                            "\(algorithm) of \(vector.message.count) bytes is \(digest.hex), expected \(hex)"
                        )
                    }
                }
            },
            check(
                "incremental equals one-shot",
                "hashing in chunks of any size, empty ones included, equals hashing at once; interleaved hashers stay independent"
            ) { verifier in
                let data = Conformance.bytes(300_001, seed: 42)
                for algorithm in verifier.supportedDigests {
                    let whole = try verifier.digest(of: Data(data), using: algorithm)
                    let chunked = try verifier.makeHasher(for: algorithm)
                    let other = try verifier.makeHasher(for: algorithm)
                    var offset = 0
                    var size = 0
                    while offset < data.count {
                        let end = min(data.count, offset + size)
                        chunked.update(Data(data[offset..<end]))
                        other.update(Data(Array("noise".utf8)))
                        offset = end
                        size = (size * 7 + 13) % 65_537
                    }
                    let digest = chunked.finalize()
                    try Conformance.require(
                        digest == whole,
                        "\(algorithm) fed in chunks gives \(digest.hex), at once \(whole.hex)"
                    )
                    _ = other.finalize()
                }
            },
            check(
                "unknown digest refused",
                "makeHasher(for:) of an algorithm outside supportedDigests throws unsupported"
            ) { verifier in
                let unknown = DigestAlgorithm(name: "conformance-unknown", byteCount: 8)
                try await Conformance.expectError([.unsupported], "makeHasher(for: \(unknown))") {
                    try verifier.makeHasher(for: unknown)
                }
            },
            check("unknown scheme refused", "verify with a scheme the verifier lacks throws unsupported") { verifier in
                let key = PublicKey(
                    scheme: SignatureScheme(rawValue: "conformance-unknown"),
                    pem: signatures.first?.key.pem ?? "-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n"
                )
                try await Conformance.expectError([.unsupported], "verify with scheme 'conformance-unknown'") {
                    try verifier.verify(signature: Data(count: 64), of: Data("m".utf8), with: key)
                }
            },
        ]
        for vector in signatures { all += signatureChecks(vector) }
        if signatures.count > 1 {
            all.append(
                check("key ids differ", "different keys have different key ids") { verifier in
                    var seen: [String: String] = [:]
                    for vector in signatures {
                        let id = try verifier.keyID(of: vector.key)
                        if let other = seen[id], other != vector.key.pem {
                            throw Violation("two different keys have the key id \(id)")
                        }
                        seen[id] = vector.key.pem
                    }
                }
            )
        }
        return all
    }

    private func signatureChecks(_ vector: SignatureVector) -> [ConformanceCheck] {
        let others = signatures.filter { $0.key.scheme == vector.key.scheme && $0.key.pem != vector.key.pem }
        return [
            check("signature \(vector.name): valid accepted", "a valid signature verifies") { verifier in
                let valid = try verifier.verify(signature: vector.signature, of: vector.message, with: vector.key)
                try Conformance.require(valid, "verify returned false for a valid signature")
            },
            check(
                "signature \(vector.name): tampering refused",
                "a changed message, a changed or truncated signature, another key, never verify"
            ) { verifier in
                var message = vector.message
                if message.isEmpty { message.append(0) } else { message[message.startIndex] ^= 0x01 }
                var appended = vector.message
                appended.append(0)
                var signature = vector.signature
                if !signature.isEmpty { signature[signature.startIndex + signature.count / 2] ^= 0x10 }
                var attempts: [(String, Data, Data, PublicKey)] = [
                    ("a message with one bit changed", vector.signature, message, vector.key),
                    ("a message with a byte appended", vector.signature, appended, vector.key),
                    ("a signature with one bit changed", signature, vector.message, vector.key),
                    ("a truncated signature", vector.signature.dropLast(1), vector.message, vector.key),
                    ("an empty signature", Data(), vector.message, vector.key),
                ]
                for other in others {
                    attempts.append(("the key of '\(other.name)'", vector.signature, vector.message, other.key))
                }
                for (what, signature, message, key) in attempts {
                    do {
                        let valid = try verifier.verify(signature: signature, of: message, with: key)
                        try Conformance.require(!valid, "verify returned true for \(what)")
                    } catch let error as HotUpdateError where error.code == .signatureInvalid {
                        continue
                    } catch let error as HotUpdateError {
                        throw Violation(
                            "verify of \(what) threw \(error.code), expected false or signatureInvalid: \(error)"
                        )
                    }
                }
            },
            check(
                "signature \(vector.name): malformed key refused",
                "a PEM that holds no key throws signatureInvalid, in verify and keyID"
            ) { verifier in
                let garbage = PublicKey(
                    scheme: vector.key.scheme,
                    pem: "-----BEGIN PUBLIC KEY-----\nbm90IGEga2V5IGF0IGFsbA==\n-----END PUBLIC KEY-----\n"
                )
                try await Conformance.expectError([.signatureInvalid], "verify with a malformed key") {
                    try verifier.verify(signature: vector.signature, of: vector.message, with: garbage)
                }
                try await Conformance.expectError([.signatureInvalid], "keyID of a malformed key") {
                    try verifier.keyID(of: garbage)
                }
            },
            check(
                "signature \(vector.name): key id",
                "keyID is the 64-digit lowercase hex SHA-256 of the key's DER, the same every time"
            ) { verifier in
                let id = try verifier.keyID(of: vector.key)
                try Conformance.require(
                    id.utf8.count == 64 && id.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) },
                    "keyID is '\(id)', not 64 lowercase hex digits"
                )
                try Conformance.require(try verifier.keyID(of: vector.key) == id, "keyID changed between two calls")
                if let expected = vector.keyID {
                    try Conformance.require(id == expected.lowercased(), "keyID is \(id), expected \(expected)")
                }
            },
        ]
    }

    private func check(
        _ name: String,
        _ contract: String,
        _ body: @escaping @Sendable (any Verifier) async throws -> Void
    ) -> ConformanceCheck {
        let make = makeVerifier
        return ConformanceCheck(suite: Self.suite, name: name, contract: contract) { try await body(make()) }
    }
}
