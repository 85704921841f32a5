#if Curl && canImport(CHotCurl)
import Foundation
import HotCore
import HotManifest
import HotVerify

/// Publishes a repository to a bucket in the one safe order, and prunes what no kept
/// manifest names.
///
/// 1. List the bucket under the prefix once.
/// 2. Upload every immutable file the bucket lacks (`If-None-Match: *`; multipart and
///    resumable above the threshold). A key present with another size is an error: package
///    files never change.
/// 3. Check that every file each manifest names is in the bucket now.
/// 4. Upload each manifest's history copy, then the manifest itself (unless the bucket
///    already holds the same bytes).
/// 5. Upload each channel's timestamp, last: it names a manifest's content-addressed copy
///    (`manifests/<sha256>.json`, uploaded with the immutable files).
package struct Publisher: Sendable {
    package struct Settings: Sendable {
        package var dryRun: Bool
        package var concurrency: Int
        package var packageCacheControl: String
        package var manifestCacheControl: String
        package var multipartThreshold: Int64
        package var partSize: Int
        package var extraHeaders: [String: String]
        package var allowUnsigned: Bool

        /// Settings of a publication.
        package init(
            dryRun: Bool,
            concurrency: Int,
            packageCacheControl: String,
            manifestCacheControl: String,
            multipartThreshold: Int64,
            partSize: Int,
            extraHeaders: [String: String],
            allowUnsigned: Bool
        ) {
            (self.dryRun, self.concurrency, self.packageCacheControl) = (dryRun, concurrency, packageCacheControl)
            (self.manifestCacheControl, self.multipartThreshold, self.partSize) =
                (manifestCacheControl, multipartThreshold, partSize)
            (self.extraHeaders, self.allowUnsigned) = (extraHeaders, allowUnsigned)
        }
    }

    package struct Summary: Sendable {
        package var uploaded = 0
        package var present = 0
        package var manifestsUploaded = 0
        package var manifestsUnchanged = 0
    }

    package let repository: LocalRepository
    package let location: S3Location
    package let bucket: S3Bucket
    package let settings: Settings
    /// Called with a line for each file uploaded, left, or deleted, from several tasks.
    package let report: @Sendable (String) -> Void

    /// A publisher of `repository` to `location` in `bucket`.
    package init(
        repository: LocalRepository,
        location: S3Location,
        bucket: S3Bucket,
        settings: Settings,
        report: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        (self.repository, self.location, self.bucket, self.settings) = (repository, location, bucket, settings)
        self.report = report
    }

    private var verb: String { settings.dryRun ? "would upload" : "uploaded" }

    package func publish() async throws -> Summary {
        let manifests = try repository.manifests()
        guard !manifests.isEmpty else {
            throw HotUpdateError(
                .notFound,
                "no manifest.json and no channels/*/manifest.json in \(repository.files.root.path)"
            )
        }
        if !settings.allowUnsigned, let unsigned = manifests.first(where: { $0.signatureCount == 0 }) {
            throw HotUpdateError(
                .signatureInvalid,
                "\(unsigned.path) is not signed: sign it with `hot sign` (or pass --allow-unsigned)"
            )
        }
        // A sharded channel edited since its last signing: its manifest.json is the last signed
        // release, which the edits have not reached yet.
        for channel in repository.files.channels() where repository.files.isSharded(channel: channel) {
            let (envelope, _) = try repository.files.loadTop(channel: channel)
            guard envelope.signatures.isEmpty else { continue }
            throw HotUpdateError(
                .signatureInvalid,
                "\(repository.files.topPath(channel: channel)) was changed since it was signed: sign it with `hot sign`"
            )
        }
        let remote = Dictionary(
            try await bucket.list(prefix: location.prefix).map { ($0.key, $0) },
            uniquingKeysWith: { first, _ in first }
        )

        var summary = Summary()
        var toUpload: [(path: String, url: URL, size: Int64)] = []
        var inBucket = Set<String>()
        for file in repository.immutableFiles() {
            let size = try LocalRepository.size(of: file.url)
            let key = location.key(file.path)
            if let object = remote[key] {
                guard object.size == size else {
                    throw HotUpdateError(
                        .sizeMismatch,
                        "the bucket holds \(object.size) bytes under this name, the repository \(size): package files never change",
                        subject: bucket.endpoint.describe(key: key)
                    )
                }
                if !Self.isManifestCopy(file.path) { summary.present += 1 }
                inBucket.insert(file.path)
            } else {
                toUpload.append((file.path, file.url, size))
            }
        }

        // 1. Package files, all of them, before any manifest.
        let outcomes = try await forEachConcurrently(toUpload, limit: settings.concurrency) { file in
            try await uploadImmutable(path: file.path, url: file.url, size: file.size)
        }
        for (file, uploaded) in zip(toUpload, outcomes) {
            inBucket.insert(file.path)
            // The manifests' content-addressed copies are counted with the manifests.
            guard !Self.isManifestCopy(file.path) else { continue }
            if uploaded { summary.uploaded += 1 } else { summary.present += 1 }
        }

        // 2. Every file a manifest names must be there before the manifest is: uploaded now,
        // or already in the bucket (a repository of manifests pulled with `hot pull`).
        for manifest in manifests {
            let missing = manifest.namedPaths.filter {
                !inBucket.contains($0) && remote[location.key($0)] == nil
            }.sorted()
            guard missing.isEmpty else {
                throw HotUpdateError(
                    .notFound,
                    "\(manifest.path) names \(missing.joined(separator: ", ")), which neither the repository nor the bucket holds; no manifest was uploaded"
                )
            }
        }

        // 3. The manifests: each one's history copy, then the manifest itself.
        for manifest in manifests {
            let headers = settings.extraHeaders.merging([
                "Cache-Control": settings.manifestCacheControl, "Content-Type": "application/json",
            ]) { $1 }
            let md5 = try CryptoVerifier().digest(of: manifest.data, using: .md5).hex
            let key = location.key(manifest.path)
            if remote[key]?.etag.lowercased() == md5 {
                summary.manifestsUnchanged += 1
                report("unchanged\t\(manifest.path)")
                continue
            }
            let historyKey = location.key(manifest.historyPath)
            if remote[historyKey] == nil {
                if !settings.dryRun {
                    _ = try await bucket.put(key: historyKey, body: manifest.data, headers: headers, onlyIfAbsent: true)
                }
                report("\(verb)\t\(manifest.historyPath)")
            }
            if !settings.dryRun {
                _ = try await bucket.put(key: key, body: manifest.data, headers: headers, onlyIfAbsent: false)
            }
            summary.manifestsUploaded += 1
            report("\(verb)\t\(manifest.path)")
        }

        // 4. The timestamps, last: each names a manifest by its content-addressed copy, which
        // step 1 uploaded, so a client that reads a new timestamp finds what it names. A channel
        // whose timestamp the repository no longer has (`hot rollout` removes one the release
        // keys signed) loses the bucket's too, or clients would keep reading the manifest it
        // names rather than the one just uploaded.
        let timestamps = try repository.timestamps()
        for manifest in manifests {
            let directory = (manifest.path as NSString).deletingLastPathComponent
            let path = (directory.isEmpty ? "" : directory + "/") + TimestampPart.fileName
            guard !timestamps.contains(where: { $0.path == path }), remote[location.key(path)] != nil else { continue }
            if !settings.dryRun { try await bucket.delete(key: location.key(path)) }
            report("\(settings.dryRun ? "would delete" : "deleted")\t\(path)")
        }
        for timestamp in timestamps {
            if let named = timestamp.names, !inBucket.contains(named), remote[location.key(named)] == nil {
                throw HotUpdateError(
                    .notFound,
                    "\(timestamp.path) names \(named), which neither the repository nor the bucket holds; sign it again (hot timestamp)"
                )
            }
            let key = location.key(timestamp.path)
            let md5 = try CryptoVerifier().digest(of: timestamp.data, using: .md5).hex
            if remote[key]?.etag.lowercased() == md5 {
                report("unchanged\t\(timestamp.path)")
                continue
            }
            if !settings.dryRun {
                let headers = settings.extraHeaders.merging([
                    "Cache-Control": settings.manifestCacheControl, "Content-Type": "application/json",
                ]) { $1 }
                _ = try await bucket.put(key: key, body: timestamp.data, headers: headers, onlyIfAbsent: false)
            }
            report("\(verb)\t\(timestamp.path)")
        }
        return summary
    }

    /// Uploads one immutable file unless the bucket has it; true when it was uploaded.
    private func uploadImmutable(path: String, url: URL, size: Int64) async throws -> Bool {
        let key = location.key(path)
        guard !settings.dryRun else {
            report("\(verb)\t\(path)\t\(size)")
            return true
        }
        let headers = settings.extraHeaders.merging([
            "Cache-Control": settings.packageCacheControl, "Content-Type": LocalRepository.contentType(of: path),
        ]) { $1 }
        if size > settings.multipartThreshold {
            let resumed = try await uploadMultipart(key: key, url: url, size: size, headers: headers)
            report("\(verb)\t\(path)\t\(size)" + (resumed > 0 ? "\tresumed after \(resumed) part(s)" : ""))
            return true
        }
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot read \(path)")
        }
        switch try await bucket.put(key: key, body: data, headers: headers, onlyIfAbsent: true) {
        case .uploaded:
            report("\(verb)\t\(path)\t\(size)")
            return true
        case .alreadyThere:
            report("present\t\(path)")
            return false
        }
    }

    /// A multipart upload, continuing an unfinished one of the same key: parts already stored
    /// with the same size and MD5 are kept. Returns how many parts were kept.
    private func uploadMultipart(key: String, url: URL, size: Int64, headers: [String: String]) async throws -> Int {
        var uploadID = try await bucket.unfinishedUpload(key: key)
        var existing: [Int: (size: Int64, etag: String)] = [:]
        if let uploadID { existing = try await bucket.parts(key: key, uploadID: uploadID) }
        if uploadID == nil { uploadID = try await bucket.startUpload(key: key, headers: headers) }
        guard let uploadID else { return 0 }
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: url)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot read \(url.lastPathComponent)")
        }
        defer { try? handle.close() }
        let partSize = Int64(settings.partSize)
        let count = Int((size + partSize - 1) / partSize)
        var etags: [String] = []
        var kept = 0
        for number in 1...count {
            try Task.checkCancellation()
            let offset = Int64(number - 1) * partSize
            try handle.seek(toOffset: UInt64(offset))
            let body = try handle.read(upToCount: Int(min(partSize, size - offset))) ?? Data()
            let md5 = try CryptoVerifier().digest(of: body, using: .md5)
            if let part = existing[number], part.size == Int64(body.count), part.etag.lowercased() == md5.hex {
                etags.append(part.etag)
                kept += 1
                continue
            }
            etags.append(
                try await bucket.uploadPart(key: key, uploadID: uploadID, number: number, body: body, md5: md5)
            )
        }
        try await bucket.completeUpload(key: key, uploadID: uploadID, etags: etags)
        return kept
    }

    // MARK: Prune

    /// Deletes (or, in a dry run, lists) the immutable files that no live manifest and none
    /// of the `keep` newest manifests of each channel name. Returns how many.
    package func prune(keep: Int) async throws -> Int {
        let objects = try await bucket.list(prefix: location.prefix)
        let prefix = location.prefix
        var live: [String: Int] = [:]  // manifest path → its version, once read
        var history: [String: [Int]] = [:]  // manifest path → versions with a history copy
        var immutable: [String] = []
        for object in objects {
            let path = String(object.key.dropFirst(prefix.count))
            if let manifestPath = Self.manifestPath(ofHistory: path) {
                history[manifestPath.path, default: []].append(manifestPath.version)
            } else if Self.isManifestPath(path) {
                live[path] = -1
            } else if LocalRepository.immutableFolders.contains(where: { path.hasPrefix($0 + "/") }) {
                immutable.append(path)
            }
        }
        guard !live.isEmpty else {
            throw HotUpdateError(
                .notFound,
                "the bucket holds no manifest under \(bucket.endpoint.describe(key: prefix)); nothing is pruned"
            )
        }
        var named = Set<String>()
        for path in live.keys.sorted() {
            guard let data = try await bucket.get(key: location.key(path)) else {
                throw HotUpdateError(.notFound, "\(path) vanished while pruning; nothing is pruned")
            }
            let manifest = try LocalRepository.decode(data, path: path)
            named.formUnion(manifest.namedPaths)
            named.insert(try LocalRepository.contentAddressedPath(of: data))
            named.formUnion(try await timestampNamedPaths(besideManifest: path))
            live[path] = manifest.body.version
        }
        for (path, versions) in history.sorted(by: { $0.key < $1.key }) {
            let newest = versions.sorted(by: >)
            let liveVersion = live[path] ?? Int.max
            // The live manifest counts as one of the kept ones; the copies of newer versions
            // (a publish that stopped before its manifest) are kept as well.
            let older = newest.filter { $0 < liveVersion }
            let kept = newest.filter { $0 > liveVersion } + older.prefix(max(0, keep - (live[path] == nil ? 0 : 1)))
            for version in kept {
                let copy = LocalRepository.Manifest.historyPath(of: path, version: version)
                guard let data = try await bucket.get(key: location.key(copy)) else { continue }
                named.formUnion(try LocalRepository.decode(data, path: path).namedPaths)
                named.insert(try LocalRepository.contentAddressedPath(of: data))
            }
        }
        let doomed = immutable.filter { !named.contains($0) }.sorted()
        for path in doomed {
            if !settings.dryRun { try await bucket.delete(key: location.key(path)) }
            report("\(settings.dryRun ? "would delete" : "deleted")\t\(path)")
        }
        return doomed.count
    }

    /// What the live timestamp beside the manifest at `path` names in the bucket: the
    /// content-addressed manifest copy, and, when that is a sharded manifest's top document,
    /// its shards. Empty where there is no timestamp.
    private func timestampNamedPaths(besideManifest path: String) async throws -> Set<String> {
        let directory = (path as NSString).deletingLastPathComponent
        let timestampPath = (directory.isEmpty ? "" : directory + "/") + TimestampPart.fileName
        guard let data = try await bucket.get(key: location.key(timestampPath)),
            let reference = try TimestampPart.decode(try SignedEnvelope.parse(data).signed).manifest.path,
            let copy = LocalRepository.repositoryPath(of: reference, relativeTo: timestampPath)
        else { return [] }
        var named: Set<String> = [copy]
        guard let top = try await bucket.get(key: location.key(copy)) else { return named }
        for shard in try SignedManifestBody.decode(try SignedEnvelope.parse(top).signed).shards ?? [] {
            if let shardPath = LocalRepository.repositoryPath(of: shard.path, relativeTo: copy) {
                named.insert(shardPath)
            }
        }
        return named
    }

    /// Whether a repository path is a channel's timestamp: `timestamp.json` or
    /// `channels/NAME/timestamp.json`.
    package static func isTimestampPath(_ path: String) -> Bool {
        guard path.hasSuffix("/" + TimestampPart.fileName) || path == TimestampPart.fileName else { return false }
        let directory = String(path.dropLast(TimestampPart.fileName.count))
        return isManifestPath(directory + "manifest.json")
    }

    /// Whether a repository path is a manifest's content-addressed copy (`manifests/…`).
    package static func isManifestCopy(_ path: String) -> Bool { path.hasPrefix("manifests/") }

    /// Whether a repository path is a live manifest: `manifest.json` or `channels/NAME/manifest.json`.
    package static func isManifestPath(_ path: String) -> Bool {
        if path == "manifest.json" { return true }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count == 3 && parts[0] == "channels" && !parts[1].isEmpty && parts[2] == "manifest.json"
    }

    /// The live manifest and version a history copy belongs to.
    package static func manifestPath(ofHistory path: String) -> (path: String, version: Int)? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard let last = parts.last, last.hasPrefix("manifest-"), last.hasSuffix(".json"),
            let version = Int(last.dropFirst("manifest-".count).dropLast(".json".count)),
            parts.count >= 2, parts[parts.count - 2] == "history"
        else { return nil }
        let directory = parts.dropLast(2).joined(separator: "/")
        let manifest = (directory.isEmpty ? "" : directory + "/") + "manifest.json"
        return isManifestPath(manifest) ? (manifest, version) : nil
    }
}

#endif
