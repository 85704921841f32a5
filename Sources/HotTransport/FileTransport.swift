import Foundation
import HotCore

/// Fetches `file://` URLs, and `bundle:///` URLs resolved inside a directory the app
/// ships (its bundle's resources), with the same semantics as HTTP.
///
/// The body streams in 256 KiB chunks. The file system's answers are reported the
/// way a web server would, so the engine treats every transport alike:
/// - a missing file or a directory: status 404, empty body;
/// - a file that cannot be read: status 403, empty body;
/// - a range: status 206 with `Content-Range`; a range past the end: status 416;
/// - an `ETag` made from the file's inode, size and modification time; `If-Range` with another
///   tag sends the whole file (200), `If-Match` with another tag answers 412, so a cut download
///   resumes only against the version it started with;
/// - otherwise status 200 with `Content-Length`.
///
/// ```swift
/// let transport = FileTransport(bundleRoot: Bundle.main.resourceURL!)
/// let response = try await transport.fetch(TransportRequest(url: URL(string: "bundle:///packages/ui.zip")!))
/// try response.requireSuccess()
/// for try await chunk in response.body { … }
/// ```
public struct FileTransport: Transport {
    /// The scheme of URLs resolved inside ``bundleRoot``.
    public static let bundleScheme = "bundle"

    /// The directory `bundle:///path` URLs are resolved in; nil refuses them.
    public var bundleRoot: URL?
    /// The size of the body's chunks.
    public var chunkSize: Int

    /// Creates a transport for `file://` URLs, and for `bundle:///` URLs when `bundleRoot` is given.
    ///
    /// - Parameters:
    ///   - bundleRoot: The directory `bundle:///path` URLs are resolved in, typically
    ///     `Bundle.main.resourceURL`; nil to accept only `file://` URLs.
    ///   - chunkSize: The size of the body's chunks, 256 KiB by default.
    public init(bundleRoot: URL? = nil, chunkSize: Int = 256 << 10) {
        self.bundleRoot = bundleRoot
        self.chunkSize = max(1, chunkSize)
    }

    /// Opens the file and returns its status and headers; the body streams from a background thread.
    ///
    /// - Parameter request: The file to read, with an optional range and byte limit. The method,
    ///   body and timeouts are ignored, and of the headers only `If-Range` and `If-Match` count.
    /// - Returns: A response with status 200, 206, 403, 404, 412 or 416 (see the type's documentation).
    /// - Throws: `HotUpdateError.Code.invalidArgument` for a scheme other than `file` (or `bundle`
    ///   with a bundle root), or a `bundle:` path that leaves the bundle root;
    ///   `HotUpdateError.Code.byteLimitExceeded` when the bytes to send exceed the request's
    ///   `maxBytes`; `HotUpdateError.Code.cancelled` when the calling task is cancelled.
    public func fetch(_ request: TransportRequest) async throws -> TransportResponse {
        try Task.checkCancellation()
        let url = request.url
        let path = try resolve(url)
        let subject = url.absoluteString

        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else {
            return TransportResponse(
                url: url,
                statusCode: 404,
                headers: ["content-length": "0"],
                expectedContentLength: 0,
                body: ByteStream(chunks: [])
            )
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            return TransportResponse(
                url: url,
                statusCode: 403,
                headers: ["content-length": "0"],
                expectedContentLength: 0,
                body: ByteStream(chunks: [])
            )
        }
        let size: Int64
        do {
            size = Int64(try handle.seekToEnd())
        } catch {
            try? handle.close()
            throw HotUpdateError(
                .fileSystem,
                "cannot read the size of \(path): \(error)",
                subject: subject,
                cause: SendableErrorBox(error)
            )
        }

        var status = 200
        var start: Int64 = 0
        var end = size - 1
        var headers = ["content-type": "application/octet-stream", "accept-ranges": "bytes"]
        let etag = Self.entityTag(path: path, size: size)
        if let etag { headers["etag"] = etag }
        let condition = Self.header("If-Match", in: request.headers)
        if let condition, condition != "*", condition != etag {
            try? handle.close()
            return TransportResponse(
                url: url,
                statusCode: 412,
                headers: ["content-length": "0"],
                expectedContentLength: 0,
                body: ByteStream(chunks: [])
            )
        }
        // If-Range: a range only of the version the client holds; otherwise the whole file.
        let ifRange = Self.header("If-Range", in: request.headers)
        if let range = request.range, ifRange == nil || ifRange == etag {
            guard range.start < size, range.start >= 0, (range.end ?? range.start) >= range.start else {
                try? handle.close()
                return TransportResponse(
                    url: url,
                    statusCode: 416,
                    headers: ["content-range": "bytes */\(size)", "content-length": "0"],
                    expectedContentLength: 0,
                    body: ByteStream(chunks: [])
                )
            }
            status = 206
            start = range.start
            end = min(range.end ?? size - 1, size - 1)
            headers["content-range"] = "bytes \(start)-\(end)/\(size)"
        }
        let length = max(0, end - start + 1)
        headers["content-length"] = String(length)
        if let limit = request.maxBytes, length > limit {
            try? handle.close()
            throw HotUpdateError(
                .byteLimitExceeded,
                "the file holds \(length) bytes, more than the \(limit) allowed",
                subject: subject
            )
        }
        do {
            try handle.seek(toOffset: UInt64(start))
        } catch {
            try? handle.close()
            throw HotUpdateError(
                .fileSystem,
                "cannot seek to byte \(start) of \(path): \(error)",
                subject: subject,
                cause: SendableErrorBox(error)
            )
        }

        let (stream, writer) = ByteStream.makeStream()
        let reader = FileReader(
            handle: handle,
            writer: writer,
            remaining: length,
            chunkSize: chunkSize,
            path: path,
            subject: subject
        )
        let thread = Thread { reader.run() }
        thread.name = "FileTransport"
        thread.start()
        return TransportResponse(
            url: url,
            statusCode: status,
            headers: headers,
            expectedContentLength: length,
            body: stream
        )
    }

    /// A strong entity tag for the file's current version, from its inode, size and change time
    /// (nanoseconds), as web servers make theirs; nil when the file cannot be examined.
    static func entityTag(path: String, size: Int64) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        #if canImport(Darwin)
        let modified = Int64(info.st_mtimespec.tv_sec) * 1_000_000_000 + Int64(info.st_mtimespec.tv_nsec)
        #else
        let modified = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        #endif
        return "\"\(String(UInt64(info.st_ino), radix: 16))-\(String(size, radix: 16))-\(String(modified, radix: 16))\""
    }

    /// A request header's value, whatever the case of its name.
    private static func header(_ name: String, in headers: [String: String]) -> String? {
        headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// The file path a URL names, or an error for a URL this transport does not read.
    private func resolve(_ url: URL) throws -> String {
        switch url.scheme?.lowercased() {
        case "file":
            return url.standardizedFileURL.path
        case Self.bundleScheme:
            guard let bundleRoot else {
                throw HotUpdateError(
                    .invalidArgument,
                    "a bundle: URL needs a FileTransport created with a bundle root",
                    subject: url.absoluteString
                )
            }
            let relative = url.path.split(separator: "/").map(String.init)
            guard !relative.contains(".."), !relative.isEmpty else {
                throw HotUpdateError(
                    .invalidArgument,
                    "the path leaves the bundle root or names no file",
                    subject: url.absoluteString
                )
            }
            var resolved = bundleRoot.standardizedFileURL
            for component in relative where component != "." {
                resolved.appendPathComponent(component)
            }
            return resolved.path
        default:
            throw HotUpdateError(
                .invalidArgument,
                "FileTransport reads file: URLs\(bundleRoot == nil ? "" : " and bundle: URLs"), "
                    + "not \(url.scheme.map { "\($0):" } ?? "URLs without a scheme")",
                subject: url.absoluteString
            )
        }
    }
}

/// Copies a file's bytes into a stream on a thread of its own.
private final class FileReader: Sendable {
    let handle: FileHandle
    let writer: ByteStream.Writer
    let remaining: Int64
    let chunkSize: Int
    let path: String
    let subject: String

    init(handle: FileHandle, writer: ByteStream.Writer, remaining: Int64, chunkSize: Int, path: String, subject: String)
    {
        self.handle = handle
        self.writer = writer
        self.remaining = remaining
        self.chunkSize = chunkSize
        self.path = path
        self.subject = subject
    }

    func run() {
        defer { try? handle.close() }
        var left = remaining
        while left > 0 {
            let chunk: Data
            do {
                chunk = try handle.read(upToCount: Int(min(Int64(chunkSize), left))) ?? Data()
            } catch {
                writer.finish(
                    throwing: HotUpdateError(
                        .fileSystem,
                        "cannot read \(path): \(error)",
                        subject: subject,
                        cause: SendableErrorBox(error)
                    )
                )
                return
            }
            guard !chunk.isEmpty else {
                writer.finish(
                    throwing: HotUpdateError(
                        .truncated,
                        "the file ended \(left) bytes early (it shrank while being read)",
                        subject: subject
                    )
                )
                return
            }
            left -= Int64(chunk.count)
            do {
                try writer.writeBlocking(chunk)
            } catch {
                return
            }
        }
        writer.finish()
    }
}
