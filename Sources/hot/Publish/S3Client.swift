#if Curl && canImport(CHotCurl)
import CHotCurl
import Foundation
import HotCore
import HotTransport
import HotVerify

/// One S3 request: the method, the object's key (nil for the bucket) with its query, the
/// headers and a body held in memory (a whole small file or one part of a large one).
struct S3Request: Sendable {
    var method: String
    var key: String?
    /// Query parameters; sorted and encoded the way SigV4's canonical request wants them.
    var query: [(String, String)] = []
    var headers: [String: String] = [:]
    var body: Data?

    init(
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
struct S3Response: Sendable {
    var status: Int
    /// Header names in lowercase.
    var headers: [String: String]
    var body: Data

    var isSuccess: Bool { (200..<300).contains(status) }
    var text: String { String(decoding: body, as: UTF8.self) }
    /// The `ETag` without its quotes.
    var etag: String? { headers["etag"].map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) } }
}

/// A small S3 client over libcurl, signing with libcurl's own AWS SigV4 (`CURLOPT_AWS_SIGV4`).
///
/// What libcurl 7.88 signs, measured against botocore's signer: the method, the path as
/// given, the query as given (it does not sort it, and signs `?uploads` as `uploads` where
/// S3 expects `uploads=`), `host`, `x-amz-date` and every header the request sets — also one
/// set to nothing to suppress it, such as `Expect:`, which is then signed but not sent. So
/// this client writes paths and queries already canonical (AWS's URI encoding, parameters
/// sorted, `name=` for flags), never suppresses a header, and sends
/// `x-amz-content-sha256` with the body's SHA-256, which libcurl takes as the payload hash.
struct S3Client: Sendable {
    let endpoint: S3Endpoint
    let credentials: S3Credentials
    let region: String
    /// Whom TLS trusts for an https endpoint: the system's CAs, a private CA, pins.
    let tls: CurlTLS
    /// Attempts per request for connection failures and 5xx answers.
    var attempts = 3

    /// Sends a request, retrying connection failures and 5xx answers with a short backoff.
    func send(_ request: S3Request) async throws -> S3Response {
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
    func require(_ request: S3Request, _ what: @autoclosure () -> String) async throws -> S3Response {
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
        let url = endpoint.url(key: request.key, query: request.query)
        var headers = request.headers
        headers["x-amz-content-sha256"] = try CryptoVerifier().digest(of: request.body ?? Data(), using: .sha256).hex
        if let token = credentials.sessionToken { headers["x-amz-security-token"] = token }
        // libcurl labels a body without a type application/x-www-form-urlencoded, which a
        // store may parse as a form and so lose (moto does): every body gets a type.
        if request.body != nil, !headers.keys.contains(where: { $0.lowercased() == "content-type" }) {
            headers["Content-Type"] = "application/octet-stream"
        }
        let call = S3Call(
            method: request.method,
            url: url,
            headers: headers,
            body: request.body,
            sigv4: "aws:amz:\(region):s3",
            credentials: credentials,
            tls: tls
        )
        return try await withCheckedThrowingContinuation { continuation in
            let thread = Thread { continuation.resume(with: Result { try call.perform() }) }
            thread.name = "S3Client"
            thread.start()
        }
    }
}

/// One blocking libcurl transfer with the body in memory.
private final class S3Call: @unchecked Sendable {
    let method: String
    let url: String
    let headers: [String: String]
    let body: Data?
    let sigv4: String
    let credentials: S3Credentials
    let tls: CurlTLS

    private var status = 0
    private var responseHeaders: [String: String] = [:]
    private var responseBody = Data()

    init(
        method: String,
        url: String,
        headers: [String: String],
        body: Data?,
        sigv4: String,
        credentials: S3Credentials,
        tls: CurlTLS
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.sigv4 = sigv4
        self.credentials = credentials
        self.tls = tls
    }

    private static let globalInit: CURLcode = hot_curl_global_init_all()

    func perform() throws -> S3Response {
        guard Self.globalInit == CURLE_OK, let handle = curl_easy_init() else {
            throw HotUpdateError(.transportFailed, "libcurl could not start", subject: url)
        }
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        var list: UnsafeMutablePointer<curl_slist>?
        defer {
            curl_easy_cleanup(handle)
            curl_slist_free_all(list)
            errorBuffer.deallocate()
        }
        func check(_ code: CURLcode, _ what: String) throws {
            guard code == CURLE_OK else {
                throw HotUpdateError(
                    .transportFailed,
                    "libcurl refused \(what): \(String(cString: curl_easy_strerror(code)))",
                    subject: url
                )
            }
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        try check(hot_curl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer), "the error buffer")
        try check(hot_curl_setopt_string(handle, CURLOPT_URL, url), "the URL")
        try check(hot_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1), "CURLOPT_NOSIGNAL")
        _ = hot_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")
        // S3 answers with no redirect a client follows: none is followed, so none can downgrade.
        try check(hot_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0), "CURLOPT_FOLLOWLOCATION")
        if let target = URL(string: url) { try tls.configure(handle, url: target, check: check) }
        try check(hot_curl_setopt_string(handle, CURLOPT_AWS_SIGV4, sigv4), "CURLOPT_AWS_SIGV4 (libcurl 7.75 or later)")
        try check(hot_curl_setopt_string(handle, CURLOPT_USERNAME, credentials.accessKeyID), "the access key")
        try check(hot_curl_setopt_string(handle, CURLOPT_PASSWORD, credentials.secretAccessKey), "the secret key")
        try check(hot_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT, 15), "the connect timeout")
        try check(hot_curl_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, 1), "the low-speed limit")
        try check(hot_curl_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, 60), "the low-speed window")
        // A large body is sent after "100 Continue", or after this long without one.
        _ = hot_curl_setopt_long(handle, CURLOPT_EXPECT_100_TIMEOUT_MS, 300)

        switch method {
        case "HEAD": try check(hot_curl_setopt_long(handle, CURLOPT_NOBODY, 1), "HEAD")
        case "GET": try check(hot_curl_setopt_long(handle, CURLOPT_HTTPGET, 1), "GET")
        default: try check(hot_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, method), "the method")
        }
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            guard let appended = curl_slist_append(list, "\(name): \(value)") else {
                throw HotUpdateError(.transportFailed, "libcurl could not store the header \(name)", subject: url)
            }
            list = appended
        }
        if let list { try check(hot_curl_setopt_slist(handle, CURLOPT_HTTPHEADER, list), "the headers") }
        try check(
            hot_curl_setopt_data_callback(handle, CURLOPT_HEADERFUNCTION, s3HeaderCallback),
            "the header callback"
        )
        try check(hot_curl_setopt_pointer(handle, CURLOPT_HEADERDATA, context), "the header context")
        try check(hot_curl_setopt_data_callback(handle, CURLOPT_WRITEFUNCTION, s3WriteCallback), "the write callback")
        try check(hot_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, context), "the write context")

        let code: CURLcode = try withExtendedLifetime(self) {
            guard method != "HEAD", method != "GET" else { return curl_easy_perform(handle) }
            // POSTFIELDS needs a pointer even for an empty body; libcurl reads none of it then.
            var bytes = [UInt8](body ?? Data())
            let count = bytes.count
            if bytes.isEmpty { bytes.append(0) }
            return try bytes.withUnsafeMutableBytes { raw -> CURLcode in
                try check(hot_curl_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(count)), "the body size")
                try check(hot_curl_setopt_pointer(handle, CURLOPT_POSTFIELDS, raw.baseAddress), "the body")
                return curl_easy_perform(handle)
            }
        }
        guard code == CURLE_OK else {
            let detail = String(cString: errorBuffer)
            let reason = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
            if let refused = tls.error(code, handle: handle, reason: reason, url: url) { throw refused }
            throw HotUpdateError(
                code == CURLE_OPERATION_TIMEDOUT ? .timedOut : .transportFailed,
                "\(method) failed: \(reason)",
                subject: url
            )
        }
        var final = 0
        _ = hot_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &final)
        return S3Response(status: final == 0 ? status : final, headers: responseHeaders, body: responseBody)
    }

    fileprivate func onHeader(_ bytes: UnsafeRawBufferPointer) -> Int {
        let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if line.hasPrefix("HTTP/") {
            let parts = line.split(separator: " ", maxSplits: 2)
            status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            responseHeaders = [:]
        } else if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            responseHeaders[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return bytes.count
    }

    fileprivate func onBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard responseBody.count + bytes.count <= 64 << 20 else { return 0 }  // S3's answers are small documents
        responseBody.append(contentsOf: bytes)
        return bytes.count
    }
}

private func s3HeaderCallback(
    _ data: UnsafeMutablePointer<CChar>?,
    _ size: Int,
    _ count: Int,
    _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return 0 }
    return Unmanaged<S3Call>.fromOpaque(context).takeUnretainedValue()
        .onHeader(UnsafeRawBufferPointer(start: data, count: size * count))
}

private func s3WriteCallback(
    _ data: UnsafeMutablePointer<CChar>?,
    _ size: Int,
    _ count: Int,
    _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return 0 }
    return Unmanaged<S3Call>.fromOpaque(context).takeUnretainedValue()
        .onBody(UnsafeRawBufferPointer(start: data, count: size * count))
}
#endif
