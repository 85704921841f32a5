#if Curl && canImport(CHotCurl)
import CHotCurl
import Foundation
import HotCore

/// A ``TLSTrust`` as libcurl applies it to a handle, checked against this libcurl once, when
/// made: how `CurlTransport` speaks TLS on every request.
///
/// - The CA bundle: `CURLOPT_CAINFO` with `CURLOPT_CAPATH` cleared (only these CAs), or
///   `CURLOPT_CAINFO_BLOB` holding the system's bundle followed by the given one (both).
/// - Pins: `CURLOPT_PINNEDPUBLICKEY`, which libcurl checks on every connection it makes,
///   redirects included.
/// - `CURLOPT_SSLVERSION` at TLS 1.2 or the trust's minimum; peer and host always verified.
struct CurlTLS: Sendable {
    /// The trust applied.
    let trust: TLSTrust
    /// For ``TLSTrust/Authorities/systemAnd(bundle:)``: the system's bundle and the given one.
    private let combinedBundle: Data?

    private static let globalInit: CURLcode = hot_curl_global_init_all()

    /// The system's trust, which every libcurl with TLS honours: nothing to check.
    static let system = CurlTLS(unchecked: .system)

    private init(unchecked trust: TLSTrust) {
        self.trust = trust
        combinedBundle = nil
    }

    /// Checks that this libcurl can honour `trust`, and reads the bundles it needs.
    ///
    /// - Parameter trust: The trust to apply.
    /// - Throws: `HotUpdateError.Code.invalidArgument` for a CA bundle that cannot be read or
    ///   holds no certificate; `HotUpdateError.Code.unsupported` when this libcurl's TLS
    ///   backend cannot pin keys, take a bundle in memory or set the TLS version, or when the
    ///   system's bundle cannot be found to add to.
    init(trust: TLSTrust) throws {
        self.trust = trust
        try trust.validateBundle()
        guard Self.globalInit == CURLE_OK, let probe = curl_easy_init() else {
            throw HotUpdateError(.transportFailed, "libcurl could not initialise")
        }
        defer { curl_easy_cleanup(probe) }
        func require(_ code: CURLcode, _ what: String) throws {
            guard code == CURLE_OK else {
                throw HotUpdateError(
                    .unsupported,
                    "this libcurl cannot \(what): \(String(cString: curl_easy_strerror(code)))"
                )
            }
        }
        try require(
            hot_curl_setopt_long(probe, CURLOPT_SSLVERSION, Self.sslVersion(trust.minimumVersion)),
            "set a TLS floor"
        )
        if let pins = trust.curlPinnedPublicKey {
            try require(hot_curl_setopt_string(probe, CURLOPT_PINNEDPUBLICKEY, pins), "pin public keys")
        }
        if case .systemAnd(let bundle) = trust.authorities {
            var pointer: UnsafePointer<CChar>?
            guard hot_curl_getinfo_string(probe, CURLINFO_CAINFO, &pointer) == CURLE_OK, let pointer,
                let system = try? Data(contentsOf: URL(fileURLWithPath: String(cString: pointer)))
            else {
                throw HotUpdateError(
                    .unsupported,
                    "cannot find this libcurl's system CA bundle to add \(bundle) to; trust only the bundle instead",
                    subject: bundle
                )
            }
            var combined = system
            combined.append(contentsOf: Array("\n".utf8))
            combined.append(try Data(contentsOf: URL(fileURLWithPath: bundle)))
            combinedBundle = combined
            try Self.setBlob(probe, combined, require)
        } else {
            combinedBundle = nil
        }
    }

    private static func sslVersion(_ version: TLSTrust.Version) -> Int {
        switch version {
        case .tls12: Int(CURL_SSLVERSION_TLSv1_2)
        case .tls13: Int(CURL_SSLVERSION_TLSv1_3)
        }
    }

    private static func setBlob(
        _ handle: UnsafeMutableRawPointer,
        _ data: Data,
        _ check: (CURLcode, String) throws -> Void
    ) throws {
        var bytes = [UInt8](data)
        try bytes.withUnsafeMutableBytes { raw in
            try check(
                hot_curl_setopt_blob(handle, CURLOPT_CAINFO_BLOB, raw.baseAddress, raw.count),
                "take a CA bundle in memory"
            )
        }
    }

    /// Sets the TLS options of a request to `url` on `handle`, and the protocols a redirect may
    /// lead to: `https` only from an `https` URL.
    ///
    /// - Parameters:
    ///   - handle: A libcurl easy handle.
    ///   - url: The request's URL.
    ///   - check: Throws for a code other than `CURLE_OK`, naming what was set.
    func configure(
        _ handle: UnsafeMutableRawPointer,
        url: URL,
        check: (CURLcode, String) throws -> Void
    ) throws {
        try check(hot_curl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1), "CURLOPT_SSL_VERIFYPEER")
        try check(hot_curl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2), "CURLOPT_SSL_VERIFYHOST")
        try check(
            hot_curl_setopt_long(handle, CURLOPT_SSLVERSION, Self.sslVersion(trust.minimumVersion)),
            "the TLS floor"
        )
        switch trust.authorities {
        case .system:
            break
        case .only(let bundle):
            try check(hot_curl_setopt_string(handle, CURLOPT_CAINFO, bundle), "the CA bundle")
            try check(hot_curl_setopt_pointer(handle, CURLOPT_CAPATH, nil), "CURLOPT_CAPATH")
        case .systemAnd:
            if let combinedBundle { try Self.setBlob(handle, combinedBundle, check) }
        }
        if let pins = trust.curlPinnedPublicKey {
            try check(hot_curl_setopt_string(handle, CURLOPT_PINNEDPUBLICKEY, pins), "the pinned keys")
        }
        // Older libcurl lacks the string form; the transports also refuse a downgrade themselves.
        let https = url.scheme?.lowercased() == "https"
        _ = hot_curl_setopt_string(handle, CURLOPT_REDIR_PROTOCOLS_STR, https ? "https" : "http,https")
    }

    /// The failure a libcurl error is when TLS refused the server, nil otherwise.
    ///
    /// - Parameters:
    ///   - code: What `curl_easy_perform` returned.
    ///   - handle: The handle, for the certificate verification result.
    ///   - reason: libcurl's message.
    ///   - host: The host connected to, for the message.
    func failure(_ code: CURLcode, handle: UnsafeMutableRawPointer?, reason: String, host: String) -> HTTPFailure? {
        switch code {
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            let pins = trust.pins.map(\.description).sorted().joined(separator: ", ")
            return .tls(.pinMismatch, "the server's public key is not one of the pinned keys \(pins) (\(reason))")
        case CURLE_PEER_FAILED_VERIFICATION:
            var verify = 0
            if let handle { _ = hot_curl_getinfo_long(handle, CURLINFO_SSL_VERIFYRESULT, &verify) }
            let lowered = reason.lowercased()
            // OpenSSL's X509_V_ERR_CERT_NOT_YET_VALID (9), _CERT_HAS_EXPIRED (10),
            // _HOSTNAME_MISMATCH (62), _IP_ADDRESS_MISMATCH (64); other backends by their words.
            if verify == 9 || verify == 10 || lowered.contains("expired") || lowered.contains("not yet valid") {
                return .tls(.certificateExpired, "the server's certificate has expired or is not valid yet (\(reason))")
            }
            if verify == 62 || verify == 64 || lowered.contains("subject name") || lowered.contains("host name")
                || lowered.contains("hostname")
            {
                return .tls(.certificateHostMismatch, "the server's certificate is not for \(host) (\(reason))")
            }
            return .tls(
                .certificateUntrusted,
                "the server's certificate is not from a trusted certificate authority (trusting "
                    + "\(Self.describe(trust.authorities))): \(reason)"
            )
        case CURLE_SSL_CACERT_BADFILE:
            return .badURL("cannot use the CA bundle (\(trust.authorities.bundlePath ?? "the system's")): \(reason)")
        default:
            return nil
        }
    }

    private static func describe(_ authorities: TLSTrust.Authorities) -> String {
        switch authorities {
        case .system: "the system's CAs"
        case .only(let bundle): "only \(bundle)"
        case .systemAnd(let bundle): "the system's CAs and \(bundle)"
        }
    }
}
#endif
