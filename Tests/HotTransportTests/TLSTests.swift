import Foundation
import HotCore
import HotTestServers
import HotTesting
import HotTransport
import HotVerify
import Testing

#if (Curl && canImport(CHotCurl)) || canImport(Security)
/// The HTTP transports that can take a trust of their own here: CurlTransport, and
/// URLSessionTransport where the Security framework evaluates trust (Apple platforms);
/// FoundationNetworking has no hook for it, which ``urlSessionRefusesTrustItCannotHonour`` shows.
enum TrustingTransport: String, CaseIterable, CustomTestStringConvertible, Sendable {
    #if Curl && canImport(CHotCurl)
    case curl
    #endif
    #if canImport(Security)
    case urlSession
    #endif

    var testDescription: String { rawValue }

    func make(_ trust: TLSTrust, options: HTTPTransportOptions = HTTPTransportOptions()) throws -> any Transport {
        switch self {
        #if Curl && canImport(CHotCurl)
        case .curl: try CurlTransport(options: options, trust: trust)
        #endif
        #if canImport(Security)
        case .urlSession: try URLSessionTransport(options: options, trust: trust)
        #endif
        }
    }
}

/// A private CA, the certificates it issued, and a directory of files to serve.
struct TLSFixture {
    let authority: TestCertificateAuthority
    let loopback: TestCertificateAuthority.Issued
    let scratch: Scratch
    let payload: Data

    init() throws {
        authority = try TestCertificateAuthority.shared()
        loopback = try TestCertificateAuthority.sharedLoopback()
        scratch = try Scratch()
        payload = try scratch.randomFile("file.bin", count: 300_000)
    }

    /// Only the private CA.
    var privateCA: TLSTrust { TLSTrust(authorities: .only(bundle: authority.certificate.path)) }

    /// The private CA and pins.
    func pinned(_ pins: [String]) throws -> TLSTrust {
        try TLSTrust(authorities: .only(bundle: authority.certificate.path), pins: pins)
    }

    /// Runs `body` against nginx serving the files over TLS with `certificate`.
    func withServer<T>(
        _ certificate: TestCertificateAuthority.Issued? = nil,
        locations: [NginxServer.Location] = [],
        keepAliveSeconds: Int = 5,
        _ body: (NginxServer) async throws -> T
    ) async throws -> T {
        let server = try await NginxServer.start(
            root: scratch.url,
            options: .init(
                locations: locations,
                tls: .init(certificate ?? loopback),
                keepAliveSeconds: keepAliveSeconds
            )
        )
        do {
            let result = try await body(server)
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }

    /// Fetches `file.bin` from `server` and returns its bytes, or throws.
    func fetch(_ transport: any Transport, from base: URL) async throws -> Data {
        let (response, data) = try await fetchAll(
            transport,
            TransportRequest(url: base.appendingPathComponent("file.bin"), maxBytes: 1 << 20)
        )
        try response.requireSuccess()
        return data
    }
}

@Suite("HTTPS: private CAs, pins, refusals")
struct TLSTests {
    @Test("a private CA's server is accepted only with its bundle", arguments: TrustingTransport.allCases)
    func privateCA(_ kind: TrustingTransport) async throws {
        let fixture = try TLSFixture()
        defer { fixture.scratch.remove() }
        try await fixture.withServer { server in
            let refused = await hotError { _ = try await fixture.fetch(try kind.make(.system), from: server.baseURL) }
            #expect(refused?.code == .certificateUntrusted, "\(String(describing: refused))")
            let onlyPrivate = try await fixture.fetch(try kind.make(fixture.privateCA), from: server.baseURL)
            #expect(onlyPrivate == fixture.payload)
            let both = TLSTrust(authorities: .systemAnd(bundle: fixture.authority.certificate.path))
            let withSystem = try await fixture.fetch(try kind.make(both), from: server.baseURL)
            #expect(withSystem == fixture.payload)
            // The certificate names localhost too.
            let byName = try await fixture.fetch(try kind.make(fixture.privateCA), from: server.url(host: "localhost"))
            #expect(byName == fixture.payload)
        }
    }

    @Test(
        "an unknown CA, another host's certificate, an expired one and a wrong pin: each its own code",
        arguments: TrustingTransport.allCases
    )
    func refusals(_ kind: TrustingTransport) async throws {
        let fixture = try TLSFixture()
        defer { fixture.scratch.remove() }
        let stranger = try TestCertificateAuthority.make(name: "Unknown CA")
        defer { stranger.remove() }
        let cases: [(String, TestCertificateAuthority.Issued, TLSTrust, HotUpdateError.Code)] = [
            (
                "unknown CA", try stranger.issue("stranger", hosts: ["127.0.0.1", "localhost"]), fixture.privateCA,
                .certificateUntrusted
            ),
            (
                "another host", try fixture.authority.issue("other", hosts: ["other.example", "10.9.8.7"]),
                fixture.privateCA, .certificateHostMismatch
            ),
            (
                "expired", try fixture.authority.issue("expired", hosts: ["127.0.0.1"], validity: .expired),
                fixture.privateCA, .certificateExpired
            ),
            ("wrong pin", fixture.loopback, try fixture.pinned([try fixture.authority.unusedPin()]), .pinMismatch),
        ]
        for (name, certificate, trust, code) in cases {
            try await fixture.withServer(certificate) { server in
                let error = await hotError { _ = try await fixture.fetch(try kind.make(trust), from: server.baseURL) }
                #expect(error?.code == code, "\(name): \(String(describing: error))")
                // The refusal comes before any request: nginx saw none.
                #expect(server.requestCount(for: "/file.bin") == 0, "\(name)")
            }
        }
    }

    @Test("the server's key pinned, alone or with the next key, is accepted", arguments: TrustingTransport.allCases)
    func rightPin(_ kind: TrustingTransport) async throws {
        let fixture = try TLSFixture()
        defer { fixture.scratch.remove() }
        try await fixture.withServer { server in
            for pins in [[fixture.loopback.pin], [try fixture.authority.unusedPin(), fixture.loopback.pin]] {
                let transport = try kind.make(try fixture.pinned(pins))
                let fetched = try await fixture.fetch(transport, from: server.baseURL)
                #expect(fetched == fixture.payload, "\(pins)")
            }
            // A pin replaces no certificate check: pinned, but the CA unknown, it is still refused.
            let error = await hotError {
                _ = try await fixture.fetch(
                    try kind.make(try TLSTrust(pins: [fixture.loopback.pin])),
                    from: server.baseURL
                )
            }
            #expect(error?.code == .certificateUntrusted)
        }
    }

    @Test("a redirect from https to http is refused; to https on another server, the pins still apply")
    func redirects() async throws {
        for kind in TrustingTransport.allCases {
            let fixture = try TLSFixture()
            defer { fixture.scratch.remove() }
            let plain = try await NginxServer.start(root: fixture.scratch.url)
            let other = try fixture.authority.issue("redirected", hosts: ["127.0.0.1"])
            let elsewhere = try await NginxServer.start(root: fixture.scratch.url, options: .init(tls: .init(other)))
            let locations: [NginxServer.Location] = [
                .redirect(from: "/down.bin", to: plain.baseURL.appendingPathComponent("file.bin").absoluteString),
                .redirect(from: "/across.bin", to: elsewhere.baseURL.appendingPathComponent("file.bin").absoluteString),
            ]
            try await fixture.withServer(locations: locations) { server in
                let down = await hotError {
                    _ = try await fetchAll(
                        try kind.make(fixture.privateCA),
                        TransportRequest(url: server.baseURL.appendingPathComponent("down.bin"))
                    )
                }
                #expect(down?.code == .insecureRedirect, "\(kind): \(String(describing: down))")
                #expect(plain.requestCount(for: "/file.bin") == 0)

                let across = TransportRequest(url: server.baseURL.appendingPathComponent("across.bin"))
                let (response, data) = try await fetchAll(try kind.make(fixture.privateCA), across)
                #expect(response.statusCode == 200 && data == fixture.payload)
                let pinned = await hotError {
                    _ = try await fetchAll(try kind.make(try fixture.pinned([fixture.loopback.pin])), across)
                }
                #expect(pinned?.code == .pinMismatch, "\(kind): \(String(describing: pinned))")
            }
            await plain.stop()
            await elsewhere.stop()
        }
    }

    @Test("a mirror is held to the same pins", arguments: TrustingTransport.allCases)
    func mirrors(_ kind: TrustingTransport) async throws {
        let fixture = try TLSFixture()
        defer { fixture.scratch.remove() }
        let other = try fixture.authority.issue("mirror", hosts: ["127.0.0.1"])
        try await fixture.withServer(other) { mirror in
            try await fixture.withServer(locations: [.status(503, at: "/file.bin")]) { primary in
                let mirrors = [primary.baseURL, mirror.baseURL]
                let open = MirroredTransport(mirrors: mirrors, transport: try kind.make(fixture.privateCA))
                let fetched = try await fixture.fetch(open, from: primary.baseURL)
                #expect(fetched == fixture.payload)

                let pinned = MirroredTransport(
                    mirrors: mirrors,
                    transport: try kind.make(try fixture.pinned([fixture.loopback.pin]))
                )
                let error = await hotError { _ = try await fixture.fetch(pinned, from: primary.baseURL) }
                #expect(error?.code == .pinMismatch, "\(String(describing: error))")
            }
        }
    }

    @Test("a download resumes with a range over TLS", arguments: TrustingTransport.allCases)
    func resume(_ kind: TrustingTransport) async throws {
        let fixture = try TLSFixture()
        defer { fixture.scratch.remove() }
        try await fixture.withServer { server in
            let transport = try kind.make(fixture.privateCA)
            let url = server.baseURL.appendingPathComponent("file.bin")
            let cut = await hotError {
                _ = try await fetchAll(transport, TransportRequest(url: url, maxBytes: 100_000))
            }
            #expect(cut?.code == .byteLimitExceeded)
            let (response, rest) = try await fetchAll(
                transport,
                TransportRequest(url: url, range: TransportRequest.ByteRange(start: 100_000))
            )
            #expect(response.statusCode == 206)
            #expect(rest == fixture.payload.suffix(from: 100_000))
        }
    }

    #if Curl && canImport(CHotCurl)
    @Test("CurlTransport's requests share one TLS connection")
    func connectionReuse() async throws {
        let fixture = try TLSFixture()
        defer { fixture.scratch.remove() }
        // nginx keeps the idle connection longer than a loaded machine may take between requests.
        try await fixture.withServer(keepAliveSeconds: 600) { server in
            let transport = try CurlTransport(trust: fixture.privateCA)
            for _ in 0..<3 {
                let fetched = try await fixture.fetch(transport, from: server.baseURL)
                #expect(fetched == fixture.payload)
            }
            let requests = await server.waitForRequests(path: "/file.bin", count: 3)
            #expect(requests.count == 3)
            #expect(Set(requests.map(\.connection)).count == 1, "\(requests)")
        }
    }

    @Test("CurlTransport refuses a CA bundle that is not one, at creation")
    func badBundle() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let notPEM = scratch.url.appendingPathComponent("ca.pem")
        try Data("not a certificate".utf8).write(to: notPEM)
        for path in [notPEM.path, scratch.url.appendingPathComponent("missing.pem").path] {
            #expect(throws: HotUpdateError(.invalidArgument, "")) {
                _ = try CurlTransport(trust: TLSTrust(authorities: .only(bundle: path)))
            }
        }
    }
    #endif
}
#endif

@Suite("TLS settings: pins, the SPKI decision, what URLSession can honour")
struct PinCheckTests {
    @Test("URLSessionTransport refuses at creation what its platform cannot honour")
    func urlSessionRefusesTrustItCannotHonour() throws {
        let authority = try TestCertificateAuthority.shared()
        let loopback = try TestCertificateAuthority.sharedLoopback()
        _ = try URLSessionTransport(trust: .system)
        let privateCA = TLSTrust(authorities: .only(bundle: authority.certificate.path))
        for trust in [privateCA, try TLSTrust(pins: [loopback.pin])] {
            #if canImport(FoundationNetworking)
            #expect(throws: HotUpdateError(.unsupported, "")) { _ = try URLSessionTransport(trust: trust) }
            #else
            _ = try URLSessionTransport(trust: trust)
            #endif
        }
    }

    @Test("pins parse as curl writes them, and nothing else does")
    func parsing() throws {
        let digest = [UInt8](repeating: 7, count: 32)
        let text = "sha256//" + Data(digest).base64EncodedString()
        #expect(try SPKIPin(text).sha256 == digest)
        #expect(try SPKIPin(text).description == text)
        for bad in [
            "", Data(digest).base64EncodedString(), "sha1//" + Data(digest).base64EncodedString(),
            "sha256//" + Data(digest.prefix(31)).base64EncodedString(), "sha256//!!!",
        ] {
            #expect(throws: HotUpdateError(.invalidArgument, ""), "\(bad)") { _ = try SPKIPin(bad) }
        }
        let trust = try TLSTrust(pins: [text, text])
        #expect(trust.pins.count == 1 && trust.curlPinnedPublicKey == text)
    }

    @Test("the SubjectPublicKeyInfo and its pin are openssl's; the decision accepts exactly the pinned keys")
    func decision() async throws {
        let authority = try TestCertificateAuthority.shared()
        let loopback = try TestCertificateAuthority.sharedLoopback()
        for issued in [loopback, try authority.issue("pin-check", hosts: ["localhost"])] {
            let certificate = try PEMCertificates.read(path: issued.certificate.path)
            #expect(certificate.count == 1)
            let spki = try PinCheck.subjectPublicKeyInfo(ofCertificate: try #require(certificate.first))
            let publicKey = try await Subprocess.check(
                "openssl",
                ["x509", "-in", issued.certificate.path, "-pubkey", "-noout"]
            ).standardOutput
            let der = try await Subprocess.check("openssl", ["pkey", "-pubin", "-outform", "der"], stdin: publicKey)
            #expect(Array(spki) == [UInt8](der.standardOutput))

            let verifier = CryptoVerifier()
            let sha256: (ArraySlice<UInt8>) -> [UInt8] = { bytes in
                (try? verifier.digest(of: Data(bytes), using: .sha256).bytes) ?? []
            }
            let leaf = try #require(certificate.first)
            #expect(try PinCheck.pin(ofCertificate: leaf, sha256: sha256).description == issued.pin)
            try PinCheck.evaluate(leafCertificate: leaf, pins: [try SPKIPin(issued.pin)], host: "h", sha256: sha256)
            try PinCheck.evaluate(leafCertificate: leaf, pins: [], host: "h", sha256: sha256)
            let other = try SPKIPin(try authority.unusedPin())
            #expect(throws: HotUpdateError(.pinMismatch, "")) {
                try PinCheck.evaluate(leafCertificate: leaf, pins: [other], host: "h", sha256: sha256)
            }
            try PinCheck.evaluate(
                leafCertificate: leaf,
                pins: [other, try SPKIPin(issued.pin)],
                host: "h",
                sha256: sha256
            )
        }
        #expect(throws: HotUpdateError(.invalidArgument, "")) {
            _ = try PinCheck.subjectPublicKeyInfo(ofCertificate: [0x30, 0x03, 0x02, 0x01])
        }
    }

    @Test("a redirect is a downgrade only from https to http")
    func downgrade() throws {
        let pairs: [(String, String, Bool)] = [
            ("https://a/x", "http://a/y", true), ("HTTPS://a/x", "HTTP://b/y", true),
            ("https://a/x", "https://b/y", false), ("http://a/x", "http://b/y", false),
            ("http://a/x", "https://b/y", false),
        ]
        for (from, to, downgrade) in pairs {
            let source = try #require(URL(string: from))
            #expect(source.isDowngrade(to: try #require(URL(string: to))) == downgrade, "\(from) → \(to)")
        }
    }
}
