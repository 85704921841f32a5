/// The `Content-Type` a web module's file is served with, from its extension.
///
/// Text types carry `charset=utf-8`; an extension not in the table (or none) is served as
/// `application/octet-stream`, which a browser neither runs nor renders. The table covers what
/// today's bundlers emit: documents, module scripts and their source maps, style sheets, JSON and
/// web app manifests, WebAssembly, images, fonts, audio and video.
public enum WebContentType {
    /// The type for `path`'s extension, compared case-insensitively.
    ///
    /// ```swift
    /// WebContentType.forPath("assets/index-4f3a.js")  // "text/javascript; charset=utf-8"
    /// ```
    public static func forPath(_ path: Substring) -> String {
        guard let dot = path.lastIndex(of: "."), !path[dot...].utf8.contains(UInt8(ascii: "/")) else { return fallback }
        return types[path[path.index(after: dot)...].lowercased()] ?? fallback
    }

    /// The type for `path`'s extension, compared case-insensitively.
    public static func forPath(_ path: String) -> String { forPath(path[...]) }

    /// What a file of an unknown type is served as.
    public static let fallback = "application/octet-stream"

    /// Extension (lowercase, without the dot) to type.
    public static let types: [String: String] = [
        "html": "text/html; charset=utf-8",
        "htm": "text/html; charset=utf-8",
        "js": "text/javascript; charset=utf-8",
        "mjs": "text/javascript; charset=utf-8",
        "cjs": "text/javascript; charset=utf-8",
        "css": "text/css; charset=utf-8",
        "json": "application/json; charset=utf-8",
        "map": "application/json; charset=utf-8",
        "webmanifest": "application/manifest+json; charset=utf-8",
        "txt": "text/plain; charset=utf-8",
        "csv": "text/csv; charset=utf-8",
        "xml": "application/xml; charset=utf-8",
        "wasm": "application/wasm",
        "svg": "image/svg+xml; charset=utf-8",
        "png": "image/png",
        "apng": "image/apng",
        "jpg": "image/jpeg",
        "jpeg": "image/jpeg",
        "webp": "image/webp",
        "avif": "image/avif",
        "gif": "image/gif",
        "ico": "image/x-icon",
        "bmp": "image/bmp",
        "woff": "font/woff",
        "woff2": "font/woff2",
        "ttf": "font/ttf",
        "otf": "font/otf",
        "mp3": "audio/mpeg",
        "m4a": "audio/mp4",
        "wav": "audio/wav",
        "ogg": "audio/ogg",
        "oga": "audio/ogg",
        "mp4": "video/mp4",
        "m4v": "video/mp4",
        "webm": "video/webm",
        "ogv": "video/ogg",
        "pdf": "application/pdf",
    ]
}
