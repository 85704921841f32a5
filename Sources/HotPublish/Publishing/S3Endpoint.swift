import Foundation
import HotCore

/// Where a bucket is and how its objects are addressed.
///
/// - Path-style: `ENDPOINT/BUCKET/KEY` (S3-compatible stores, and what `--endpoint` uses by
///   default).
/// - Virtual-hosted: `SCHEME://BUCKET.HOST/KEY` (AWS's default; with no `--endpoint`,
///   `https://BUCKET.s3.REGION.amazonaws.com`).
package struct S3Endpoint: Sendable {
    package enum Addressing: String, Sendable, CaseIterable {
        case path, virtual
    }

    /// The scheme, host and port, without a path.
    package let base: URL
    package let bucket: String
    package let addressing: Addressing

    /// The endpoint for `bucket`: `endpoint` when given (path-style unless told otherwise),
    /// AWS's regional virtual-hosted endpoint otherwise.
    package init(bucket: String, endpoint: URL?, region: String, addressing: Addressing?) throws {
        guard !bucket.isEmpty, !bucket.contains("/") else {
            throw HotUpdateError(.invalidArgument, "'\(bucket)' is not a bucket name")
        }
        self.bucket = bucket
        if let endpoint {
            guard let scheme = endpoint.scheme?.lowercased(), ["http", "https"].contains(scheme), endpoint.host != nil
            else {
                throw HotUpdateError(
                    .invalidArgument,
                    "the endpoint must be an http or https URL",
                    subject: endpoint.absoluteString
                )
            }
            base = endpoint
            self.addressing = addressing ?? .path
        } else {
            guard let aws = URL(string: "https://s3.\(region).amazonaws.com") else {
                throw HotUpdateError(.invalidArgument, "'\(region)' is not a region")
            }
            base = aws
            self.addressing = addressing ?? .virtual
        }
        if self.addressing == .virtual, bucket.contains(".") || bucket.lowercased() != bucket {
            throw HotUpdateError(
                .invalidArgument,
                "bucket '\(bucket)' cannot be addressed virtual-hosted (use --addressing path)"
            )
        }
    }

    /// The URL of an object (or of the bucket, for a nil key), path and query canonical for SigV4.
    package func url(key: String?, query: [(String, String)] = []) -> String {
        var host = base.host ?? ""
        if host.contains(":") { host = "[\(host)]" }  // IPv6
        if addressing == .virtual { host = "\(bucket).\(host)" }
        var text = "\(base.scheme?.lowercased() ?? "https")://\(host)"
        if let port = base.port { text += ":\(port)" }
        var path = addressing == .path ? "/" + Self.encode(bucket, keepSlash: false) : ""
        if let key { path += "/" + Self.encode(key, keepSlash: true) }
        text += path.isEmpty ? "/" : path
        if !query.isEmpty {
            var pairs: [String] = []
            for (name, value) in query {
                pairs.append(Self.encode(name, keepSlash: false) + "=" + Self.encode(value, keepSlash: false))
            }
            // Sorted by name then value: "=" sorts below every character allowed in a name.
            text += "?" + pairs.sorted().joined(separator: "&")
        }
        return text
    }

    /// The URL clients read a key at (path-style or virtual-hosted, like the uploads).
    package func publicURL(key: String) -> String { url(key: key) }

    /// `s3://bucket/key`, for messages.
    package func describe(key: String) -> String { "s3://\(bucket)/\(key)" }

    /// AWS's URI encoding: everything but `A-Z a-z 0-9 - _ . ~` as `%XX` (and `/` kept in keys).
    package static func encode(_ text: String, keepSlash: Bool) -> String {
        var result = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                UInt8(ascii: "~"):
                result.append(Character(UnicodeScalar(byte)))
            case UInt8(ascii: "/") where keepSlash:
                result.append("/")
            default:
                result += String(format: "%%%02X", byte)
            }
        }
        return result
    }
}

/// An `s3://BUCKET/PREFIX` destination.
package struct S3Location: Sendable {
    package let bucket: String
    /// The key prefix, empty or ending with `/`.
    package let prefix: String

    package init(_ text: String) throws {
        guard text.hasPrefix("s3://") else {
            throw HotUpdateError(.invalidArgument, "'\(text)' is not an s3://BUCKET/PREFIX location")
        }
        let rest = text.dropFirst("s3://".count)
        let parts = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        bucket = String(parts[0])
        guard !bucket.isEmpty else { throw HotUpdateError(.invalidArgument, "'\(text)' names no bucket") }
        let path = parts.count > 1 ? parts[1].split(separator: "/").joined(separator: "/") : ""
        prefix = path.isEmpty ? "" : path + "/"
    }

    /// The object key of a repository path.
    package func key(_ path: String) -> String { prefix + path }
}

/// AWS credentials, from the environment or a shared credentials file.
package struct S3Credentials: Sendable {
    package var accessKeyID: String
    package var secretAccessKey: String
    package var sessionToken: String?

    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`; else the
    /// profile `AWS_PROFILE` (or `default`) of `AWS_SHARED_CREDENTIALS_FILE` (or
    /// `~/.aws/credentials`).
    package static func load(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> S3Credentials {
        if let key = environment["AWS_ACCESS_KEY_ID"], !key.isEmpty,
            let secret = environment["AWS_SECRET_ACCESS_KEY"], !secret.isEmpty
        {
            let token = environment["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
            return S3Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: token)
        }
        let profile = environment["AWS_PROFILE"].flatMap { $0.isEmpty ? nil : $0 } ?? "default"
        let path =
            environment["AWS_SHARED_CREDENTIALS_FILE"]
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".aws/credentials").path
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw HotUpdateError(
                .notFound,
                "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or write profile '\(profile)' in \(path)"
            )
        }
        let values = parseProfile(text, profile: profile)
        guard let key = values["aws_access_key_id"], let secret = values["aws_secret_access_key"] else {
            throw HotUpdateError(
                .notFound,
                "profile '\(profile)' in \(path) has no aws_access_key_id and aws_secret_access_key"
            )
        }
        return S3Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: values["aws_session_token"])
    }

    /// The `key = value` lines of `[profile]` in an INI file.
    package static func parseProfile(_ text: String, profile: String) -> [String: String] {
        var values: [String: String] = [:]
        var inProfile = false
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                inProfile = line.dropFirst().dropLast().trimmingCharacters(in: .whitespaces) == profile
                continue
            }
            guard inProfile, let equals = line.firstIndex(of: "=") else { continue }
            let name = line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            values[name] = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        }
        return values
    }
}

/// Just enough XML for S3's answers: flat elements, the five predefined entities.
package enum S3XML {
    /// The text of every `<name>` element, in order.
    package static func values(_ name: String, in text: Substring) -> [String] {
        var result: [String] = []
        var rest = text[...]
        while let open = rest.range(of: "<\(name)>"),
            let close = rest.range(of: "</\(name)>", range: open.upperBound..<rest.endIndex)
        {
            result.append(unescape(String(rest[open.upperBound..<close.lowerBound])))
            rest = rest[close.upperBound...]
        }
        return result
    }

    /// The first `<name>` element's text.
    package static func value(_ name: String, in text: Substring) -> String? { values(name, in: text).first }

    /// Each `<name>…</name>` block, raw.
    package static func blocks(_ name: String, in text: String) -> [Substring] {
        var result: [Substring] = []
        var rest = text[...]
        while let open = rest.range(of: "<\(name)>"),
            let close = rest.range(of: "</\(name)>", range: open.upperBound..<rest.endIndex)
        {
            result.append(rest[open.upperBound..<close.lowerBound])
            rest = rest[close.upperBound...]
        }
        return result
    }

    /// `Code: Message` of an S3 error document, or the start of the body.
    package static func errorSummary(_ text: String) -> String {
        if let code = value("Code", in: text[...]) {
            return [code, value("Message", in: text[...])].compactMap { $0 }.joined(separator: ": ")
        }
        return String(text.prefix(200))
    }

    package static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    package static func unescape(_ text: String) -> String {
        text.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
            .replacingOccurrences(of: "&#34;", with: "\"").replacingOccurrences(of: "&amp;", with: "&")
    }
}
