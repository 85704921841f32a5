import Foundation
import Logging

/// Downloads that survive a cut: the bytes go to `partial/<sha256>` and a later attempt asks
/// only for the rest. See ``UpdaterConfiguration/PartialDownloadPolicy``.
extension PackageFetcher {
    /// How one attempt ended.
    private enum Attempt {
        /// The whole file, checked against the manifest.
        case done(size: Int64, sha256: Digest, md5: Digest?)
        /// The server's answer does not continue the kept bytes: start from zero.
        case restart(reason: String)
    }

    /// Downloads `descriptor` through `partial`, resuming what an earlier attempt kept, and
    /// leaves the checked file there, still held, for the caller to unpack and discard. A
    /// partial that is already whole (a process killed after the download) is checked without
    /// a request. A transfer the server cut short is resumed from its kept bytes at once, up
    /// to ``UpdaterConfiguration/PartialDownloadPolicy/resumesPerSync`` times while each
    /// attempt adds bytes; past that its bytes and sidecar are kept for the next sync. A file
    /// whose digest or size is wrong is discarded, and when it was resumed it is fetched once
    /// more from the start (the kept prefix may be what was wrong).
    func resumableDownload(
        _ descriptor: PackageDescriptor,
        partial: PartialDownload,
        observer: FetchObserver
    ) async throws -> (Int64, Digest, Digest?) {
        var fresh = false
        var restarts = 0
        var resumes = 0
        while true {
            let keptBefore = fresh ? 0 : ((try? partial.length()) ?? 0)
            let resumedFrom: Int64
            let outcome: Attempt
            do {
                (resumedFrom, outcome) = try await attempt(
                    descriptor,
                    partial: partial,
                    fresh: fresh,
                    observer: observer
                )
            } catch let error as HotUpdateError
                where error.code == .digestMismatch || error.code == .sizeMismatch
            {
                partial.discard()
                throw error
            } catch {
                let code = (error as? HotUpdateError)?.code
                if code == .byteLimitExceeded {
                    partial.discard()
                    throw try DownloadCheck(descriptor, configuration: configuration).oversize()
                }
                // A cut transfer: keep the bytes, when there are any, the server named their
                // version, and the disk is not full; resume them now while the attempts add
                // bytes, else at the next sync.
                let length = (try? partial.length()) ?? 0
                if length > 0, code != .diskFull, var sidecar = partial.readSidecar(), sidecar.validator != nil {
                    sidecar.offset = length
                    try? partial.writeSidecar(sidecar)
                    if code == .truncated || code == .transportFailed, length > keptBefore,
                        resumes < configuration.partialDownloads.resumesPerSync, !Task.isCancelled
                    {
                        resumes += 1
                        fresh = false
                        configuration.logger.notice(
                            "the server cut the download short; resuming it",
                            metadata: [
                                "package": "\(descriptor.id)", "from": "\(length)", "resume": "\(resumes)",
                                "reason": "\((error as? HotUpdateError)?.message ?? "\(error)")",
                            ]
                        )
                        continue
                    }
                    partial.close()
                } else {
                    partial.discard()
                }
                throw error
            }
            switch outcome {
            case .done(let size, let sha256, let md5):
                if resumedFrom > 0 {
                    configuration.logger.info(
                        "resumed a download",
                        metadata: ["package": "\(descriptor.id)", "from": "\(resumedFrom)"]
                    )
                }
                return (size, sha256, md5)
            case .restart(let reason):
                restarts += 1
                guard restarts < 3 else {
                    partial.close()
                    throw HotUpdateError(
                        .transportFailed,
                        "the server answered a resumed download three times in ways that do not continue it",
                        packageID: descriptor.id,
                        subject: descriptor.url.absoluteString
                    )
                }
                configuration.logger.notice(
                    "cannot resume the download; starting again",
                    metadata: ["package": "\(descriptor.id)", "reason": "\(reason)"]
                )
                fresh = true
            }
        }
    }

    /// One request: for the rest of the kept bytes when there are any and `fresh` is false,
    /// else for the whole file. Returns the offset it resumed from (0 for a whole file).
    private func attempt(
        _ descriptor: PackageDescriptor,
        partial: PartialDownload,
        fresh: Bool,
        observer: FetchObserver
    ) async throws -> (Int64, Attempt) {
        let check = try DownloadCheck(descriptor, configuration: configuration)
        let limit = check.limit
        let url = descriptor.url.absoluteString
        let sidecar = fresh ? nil : partial.readSidecar()
        var offset = try partial.length()
        if fresh || sidecar?.url != url || sidecar?.validator == nil || offset > limit
            || (offset == limit && descriptor.size == nil)
        {
            offset = 0
        }
        if offset > 0 {
            try partial.readPrefix(offset) { bytes in try check.take(bytes) }
        } else {
            try partial.truncate(to: 0)
        }

        if offset > 0, offset == descriptor.size {
            // Whole already: the check decides whether it is the package.
            observer.received(offset, offset)
            guard let (size, sha256, md5) = try? check.finish() else {
                return (0, .restart(reason: "the whole kept file does not match the manifest"))
            }
            return (offset, .done(size: size, sha256: sha256, md5: md5))
        }

        var request = TransportRequest(url: descriptor.url, timeouts: configuration.timeouts, maxBytes: limit)
        if offset > 0, let validator = sidecar?.validator {
            request.range = TransportRequest.ByteRange(start: offset)
            request.headers = validator.resumeHeaders
        }
        configuration.logger.debug(
            "downloading",
            metadata: ["package": "\(descriptor.id)", "url": "\(url)", "from": "\(offset)"]
        )
        let response = try await configuration.transport.fetch(request)
        let validator = ResourceValidator(headers: response.headers)

        var start: Int64 = 0
        switch response.statusCode {
        case 206 where offset > 0:
            if let problem = Self.rangeProblem(
                response,
                offset: offset,
                size: descriptor.size,
                kept: sidecar?.validator,
                answered: validator
            ) {
                response.body.cancel()
                return (0, .restart(reason: problem))
            }
            start = offset
        case 412 where offset > 0, 416 where offset > 0:
            response.body.cancel()
            return (0, .restart(reason: "the server answered HTTP \(response.statusCode): the file changed"))
        default:
            try response.requireSuccess()
            if response.statusCode == 206 {
                response.body.cancel()
                throw HotUpdateError(
                    .transportFailed,
                    "the server answered a request for the whole file with a range",
                    subject: url
                )
            }
            if offset > 0 {
                // A 200 to a range, or to If-Range with another version: the whole file is coming.
                try partial.truncate(to: 0)
                try check.restart()
            }
            try check.checkAnnounced(response)
            try partial.writeSidecar(
                PartialSidecar(
                    url: url,
                    validator: validator,
                    offset: 0,
                    size: descriptor.size,
                    package: descriptor.id,
                    version: descriptor.version
                )
            )
        }

        let expected = descriptor.size ?? response.expectedContentLength.map { $0 + start }
        observer.received(check.received, expected)
        let outcome: Result<(size: Int64, sha256: Digest, md5: Digest?), HotUpdateError>
        do {
            for try await chunk in response.body {
                try chunk.withUnsafeBytes { bytes in
                    do {
                        try check.take(bytes)
                    } catch {
                        response.body.cancel()
                        throw error
                    }
                    try partial.write(bytes)
                }
                observer.received(check.received, expected)
            }
            outcome = .success(try check.finish())
        } catch let error as HotUpdateError
            where error.code == .sizeMismatch || error.code == .digestMismatch
            || (error.code == .byteLimitExceeded && descriptor.size != nil)
        {
            outcome = .failure(error.code == .byteLimitExceeded ? check.oversize() : error)
        }
        switch outcome {
        case .success(let (size, sha256, md5)):
            return (start, .done(size: size, sha256: sha256, md5: md5))
        case .failure(let mismatch):
            // Kept bytes from an earlier attempt may be what is wrong: fetch the whole file once.
            if start > 0 { return (start, .restart(reason: mismatch.message)) }
            throw mismatch
        }
    }

    /// Why a `206` does not continue the kept bytes, or nil when it does: its `Content-Range`
    /// must start at `offset` and run to the end of a file of the manifest's size, and its
    /// validator must not name another version than the kept one (for servers that ignore
    /// both `If-Range` and `If-Match`).
    static func rangeProblem(
        _ response: TransportResponse,
        offset: Int64,
        size: Int64?,
        kept: ResourceValidator?,
        answered: ResourceValidator?
    ) -> String? {
        guard let header = response.headers["content-range"] else { return "a 206 without Content-Range" }
        guard let range = ContentRange(header) else { return "an unreadable Content-Range '\(header)'" }
        guard range.start == offset else { return "Content-Range starts at \(range.start), not \(offset)" }
        if let total = range.total {
            guard range.end == total - 1 else { return "Content-Range '\(header)' stops before the end" }
            if let size, total != size { return "Content-Range gives \(total) bytes, the manifest \(size)" }
        }
        if let kept, kept.contradicts(answered) { return "the file's validator changed" }
        return nil
    }
}

/// A `Content-Range: bytes START-END/TOTAL` header (TOTAL may be `*`).
struct ContentRange: Hashable, Sendable {
    var start: Int64
    var end: Int64
    var total: Int64?

    init?(_ header: String) {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes ") else { return nil }
        let parts = text.dropFirst("bytes ".count).split(separator: "/", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        let bounds = parts[0].split(separator: "-", maxSplits: 1)
        guard bounds.count == 2, let start = Int64(bounds[0]), let end = Int64(bounds[1]), start >= 0, end >= start
        else { return nil }
        self.start = start
        self.end = end
        if parts[1] == "*" {
            total = nil
        } else {
            guard let total = Int64(parts[1]), total > end else { return nil }
            self.total = total
        }
    }
}
