#if os(Linux) || os(macOS)
import Foundation
import HotCore

/// A private certificate authority for TLS tests, made with the `openssl` command line in a
/// directory of its own, and the server certificates it issues: for 127.0.0.1 and
/// `localhost`, for another host, expired.
///
/// ```swift
/// let authority = try TestCertificateAuthority.make()
/// let server = try authority.issue("server", hosts: ["127.0.0.1", "localhost"])
/// let nginx = try await NginxServer.start(root: repo, options: .init(tls: .init(server)))
/// let transport = try CurlTransport(trust: TLSTrust(authorities: .only(bundle: authority.certificate.path)))
/// ```
public struct TestCertificateAuthority: Sendable {
    /// A certificate the authority issued, its key and the pin of that key.
    public struct Issued: Sendable, Hashable {
        /// The certificate, PEM.
        public var certificate: URL
        /// Its private key, PEM.
        public var key: URL
        /// The SHA-256 of its DER SubjectPublicKeyInfo, `sha256//BASE64`, as `openssl` computes it.
        public var pin: String
    }

    /// How long an issued certificate is valid.
    public enum Validity: Sendable, Hashable {
        /// From now, for 30 days.
        case current
        /// One day in January 2020: long expired (made with `faketime`).
        case expired
    }

    /// The directory holding the authority's files and the certificates it issued.
    public let directory: URL
    /// The authority's certificate, PEM: the bundle a client trusts.
    public let certificate: URL
    /// The authority's private key, PEM.
    public let key: URL

    /// The environment variable naming a directory that holds an authority made before the
    /// tests (`scripts/make-test-ca` writes it, and `scripts/test` runs that first):
    /// `ca.pem`, `ca.key`, and `loopback.pem`, `loopback.key` and `loopback.pin` for a
    /// certificate of 127.0.0.1 and `localhost`.
    public static let environmentVariable = "HOT_TEST_CA"

    /// The authority shared by every test of this process: the one made before the tests
    /// (``environmentVariable``), read without running anything; else made once, on first use.
    public static func shared() throws -> TestCertificateAuthority {
        try sharedAuthority.get()
    }

    private static let sharedAuthority = Result {
        if let directory = premade { return try load(directory) }
        return try make()
    }

    /// A certificate of the ``shared()`` authority for `127.0.0.1` and `localhost`: the one
    /// made before the tests, else made once, on first use.
    public static func sharedLoopback() throws -> Issued {
        try sharedLoopbackCertificate.get()
    }

    private static let sharedLoopbackCertificate = Result {
        if let directory = premade {
            let pin = try String(contentsOf: directory.appendingPathComponent("loopback.pin"), encoding: .utf8)
            return Issued(
                certificate: directory.appendingPathComponent("loopback.pem"),
                key: directory.appendingPathComponent("loopback.key"),
                pin: pin.trimmingCharacters(in: .whitespacesAndNewlines)
            )
        }
        return try shared().issue("loopback", hosts: ["127.0.0.1", "localhost"])
    }

    /// The directory of an authority made before the tests, when ``environmentVariable`` names one.
    private static var premade: URL? {
        guard let path = ProcessInfo.processInfo.environment[environmentVariable], !path.isEmpty else { return nil }
        return URL(fileURLWithPath: path, isDirectory: true)
    }

    /// The authority whose files `directory` holds (`ca.pem`, `ca.key`).
    ///
    /// - Throws: `HotUpdateError.Code.notFound` when a file is missing.
    public static func load(_ directory: URL) throws -> TestCertificateAuthority {
        let authority = TestCertificateAuthority(
            directory: directory,
            certificate: directory.appendingPathComponent("ca.pem"),
            key: directory.appendingPathComponent("ca.key")
        )
        for file in [authority.certificate, authority.key, directory.appendingPathComponent("loopback.pin")]
        where !FileManager.default.fileExists(atPath: file.path) {
            throw HotUpdateError(
                .notFound,
                "\(environmentVariable) names \(directory.path), which lacks \(file.lastPathComponent) (scripts/make-test-ca makes it)"
            )
        }
        return authority
    }

    /// Makes a new authority (an EC P-256 key and a self-signed CA certificate) in a fresh
    /// temporary directory.
    ///
    /// - Parameter name: The authority's common name.
    /// - Throws: `HotUpdateError.Code.notFound` when `openssl` is missing,
    ///   `HotUpdateError.Code.internalInconsistency` when it fails (its error quoted).
    public static func make(name: String = "HotUpdate Test CA") throws -> TestCertificateAuthority {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hot-ca-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let authority = TestCertificateAuthority(
            directory: directory,
            certificate: directory.appendingPathComponent("ca.pem"),
            key: directory.appendingPathComponent("ca.key")
        )
        // `req -x509` marks the certificate a CA (openssl.cnf's v3_ca: basicConstraints CA:TRUE).
        try openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", authority.key.path, "-out", authority.certificate.path, "-days", "3650",
            "-subj", "/CN=\(name)",
        ])
        return authority
    }

    /// Issues a server certificate for `hosts` (IP addresses and DNS names in its
    /// subjectAltName), with a new key.
    ///
    /// - Parameters:
    ///   - name: The files' base name in ``directory``.
    ///   - hosts: The hosts it is valid for, such as `["127.0.0.1", "localhost"]`.
    ///   - validity: Now for 30 days, or long expired.
    /// - Returns: The certificate, its key and its pin.
    public func issue(_ name: String, hosts: [String], validity: Validity = .current) throws -> Issued {
        let key = directory.appendingPathComponent("\(name).key")
        let request = directory.appendingPathComponent("\(name).csr")
        let certificate = directory.appendingPathComponent("\(name).pem")
        let extensions = directory.appendingPathComponent("\(name).ext")
        let names = hosts.map { host in
            host.allSatisfy({ $0.isNumber || $0 == "." || $0 == ":" }) ? "IP:\(host)" : "DNS:\(host)"
        }
        try Data(
            ("subjectAltName=\(names.joined(separator: ","))\nbasicConstraints=CA:FALSE\n"
                + "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n").utf8
        ).write(to: extensions)
        try Self.openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key.path, "-out", request.path, "-subj", "/CN=\(hosts.first ?? name)",
        ])
        var arguments = [
            "x509", "-req", "-in", request.path, "-CA", self.certificate.path, "-CAkey", self.key.path,
            "-set_serial", String(UInt32.random(in: 1...UInt32.max)), "-extfile", extensions.path,
            "-out", certificate.path,
        ]
        switch validity {
        case .current:
            try Self.openssl(arguments + ["-days", "30"])
        case .expired:
            arguments = ["2020-01-01 00:00:00", try Self.which("openssl")] + arguments + ["-days", "1"]
            try Self.run(try Self.which("faketime", package: "faketime"), arguments)
        }
        return Issued(certificate: certificate, key: key, pin: try Self.pin(ofCertificate: certificate))
    }

    /// The pin of a PEM certificate's key, `sha256//BASE64`, computed by `openssl`.
    public static func pin(ofCertificate certificate: URL) throws -> String {
        let publicKey = try openssl(["x509", "-in", certificate.path, "-pubkey", "-noout"]).standardOutput
        let der = try run(which("openssl"), ["pkey", "-pubin", "-outform", "der"], stdin: publicKey).standardOutput
        let digest = try run(which("openssl"), ["dgst", "-sha256", "-binary"], stdin: der).standardOutput
        return "sha256//" + digest.base64EncodedString()
    }

    /// A fresh key's pin, for a key no server uses (a wrong pin, or a backup pin).
    public func unusedPin() throws -> String {
        let key = directory.appendingPathComponent("unused-\(UUID().uuidString).key")
        try Self.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key.path])
        let der = try Self.openssl(["pkey", "-in", key.path, "-pubout", "-outform", "der"]).standardOutput
        let digest = try Self.run(Self.which("openssl"), ["dgst", "-sha256", "-binary"], stdin: der).standardOutput
        return "sha256//" + digest.base64EncodedString()
    }

    /// Removes the authority's directory.
    public func remove() {
        try? FileManager.default.removeItem(at: directory)
    }

    // MARK: - Running openssl

    @discardableResult
    private static func openssl(_ arguments: [String]) throws -> Subprocess.Output {
        try run(which("openssl"), arguments)
    }

    @discardableResult
    private static func run(
        _ executable: String,
        _ arguments: [String],
        stdin: Data? = nil
    ) throws
        -> Subprocess.Output
    {
        let output = try Subprocess.runBlocking(executable, arguments, in: nil, stdin: stdin)
        guard output.status == 0 else {
            throw HotUpdateError(
                .internalInconsistency,
                "\(executable) \(arguments.prefix(2).joined(separator: " ")) failed: \(output.stderr)"
            )
        }
        return output
    }

    /// The path of a tool on `PATH`.
    private static func which(_ tool: String, package: String = "openssl") throws -> String {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
            + ["/usr/bin", "/usr/local/bin", "/opt/homebrew/bin"]
        {
            let candidate = "\(directory)/\(tool)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw HotUpdateError(
            .notFound,
            "\(tool) is not installed; the TLS tests need it: install it with `apt-get install \(package)` "
                + "(Debian, Ubuntu) or `brew install \(package)` (macOS)",
            subject: tool
        )
    }
}
#endif
