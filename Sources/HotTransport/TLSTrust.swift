import Foundation
import HotCore

/// Whom an HTTP transport trusts over TLS: which certificate authorities, which server keys
/// (pins), and the oldest TLS version it speaks. Both HTTP transports take the same value.
///
/// - Certificate authorities: the system's (the default), a PEM bundle of your own instead of
///   them (``Authorities/only(bundle:)``, for a private CA), or a bundle added to them
///   (``Authorities/systemAnd(bundle:)``).
/// - Pins: the SHA-256 of the server certificate's DER SubjectPublicKeyInfo, written
///   `sha256//BASE64` as curl writes them (`curl --pinnedpubkey`). With pins, every connection
///   (to the manifest's host, a mirror, or where a redirect leads) must present a certificate
///   whose public key is one of them, on top of the certificate checks; pin the key you will
///   roll to next before you use it, so clients keep working across the change.
/// - TLS 1.2 is the floor whatever the value says; ``minimumVersion`` may raise it to 1.3.
///
/// A transport that cannot do a setting on its platform refuses to be created with it
/// (`HotUpdateError.Code.unsupported`), never skipping it: `URLSessionTransport` over
/// FoundationNetworking (Linux) has no server-trust hook, so it accepts only ``system``.
///
/// ```swift
/// let trust = try TLSTrust(
///     authorities: .only(bundle: "/etc/myapp/ca.pem"),
///     pins: ["sha256//l7BWAoDtYKWh6qG8RUklQ8iphq1aJbRoxCfrg8PogZE=",
///            "sha256//xsHJqchUPx5M2YAGTPFiXuthqQcDskZP/wOfIWglCLM="])  // the next key
/// let transport = try CurlTransport(trust: trust)
/// ```
public struct TLSTrust: Sendable, Hashable, CustomStringConvertible {
    /// The certificate authorities a server's chain must lead to.
    public enum Authorities: Sendable, Hashable {
        /// The system's trust store.
        case system
        /// Only the certificates of this PEM file (a private CA), not the system's.
        case only(bundle: String)
        /// The system's trust store and the certificates of this PEM file.
        case systemAnd(bundle: String)

        /// The PEM file named, if any.
        public var bundlePath: String? {
            switch self {
            case .system: nil
            case .only(let bundle), .systemAnd(let bundle): bundle
            }
        }
    }

    /// The oldest TLS version spoken; never below 1.2.
    public enum Version: String, Sendable, Hashable, CaseIterable, Comparable {
        /// TLS 1.2, the floor.
        case tls12 = "1.2"
        /// TLS 1.3.
        case tls13 = "1.3"

        public static func < (lhs: Version, rhs: Version) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// The certificate authorities trusted.
    public var authorities: Authorities
    /// The server keys accepted; empty for no pinning.
    public var pins: Set<SPKIPin>
    /// The oldest TLS version spoken.
    public var minimumVersion: Version

    /// The system's certificate authorities, no pins, TLS 1.2 or later: what a transport
    /// created without a trust uses.
    public static let system = TLSTrust(authorities: .system, pins: Set<SPKIPin>())

    /// Creates a trust.
    ///
    /// - Parameters:
    ///   - authorities: The certificate authorities, the system's by default.
    ///   - pins: The server keys accepted; none (no pinning) by default.
    ///   - minimumVersion: The oldest TLS version, 1.2 by default.
    public init(authorities: Authorities = .system, pins: Set<SPKIPin> = [], minimumVersion: Version = .tls12) {
        self.authorities = authorities
        self.pins = pins
        self.minimumVersion = minimumVersion
    }

    /// Creates a trust from pins written `sha256//BASE64`.
    ///
    /// - Parameters:
    ///   - authorities: The certificate authorities, the system's by default.
    ///   - pins: The pins, each `sha256//` and the base64 of 32 bytes.
    ///   - minimumVersion: The oldest TLS version, 1.2 by default.
    /// - Throws: `HotUpdateError.Code.invalidArgument` for a pin that is not one.
    public init(authorities: Authorities = .system, pins: [String], minimumVersion: Version = .tls12) throws {
        self.init(authorities: authorities, pins: Set(try pins.map(SPKIPin.init)), minimumVersion: minimumVersion)
    }

    /// Whether this is ``system``: nothing beyond what every transport does.
    public var isSystem: Bool { authorities == .system && pins.isEmpty && minimumVersion == .tls12 }

    /// The pins in curl's `CURLOPT_PINNEDPUBLICKEY` form, `sha256//A;sha256//B`, sorted; nil
    /// without pins.
    public var curlPinnedPublicKey: String? {
        pins.isEmpty ? nil : pins.map(\.description).sorted().joined(separator: ";")
    }

    public var description: String {
        var parts: [String] = []
        switch authorities {
        case .system: parts.append("the system's CAs")
        case .only(let bundle): parts.append("only the CAs of \(bundle)")
        case .systemAnd(let bundle): parts.append("the system's CAs and those of \(bundle)")
        }
        if !pins.isEmpty { parts.append("pinned to \(pins.map(\.description).sorted().joined(separator: ", "))") }
        parts.append("TLS \(minimumVersion.rawValue) or later")
        return parts.joined(separator: "; ")
    }

    /// Checks that the CA bundle, if any, is a readable PEM file holding certificates whose
    /// blocks decode (``PEMCertificates``, the reader the Apple platforms' anchors come from).
    ///
    /// - Throws: `HotUpdateError.Code.invalidArgument` naming the file and what is wrong.
    package func validateBundle() throws {
        guard let path = authorities.bundlePath else { return }
        _ = try PEMCertificates.read(path: path)
    }
}

/// The SHA-256 of a DER SubjectPublicKeyInfo: what a pin names, written `sha256//BASE64`.
///
/// Make one for a key with
/// `openssl pkey -in key.pem -pubout -outform der | openssl dgst -sha256 -binary | base64`,
/// or for a server's certificate with
/// `openssl x509 -in cert.pem -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64`.
///
/// ```swift
/// let pin = try SPKIPin("sha256//l7BWAoDtYKWh6qG8RUklQ8iphq1aJbRoxCfrg8PogZE=")
/// ```
public struct SPKIPin: Sendable, Hashable, CustomStringConvertible {
    /// The 32 bytes of the SHA-256.
    public let sha256: [UInt8]

    /// Creates a pin from its text.
    ///
    /// - Parameter text: `sha256//` followed by the base64 of the 32-byte SHA-256.
    /// - Throws: `HotUpdateError.Code.invalidArgument` when the text is not a pin.
    public init(_ text: String) throws {
        let prefix = "sha256//"
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasPrefix(prefix) else {
            throw HotUpdateError(
                .invalidArgument,
                "a pin is sha256// followed by the base64 of a SHA-256 of a SubjectPublicKeyInfo",
                subject: text
            )
        }
        guard let digest = Data(base64Encoded: String(trimmed.dropFirst(prefix.count))), digest.count == 32 else {
            throw HotUpdateError(
                .invalidArgument,
                "the pin's base64 is not 32 bytes (a SHA-256)",
                subject: text
            )
        }
        sha256 = [UInt8](digest)
    }

    /// Creates a pin from a SHA-256 digest.
    ///
    /// - Parameter sha256: The 32 bytes of the SHA-256 of a DER SubjectPublicKeyInfo.
    /// - Throws: `HotUpdateError.Code.invalidArgument` when it is not 32 bytes.
    public init(sha256: some Sequence<UInt8>) throws {
        let bytes = [UInt8](sha256)
        guard bytes.count == 32 else {
            throw HotUpdateError(.invalidArgument, "a SHA-256 pin is 32 bytes, not \(bytes.count)")
        }
        self.sha256 = bytes
    }

    /// `sha256//BASE64`.
    public var description: String { "sha256//" + Data(sha256).base64EncodedString() }
}
