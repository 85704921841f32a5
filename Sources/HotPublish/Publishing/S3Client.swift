import Foundation
import HotCore
import HotTransport
import HotVerify

/// One S3 request: the method, the object's key (nil for the bucket) with its query, the
/// headers and a body held in memory (a whole small file or one part of a large one).
package struct S3Request: Sendable {
    package var method: String
    package var key: String?
    /// Query parameters; sorted and encoded the way SigV4's canonical request wants them.
    package var query: [(String, String)] = []
    package var headers: [String: String] = [:]
    package var body: Data?

    package init(
        _ method: String,
        key: String?,
        query: [(String, String)] = [],
        headers: [String: String] = [:],
        body: Data? = nil
    ) {
        self.method = method
        self.key = key
        self.query = query
        self.headers = headers
        self.body = body
    }
}

/// What S3 answered.
package struct S3Response: Sendable {
    package var status: Int
    /// Header names in lowercase.
    package var headers: [String: String]
    package var body: Data

    package var isSuccess: Bool { (200..<300).contains(status) }
    package var text: String { String(decoding: body, as: UTF8.self) }
    /// The `ETag` without its quotes.
    package var etag: String? { headers["etag"].map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) } }
}

/// A small S3 client over a `Transport`: a `CurlTransport` that signs every request with
/// libcurl's own AWS SigV4 (`HTTPTransportOptions.awsSigV4`, `CURLOPT_AWS_SIGV4`).
///
/// What libcurl 7.88 signs, measured against botocore's signer: the method, the path as
/// given, the query as given (it does not sort it, and signs `?uploads` as `uploads` where
/// S3 expects `uploads=`), `host`, `x-amz-date` and every header the request sets — also one
/// set to nothing to suppress it, such as `Expect:`, which is then signed but not sent (the
/// transport suppresses none when signing), and a `User-Agent` header, which botocore never
/// signs (the transport sets its own apart, unsigned). So this client writes paths and
/// queries already canonical (AWS's URI encoding, parameters sorted, `name=` for flags),
/// never suppresses a header, and sends `x-amz-content-sha256` with the body's SHA-256,
/// which libcurl takes as the payload hash. A body gets a `Content-Type` (`application/octet-stream` unless the
/// request names one): libcurl labels one without a type as a form, which a store may parse
/// and so lose (moto does).
package struct S3Client: Sendable {
    package let endpoint: S3Endpoint
    /// Sends every request, signed: whom TLS trusts (the system's CAs, a private CA, pins)
    /// and the credentials are the transport's.
    package let transport: any Transport
    /// Attempts per request for connection failures and 5xx answers.
    package var attempts = 3

    /// S3's answers are small documents: a longer body is refused.
    package static let answerLimit: Int64 = 64 << 20
    /// Connecting may take 15 s; a transfer stalled (under 1 byte a second) for 60 s fails.
    package static let timeouts = TransportRequest.Timeouts(
        connect: .seconds(15),
        lowSpeedWindow: .seconds(60),
        lowSpeedBytesPerSecond: 1
    )

    /// A client sending through `transport`, which must sign (``init(endpoint:credentials:region:trust:)``).
    package init(endpoint: S3Endpoint, transport: any Transport) {
        self.endpoint = endpoint
        self.transport = transport
    }

    #if Curl && canImport(CHotCurl)
    /// A client over a `CurlTransport` signing with `credentials` for `region`.
    ///
    /// - Parameter trust: Whom TLS trusts for an https endpoint.
    /// - Throws: `HotUpdateError` when the trust cannot be honoured (see `CurlTransport`).
    package init(endpoint: S3Endpoint, credentials: S3Credentials, region: String, trust: TLSTrust) throws {
        var options = HTTPTransportOptions()
        options.awsSigV4 = HTTPTransportOptions.AWSSigV4(
            region: region,
            accessKeyID: credentials.accessKeyID,
            secretAccessKey: credentials.secretAccessKey,
            sessionToken: credentials.sessionToken
        )
        self.init(endpoint: endpoint, transport: try CurlTransport(options: options, trust: trust))
    }
    #endif

    /// Sends a request, retrying connection failures and 5xx answers with a short backoff.
    package func send(_ request: S3Request) async throws -> S3Response {
        var attempt = 1
        while true {
            do {
                let response = try await sendOnce(request)
                if response.status >= 500, attempt < attempts {
                    attempt += 1
                    try await Task.sleep(for: .milliseconds(200 * attempt))
                    continue
                }
                return response
            } catch let error as HotUpdateError where error.code == .transportFailed && attempt < attempts {
                attempt += 1
                try await Task.sleep(for: .milliseconds(200 * attempt))
            }
        }
    }

    /// Sends a request and throws ``HotUpdateError/Code/httpStatus`` with S3's message unless it succeeds.
    package func require(_ request: S3Request, _ what: @autoclosure () -> String) async throws -> S3Response {
        let response = try await send(request)
        guard response.isSuccess, !Self.isErrorDocument(response) else {
            throw HotUpdateError(
                .httpStatus,
                "\(what()): HTTP \(response.status) \(S3XML.errorSummary(response.text))",
                subject: request.key.map { endpoint.describe(key: $0) }
            )
        }
        return response
    }

    /// CompleteMultipartUpload may answer 200 with an error document.
    private static func isErrorDocument(_ response: S3Response) -> Bool {
        response.body.count < 4096 && response.text.contains("<Error>")
    }

    private func sendOnce(_ request: S3Request) async throws -> S3Response {
        let address = endpoint.url(key: request.key, query: request.query)
        guard let url = URL(string: address) else {
            throw HotUpdateError(.invalidArgument, "not a URL", subject: address)
        }
        var headers = request.headers
        headers["x-amz-content-sha256"] = try CryptoVerifier().digest(of: request.body ?? Data(), using: .sha256).hex
        if request.body != nil, !headers.keys.contains(where: { $0.lowercased() == "content-type" }) {
            headers["Content-Type"] = "application/octet-stream"
        }
        let response = try await transport.fetch(
            TransportRequest(
                url: url,
                method: request.method,
                headers: headers,
                body: request.body,
                timeouts: Self.timeouts,
                maxBytes: Self.answerLimit
            )
        )
        let body = try await response.collect(limit: Self.answerLimit)
        return S3Response(status: response.statusCode, headers: response.headers, body: body)
    }
}
