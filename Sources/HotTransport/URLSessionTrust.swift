#if canImport(Security) && canImport(CryptoKit)
import CryptoKit
import Foundation
import HotCore
import Security

/// The server-trust challenge of `URLSessionTransport` on Apple platforms: the Security
/// framework evaluates the chain (against the trust's CA bundle as anchors when it has one),
/// then ``PinCheck`` compares the leaf's key with the pins, with CryptoKit's SHA-256.
extension SessionTransfer {
    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        guard challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust,
            let serverTrust = challenge.protectionSpace.serverTrust
        else {
            completionHandler(.performDefaultHandling, nil)
            return
        }
        guard !trust.isSystem else {
            completionHandler(.performDefaultHandling, nil)
            return
        }
        if let failure = evaluate(serverTrust, host: challenge.protectionSpace.host) {
            fail(failure, cancelTask: false)
            completionHandler(.cancelAuthenticationChallenge, nil)
        } else {
            completionHandler(.useCredential, URLCredential(trust: serverTrust))
        }
    }

    /// Why the server is refused, or nil when it is trusted.
    private func evaluate(_ serverTrust: SecTrust, host: String) -> HTTPFailure? {
        let certificates = anchors.compactMap { SecCertificateCreateWithData(nil, Data($0) as CFData) }
        if !certificates.isEmpty {
            SecTrustSetAnchorCertificates(serverTrust, certificates as CFArray)
            var only = false
            if case .only = trust.authorities { only = true }
            SecTrustSetAnchorCertificatesOnly(serverTrust, only)
        }
        SecTrustSetPolicies(serverTrust, SecPolicyCreateSSL(true, host as CFString))
        var error: CFError?
        guard SecTrustEvaluateWithError(serverTrust, &error) else {
            let code = error.map { CFErrorGetCode($0) } ?? 0
            let reason = error.map { CFErrorCopyDescription($0) as String } ?? "the system refused the certificate"
            switch OSStatus(truncatingIfNeeded: code) {
            case errSecCertificateExpired, errSecCertificateNotValidYet:
                return .tls(.certificateExpired, "the server's certificate has expired or is not valid yet (\(reason))")
            case errSecHostNameMismatch:
                return .tls(.certificateHostMismatch, "the server's certificate is not for \(host) (\(reason))")
            default:
                return .tls(
                    .certificateUntrusted,
                    "the server's certificate is not from a trusted certificate authority: \(reason)"
                )
            }
        }
        guard !trust.pins.isEmpty else { return nil }
        guard let chain = SecTrustCopyCertificateChain(serverTrust) as? [SecCertificate], let leaf = chain.first else {
            return .tls(.pinMismatch, "the server presented no certificate to compare with the pins")
        }
        do {
            try PinCheck.evaluate(
                leafCertificate: [UInt8](SecCertificateCopyData(leaf) as Data),
                pins: trust.pins,
                host: host,
                sha256: { Array(SHA256.hash(data: Data($0))) }
            )
            return nil
        } catch let error as HotUpdateError {
            return .tls(error.code, error.message)
        } catch {
            return .tls(.pinMismatch, "the server's key could not be compared with the pins: \(error)")
        }
    }
}
#endif
