#if Curl && canImport(CHotCurl)
import Foundation
import HotCore
import HotVerify

/// The S3 operations publishing needs, over ``S3Client``.
package struct S3Bucket: Sendable {
    package struct Object: Sendable, Hashable {
        package var key: String
        package var size: Int64
        /// The ETag without quotes: the MD5 of a single-part upload.
        package var etag: String
    }

    package enum PutOutcome: Sendable {
        case uploaded
        /// `If-None-Match: *` was refused: the key exists.
        case alreadyThere
    }

    package let client: S3Client

    /// The bucket `client` addresses.
    package init(client: S3Client) {
        self.client = client
    }

    package var endpoint: S3Endpoint { client.endpoint }

    /// Every object under `prefix` (ListObjectsV2, page by page).
    package func list(prefix: String) async throws -> [Object] {
        var objects: [Object] = []
        var token: String?
        repeat {
            var query = [("list-type", "2"), ("prefix", prefix)]
            if let token { query.append(("continuation-token", token)) }
            let response = try await client.require(
                S3Request("GET", key: nil, query: query),
                "cannot list s3://\(endpoint.bucket)/\(prefix)"
            )
            let text = response.text
            for block in S3XML.blocks("Contents", in: text) {
                guard let key = S3XML.value("Key", in: block) else { continue }
                objects.append(
                    Object(
                        key: key,
                        size: S3XML.value("Size", in: block).flatMap { Int64($0) } ?? -1,
                        etag: (S3XML.value("ETag", in: block) ?? "").trimmingCharacters(
                            in: CharacterSet(charactersIn: "\"")
                        )
                    )
                )
            }
            let truncated = S3XML.value("IsTruncated", in: text[...]) == "true"
            token = truncated ? S3XML.value("NextContinuationToken", in: text[...]) : nil
        } while token != nil
        return objects
    }

    /// Uploads `body` to `key` in one request.
    ///
    /// - Parameter onlyIfAbsent: Sends `If-None-Match: *`; a 412 means the key exists.
    package func put(key: String, body: Data, headers: [String: String], onlyIfAbsent: Bool) async throws -> PutOutcome
    {
        var headers = headers
        if onlyIfAbsent { headers["If-None-Match"] = "*" }
        let md5 = try CryptoVerifier().digest(of: body, using: .md5)
        headers["Content-MD5"] = Data(md5.bytes).base64EncodedString()
        let response = try await client.send(S3Request("PUT", key: key, headers: headers, body: body))
        if onlyIfAbsent, response.status == 412 { return .alreadyThere }
        guard response.isSuccess else {
            throw HotUpdateError(
                .httpStatus,
                "upload refused: HTTP \(response.status) \(S3XML.errorSummary(response.text))",
                subject: endpoint.describe(key: key)
            )
        }
        if let etag = response.etag, etag.count == 32, etag.lowercased() != md5.hex {
            throw HotUpdateError(
                .digestMismatch,
                "the store holds other bytes than were sent (ETag \(etag), MD5 \(md5.hex))",
                subject: endpoint.describe(key: key)
            )
        }
        return .uploaded
    }

    /// A small object's bytes, or nil when it does not exist.
    package func get(key: String) async throws -> Data? {
        let response = try await client.send(S3Request("GET", key: key))
        if response.status == 404 { return nil }
        guard response.isSuccess else {
            throw HotUpdateError(
                .httpStatus,
                "cannot read: HTTP \(response.status) \(S3XML.errorSummary(response.text))",
                subject: endpoint.describe(key: key)
            )
        }
        return response.body
    }

    /// Deletes one object.
    package func delete(key: String) async throws {
        _ = try await client.require(S3Request("DELETE", key: key), "cannot delete")
    }

    // MARK: Multipart uploads

    /// The id of an unfinished multipart upload of exactly `key`, if any (the newest).
    package func unfinishedUpload(key: String) async throws -> String? {
        let response = try await client.require(
            S3Request("GET", key: nil, query: [("uploads", ""), ("prefix", key)]),
            "cannot list the unfinished uploads of \(endpoint.describe(key: key))"
        )
        var found: [(initiated: String, id: String)] = []
        for block in S3XML.blocks("Upload", in: response.text) where S3XML.value("Key", in: block) == key {
            if let id = S3XML.value("UploadId", in: block) {
                found.append((S3XML.value("Initiated", in: block) ?? "", id))
            }
        }
        return found.max { $0.initiated < $1.initiated }?.id
    }

    /// The parts an unfinished upload already holds: number → (size, ETag without quotes).
    package func parts(key: String, uploadID: String) async throws -> [Int: (size: Int64, etag: String)] {
        var parts: [Int: (size: Int64, etag: String)] = [:]
        var marker: String?
        repeat {
            var query = [("uploadId", uploadID)]
            if let marker { query.append(("part-number-marker", marker)) }
            let response = try await client.require(
                S3Request("GET", key: key, query: query),
                "cannot list the parts of an unfinished upload"
            )
            let text = response.text
            for block in S3XML.blocks("Part", in: text) {
                guard let number = S3XML.value("PartNumber", in: block).flatMap({ Int($0) }) else { continue }
                parts[number] = (
                    S3XML.value("Size", in: block).flatMap { Int64($0) } ?? -1,
                    (S3XML.value("ETag", in: block) ?? "").trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                )
            }
            marker =
                S3XML.value("IsTruncated", in: text[...]) == "true"
                ? S3XML.value("NextPartNumberMarker", in: text[...]) : nil
        } while marker != nil
        return parts
    }

    /// Starts a multipart upload; the object's headers are given here.
    package func startUpload(key: String, headers: [String: String]) async throws -> String {
        let response = try await client.require(
            S3Request("POST", key: key, query: [("uploads", "")], headers: headers),
            "cannot start a multipart upload"
        )
        guard let id = S3XML.value("UploadId", in: response.text[...]) else {
            throw HotUpdateError(
                .transportFailed,
                "the store answered no UploadId",
                subject: endpoint.describe(key: key)
            )
        }
        return id
    }

    /// Uploads one part and checks its ETag against its MD5; returns the ETag.
    package func uploadPart(key: String, uploadID: String, number: Int, body: Data, md5: Digest) async throws -> String
    {
        let response = try await client.require(
            S3Request(
                "PUT",
                key: key,
                query: [("partNumber", String(number)), ("uploadId", uploadID)],
                headers: ["Content-MD5": Data(md5.bytes).base64EncodedString()],
                body: body
            ),
            "cannot upload part \(number)"
        )
        let etag = response.etag ?? md5.hex
        guard etag.lowercased() == md5.hex else {
            throw HotUpdateError(
                .digestMismatch,
                "part \(number) was stored with ETag \(etag), not its MD5 \(md5.hex)",
                subject: endpoint.describe(key: key)
            )
        }
        return etag
    }

    /// Completes a multipart upload from its parts' ETags, in part order.
    package func completeUpload(key: String, uploadID: String, etags: [String]) async throws {
        var xml = "<CompleteMultipartUpload>"
        for (index, etag) in etags.enumerated() {
            xml += "<Part><PartNumber>\(index + 1)</PartNumber><ETag>\"\(S3XML.escape(etag))\"</ETag></Part>"
        }
        xml += "</CompleteMultipartUpload>"
        _ = try await client.require(
            S3Request(
                "POST",
                key: key,
                query: [("uploadId", uploadID)],
                headers: ["Content-Type": "application/xml"],
                body: Data(xml.utf8)
            ),
            "cannot complete the multipart upload"
        )
    }
}
#endif
