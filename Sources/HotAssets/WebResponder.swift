import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A request for a web module's page or file, as a web view's scheme handler or a preview
/// server receives it.
public struct WebRequest: Sendable, Hashable {
    /// The method (`GET`, `HEAD`; any other is answered `405` for a file of a module).
    public var method: String
    /// The page's online address (`https://m.example.com/home/app.js`), as
    /// ``WebModuleResolver`` maps it.
    public var url: URL
    /// The request's headers, by lowercase name.
    public private(set) var headers: [String: String]

    /// Creates a request.
    ///
    /// - Parameters:
    ///   - method: The HTTP method.
    ///   - url: The online address asked for.
    ///   - headers: The request's headers; names compare case-insensitively.
    public init(method: String = "GET", url: URL, headers: [String: String] = [:]) {
        self.method = method
        self.url = url
        var lowercased: [String: String] = [:]
        for (name, value) in headers { lowercased[name.lowercased()] = value }
        self.headers = lowercased
    }

    /// The value of header `name`, compared case-insensitively.
    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// One header of a ``WebResponse``.
public struct WebHeader: Sendable, Hashable {
    /// The name, as sent.
    public var name: String
    /// The value.
    public var value: String

    /// Creates a header.
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// What ``WebResponder`` answers from an installed module: a status, headers, and a body that
/// is read from the file as it is sent.
public struct WebResponse: Sendable {
    /// The HTTP status: 200, 206, 301, 304, 400, 405 or 416.
    public var status: Int
    /// The headers, in the order they are sent.
    public var headers: [WebHeader]
    /// The body: nothing, a short text, or a range of the installed file.
    public var body: WebResponseBody

    /// The value of header `name`, compared case-insensitively.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// The headers as a dictionary, as `HTTPURLResponse` takes them.
    public var headerFields: [String: String] {
        var fields: [String: String] = [:]
        for header in headers { fields[header.name] = header.value }
        return fields
    }

    /// The reason phrase of ``status``.
    public var reason: String {
        switch status {
        case 200: "OK"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 416: "Range Not Satisfiable"
        default: "Status \(status)"
        }
    }
}

/// A response's body. A file's body holds the file open from the moment it was answered, so a
/// version removed while it is sent is still sent whole, and reads it in chunks as it is
/// sent: a 200 MB video costs a chunk of memory, not 200 MB.
public struct WebResponseBody: Sendable {
    /// Where the bytes come from.
    enum Source: Sendable {
        case none
        case text(Data)
        case file(OpenFile, offset: Int64)
    }

    let source: Source
    /// The number of bytes the body holds.
    public let count: Int64

    /// No body (`HEAD`, `304`).
    public static let empty = WebResponseBody(source: .none, count: 0)

    static func text(_ text: String) -> WebResponseBody {
        let data = Data(text.utf8)
        return WebResponseBody(source: .text(data), count: Int64(data.count))
    }

    /// Calls `write` with the body's bytes in order, at most `chunkSize` at a time, reading
    /// the file as it goes. `write` may throw to stop (a closed connection, a stopped task).
    ///
    /// - Throws: What `write` throws, or `HotUpdateError.Code.fileSystem` when the file
    ///   cannot be read (it ends before the length it had when answered).
    public func stream(chunkSize: Int = 256 * 1024, _ write: (UnsafeRawBufferPointer) throws -> Void) throws {
        switch source {
        case .none:
            return
        case .text(let data):
            try data.withUnsafeBytes { try write($0) }
        case .file(let file, let offset):
            let size = max(4_096, min(chunkSize, Int(clamping: count)))
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
            defer { buffer.deallocate() }
            var position = offset
            var left = count
            while left > 0 {
                let wanted = Int(min(Int64(size), left))
                let read = try file.read(
                    into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<wanted]),
                    at: position
                )
                try write(UnsafeRawBufferPointer(rebasing: buffer[0..<read]))
                position += Int64(read)
                left -= Int64(read)
            }
        }
    }

    /// At most `maxLength` bytes of the body from `offset` (counted from the body's start):
    /// for a caller that hands the body on a chunk at a time, such as a scheme handler.
    ///
    /// - Throws: `HotUpdateError.Code.fileSystem` when the file cannot be read.
    public func chunk(at offset: Int64, maxLength: Int) throws -> Data {
        let length = Int(max(0, min(Int64(maxLength), count - offset)))
        guard length > 0 else { return Data() }
        switch source {
        case .none:
            return Data()
        case .text(let data):
            return data.subdata(in: Int(offset)..<Int(offset) + length)
        case .file(let file, let start):
            var data = Data(count: length)
            var filled = 0
            try data.withUnsafeMutableBytes { buffer in
                while filled < length {
                    filled += try file.read(
                        into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled..<length]),
                        at: start + offset + Int64(filled)
                    )
                }
            }
            return data
        }
    }

    /// The whole body in memory: for small bodies and tests (a file's body is better sent
    /// with ``stream(chunkSize:_:)``).
    ///
    /// - Throws: `HotUpdateError.Code.fileSystem` when the file cannot be read.
    public func data() throws -> Data {
        var data = Data()
        data.reserveCapacity(Int(clamping: count))
        try stream { data.append(contentsOf: $0) }
        return data
    }
}

/// An installed file held open for the bodies answered from it.
final class OpenFile: Sendable {
    let descriptor: Int32
    let path: String

    init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { close(descriptor) }

    /// Reads at most `buffer.count` bytes at `offset`; at least one unless it throws.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        while true {
            let read = pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset))
            if read > 0 { return read }
            if read < 0 && errno == EINTR { continue }
            throw HotUpdateError(
                .fileSystem,
                read == 0 ? "the file ended before the length it was answered with" : "the file cannot be read",
                subject: read < 0 ? "\(path): \(String(cString: strerror(errno)))" : path
            )
        }
    }
}

/// The answer to a ``WebRequest``: a response from the installed module, or the network.
public enum WebAnswer: Sendable {
    /// Served from the installed module.
    case response(WebResponse)
    /// Not the module's to answer: load `url` from the network (no module covers it, the module
    /// is not installed or is turned off, or its package has no such file), for the reason
    /// ``WebModuleResolver`` gives.
    case network(URL, reason: OnlineFallbackReason)
}

/// How long a browser may reuse a module's files without asking again.
///
/// Whatever the policy, every file carries an `ETag` (its digest in the store), so a browser
/// that asks again with `If-None-Match` is answered `304` without a body.
public struct WebCachePolicy: Sendable, Hashable {
    /// `Cache-Control` of HTML documents, which name the other files.
    public var documents: String
    /// `Cache-Control` of every other file.
    public var assets: String

    /// Creates a policy from two `Cache-Control` values.
    public init(documents: String, assets: String) {
        self.documents = documents
        self.assets = assets
    }

    /// Every file is asked for again on each use (`no-cache`) and answered `304` while
    /// unchanged: an update shows at the next load. The default.
    public static let revalidate = WebCachePolicy(documents: "no-cache", assets: "no-cache")

    /// Documents are revalidated; every other file is reused for `seconds` without asking,
    /// for modules whose bundler puts a content hash in each asset's name (`index-4f3a9c.js`).
    public static func hashedAssets(maxAge seconds: Int = 31_536_000) -> WebCachePolicy {
        WebCachePolicy(documents: "no-cache", assets: "max-age=\(seconds), immutable")
    }
}

/// Serves installed web modules over HTTP semantics, for a web view's scheme handler (a
/// `WKURLSchemeHandler` on Apple platforms, `shouldInterceptRequest` on Android) or the
/// preview server `hot serve-web`: pages get an origin, so module scripts, `fetch` of the
/// module's own files, `localStorage`, workers and `crossorigin` fonts work as they do online,
/// none of which a page opened from a file URL (origin `null`) can do.
///
/// For a request whose URL a module covers and whose file its installed package has:
/// - `Content-Type` from the extension (``WebContentType``), `Content-Length`, and an `ETag`
///   made from the file's SHA-256 recorded in the store when it was installed (no file is
///   hashed at request time); `If-None-Match` is answered `304`;
/// - `Cache-Control` from the module's ``WebModule/cachePolicy``;
/// - `Range`: one range is answered `206` with `Content-Range`, a range past the end `416`;
///   a malformed range, or several, is ignored (the whole file, `200`), as HTTP allows;
///   `If-Range` is honoured;
/// - `HEAD` gets the headers alone; any method but `GET` and `HEAD` gets `405`;
/// - a directory address gets its index file (`…/home/` → `index.html`), and a directory
///   named without its final `/` a redirect (`301`) to it; a directory is never listed;
/// - a path that would leave the module (`..`, an encoded `/`, a NUL byte, a link out of the
///   package) gets `400`, never a file;
/// - the body is read from the file as it is sent (``WebResponseBody/stream(chunkSize:_:)``).
///
/// Anything else is the network's (``WebAnswer/network(_:reason:)``): an address no module
/// covers, a module not installed or turned off, a file its package lacks.
///
/// A responder is a value over one ``WebModuleResolver``: make a new one after each sync.
///
/// ```swift
/// let responder = WebResponder(resolver: await WebModuleResolver.make(modules: modules, updater: updater))
/// switch responder.respond(to: WebRequest(method: "GET", url: url, headers: headers)) {
/// case .response(let response): send(response.status, response.headerFields, response.body)
/// case .network(let url, _): forward(url)
/// }
/// ```
public struct WebResponder: Sendable {
    /// The resolver that maps addresses to installed files.
    public let resolver: WebModuleResolver
    /// Each installed version's recorded digests, read from its file list once.
    private let digests = Locked<[String: [String: FileList.Entry]]>([:])

    /// Creates a responder over `resolver`.
    public init(resolver: WebModuleResolver) {
        self.resolver = resolver
    }

    /// The answer to `request`.
    public func respond(to request: WebRequest) -> WebAnswer {
        guard let address = WebModuleResolver.Address(request.url) else {
            return .network(request.url, reason: .notAModulePage)
        }
        return respond(method: request.method, headers: request.headers, address: address) { request.url }
    }

    /// The answer to a request already parsed into parts, as a server has it: `headers` by
    /// lowercase name, and `url`, made only for the answers that need a URL (the network's,
    /// a redirect, a missing file).
    package func respond(
        method: String,
        headers requestHeaders: [String: String],
        address: WebModuleResolver.Address,
        url: () -> URL
    ) -> WebAnswer {
        let method = method == "GET" || method == "HEAD" ? method : method.uppercased()
        let module: WebModule
        let inPackage: String
        let filePath: String
        let directory: String
        switch resolver.locate(address, url: url) {
        case .online(let reason):
            if reason == .unsafePath {
                return .response(Self.problem(400, "the path leaves the module", head: method == "HEAD"))
            }
            if reason == .fileMissing, let redirect = directoryRedirect(url(), head: method == "HEAD") {
                return .response(redirect)
            }
            return .network(url(), reason: reason)
        case .file(let found, let path, let file, let packageDirectory):
            (module, inPackage, filePath, directory) = (found, path, file, packageDirectory)
        }
        guard method == "GET" || method == "HEAD" else {
            var response = Self.problem(405, "a module's files are read with GET or HEAD", head: false)
            response.headers.append(WebHeader("Allow", "GET, HEAD"))
            return .response(response)
        }
        let descriptor = open(filePath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            // Listed and gone: the package is marked for the next sync to heal.
            let online = url()
            resolver.reportMissing(online)
            return .network(online, reason: .fileMissing)
        }
        let file = OpenFile(descriptor: descriptor, path: filePath)
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
            return .network(url(), reason: .fileMissing)
        }
        let size = Int64(status.st_size)
        let tag = entityTag(directory: directory, path: inPackage, size: size, status: status)
        let type = WebContentType.forPath(inPackage)
        let policy = module.cachePolicy
        var headers = [
            WebHeader("Content-Type", type),
            WebHeader("ETag", tag),
            WebHeader("Cache-Control", type.hasPrefix("text/html") ? policy.documents : policy.assets),
            WebHeader("Accept-Ranges", "bytes"),
            WebHeader("X-Content-Type-Options", "nosniff"),
        ]

        if let wanted = requestHeaders["if-none-match"], Self.matches(wanted, tag) {
            return .response(WebResponse(status: 304, headers: headers, body: .empty))
        }
        var range: ClosedRange<Int64>?
        if let header = requestHeaders["range"], Self.rangeApplies(requestHeaders["if-range"], tag) {
            switch Self.parseRange(header, size: size) {
            case .satisfiable(let wanted): range = wanted
            case .unsatisfiable:
                var response = Self.problem(
                    416,
                    "the range is past the end of the file (\(size) bytes)",
                    head: method == "HEAD"
                )
                response.headers += [WebHeader("Content-Range", "bytes */\(size)"), WebHeader("ETag", tag)]
                return .response(response)
            case .ignored: break
            }
        }
        let offset = range?.lowerBound ?? 0
        let length = range.map { $0.upperBound - $0.lowerBound + 1 } ?? size
        headers.append(WebHeader("Content-Length", String(length)))
        if let range {
            headers.append(WebHeader("Content-Range", "bytes \(range.lowerBound)-\(range.upperBound)/\(size)"))
        }
        let body =
            method == "HEAD"
            ? WebResponseBody.empty : WebResponseBody(source: .file(file, offset: offset), count: length)
        return .response(WebResponse(status: range == nil ? 200 : 206, headers: headers, body: body))
    }

    /// `301` to `url` with a final `/`, when that address is a directory of the module with
    /// an index file.
    private func directoryRedirect(_ url: URL, head: Bool) -> WebResponse? {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            !components.percentEncodedPath.hasSuffix("/")
        else { return nil }
        components.percentEncodedPath += "/"
        guard let directory = components.url, case .local = resolver.resolve(directory) else { return nil }
        var response = Self.problem(301, "the directory's address ends with /", head: head)
        // Relative to the request, so it stays under whatever scheme and host served it.
        let last = components.percentEncodedPath.split(separator: "/").last.map(String.init) ?? ""
        var location = last + "/"
        if let query = components.percentEncodedQuery { location += "?" + query }
        response.headers.append(WebHeader("Location", location))
        return response
    }

    /// A short text answer.
    private static func problem(_ status: Int, _ text: String, head: Bool) -> WebResponse {
        let body = WebResponseBody.text(text + "\n")
        return WebResponse(
            status: status,
            headers: [
                WebHeader("Content-Type", "text/plain; charset=utf-8"),
                WebHeader("Content-Length", String(body.count)),
                WebHeader("Cache-Control", "no-store"),
            ],
            body: head ? .empty : body
        )
    }

    /// The file's entity tag: its SHA-256 as the store recorded it at install, or, when the
    /// version's file list cannot be read or its size is not the file's, a weak tag of the
    /// file's size, modification time and inode.
    private func entityTag(directory: String, path: String, size: Int64, status: stat) -> String {
        if let entry = recorded(directory)[path], entry.size == size {
            return "\"" + entry.sha256 + "\""
        }
        #if canImport(Darwin)
        let modified = Int64(status.st_mtimespec.tv_sec) * 1_000_000_000 + Int64(status.st_mtimespec.tv_nsec)
        #else
        let modified = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
        #endif
        return
            "W/\"\(String(size, radix: 16))-\(String(modified, radix: 16))-\(String(UInt64(status.st_ino), radix: 16))\""
    }

    /// The recorded files of the version installed in `directory` (`<root>/packages/<id>/<name>`),
    /// by path: read once per version.
    private func recorded(_ directory: String) -> [String: FileList.Entry] {
        if let known = digests.withLock({ $0[directory] }) { return known }
        var files: [String: FileList.Entry] = [:]
        let version = URL(fileURLWithPath: directory, isDirectory: true).standardizedFileURL
        let name = version.lastPathComponent
        let id = version.deletingLastPathComponent().lastPathComponent
        let root = version.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        if let url = StoreLayout(root: root).fileListURL(forVersionPath: "packages/\(id)/\(name)"),
            let list = try? FileList.read(from: url)
        {
            for entry in list.files { files[entry.path] = entry }
        }
        digests.withLock { $0[directory] = files }
        return files
    }

    /// Whether an `If-None-Match` list names `tag` (weak comparison, as HTTP asks for it).
    static func matches(_ list: String, _ tag: String) -> Bool {
        let wanted = list.trimmingCharacters(in: .whitespaces)
        if wanted == "*" { return true }
        let opaque = tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag
        return wanted.split(separator: ",").contains { candidate in
            var candidate = candidate.trimmingCharacters(in: .whitespaces)
            if candidate.hasPrefix("W/") { candidate.removeFirst(2) }
            return candidate == opaque
        }
    }

    /// Whether a `Range` applies under `If-Range`: with no `If-Range`, or one naming the
    /// current strong tag (a date, or a weak tag, never matches: the whole file is sent).
    static func rangeApplies(_ ifRange: String?, _ tag: String) -> Bool {
        guard let ifRange = ifRange?.trimmingCharacters(in: .whitespaces) else { return true }
        return !tag.hasPrefix("W/") && ifRange == tag
    }

    /// What a `Range` header asks of a file of `size` bytes.
    enum RangeRequest: Equatable {
        /// One range inside the file.
        case satisfiable(ClosedRange<Int64>)
        /// One well-formed range that starts past the end (or an empty suffix).
        case unsatisfiable
        /// Malformed, several ranges, or a unit other than bytes: the whole file is sent.
        case ignored
    }

    /// Parses a `Range` header (`bytes=0-99`, `bytes=100-`, `bytes=-100`).
    static func parseRange(_ header: String, size: Int64) -> RangeRequest {
        let value = header.trimmingCharacters(in: .whitespaces)
        guard value.lowercased().hasPrefix("bytes=") else { return .ignored }
        let spec = value.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .ignored }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        func number(_ text: String) -> Int64? {
            guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else {
                return nil
            }
            return Int64(text)
        }
        if first.isEmpty {
            // The last `count` bytes.
            guard let count = number(last) else { return .ignored }
            guard count > 0, size > 0 else { return .unsatisfiable }
            return .satisfiable(max(0, size - count)...(size - 1))
        }
        guard let start = number(first) else { return .ignored }
        let end: Int64
        if last.isEmpty {
            end = size - 1
        } else {
            guard let given = number(last), given >= start else { return .ignored }
            end = min(given, size - 1)
        }
        guard start < size else { return .unsatisfiable }
        return .satisfiable(start...end)
    }
}
