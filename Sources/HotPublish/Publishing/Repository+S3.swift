import Foundation
import HotCore
import HotManifest
import HotStore
import HotTransport

/// Where a repository is published in S3-compatible storage (`s3://BUCKET/PREFIX`), and how to
/// reach it. Credentials come from the environment (`AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`) or the shared credentials file.
public struct S3Remote: Sendable, Hashable {
    /// `s3://BUCKET/PREFIX`.
    public var location: String
    /// An S3-compatible endpoint (http or https); AWS's regional endpoint when nil.
    public var endpoint: URL?
    /// The region (signing scope); `AWS_REGION` or `us-east-1` when nil.
    public var region: String?
    /// `path` (ENDPOINT/BUCKET/KEY) or `virtual` (BUCKET.HOST/KEY); path with an endpoint,
    /// virtual without, when nil.
    public var addressing: String?
    /// What an https endpoint's certificate is checked against.
    public var trust: TLSTrust
    /// The canned ACL of each object uploaded (`private`, `public-read`), or the bucket's default.
    public var acl: String?

    /// A remote.
    public init(
        location: String,
        endpoint: URL? = nil,
        region: String? = nil,
        addressing: String? = nil,
        trust: TLSTrust = .system,
        acl: String? = nil
    ) {
        (self.location, self.endpoint, self.region, self.addressing) = (location, endpoint, region, addressing)
        (self.trust, self.acl) = (trust, acl)
    }
}

extension Repository {
    /// How a repository is published.
    public struct PublishOptions: Sendable, Hashable {
        /// Report what would be uploaded, and upload nothing.
        public var dryRun: Bool
        /// Uploads at once.
        public var concurrency: Int
        /// `Cache-Control` of package files, which never change.
        public var packageCacheControl: String
        /// `Cache-Control` of manifests and timestamps.
        public var manifestCacheControl: String
        /// Files at least this large go up in parts.
        public var multipartThreshold: Int64
        /// The size of each part.
        public var partSize: Int
        /// Publish manifests that are not signed (a development repository).
        public var allowUnsigned: Bool

        /// Options; the defaults are `hot publish`'s.
        public init(
            dryRun: Bool = false,
            concurrency: Int = 4,
            packageCacheControl: String = "public, max-age=31536000, immutable",
            manifestCacheControl: String = "no-cache",
            multipartThreshold: Int64 = 16 << 20,
            partSize: Int = 8 << 20,
            allowUnsigned: Bool = false
        ) {
            (self.dryRun, self.concurrency, self.packageCacheControl) = (dryRun, concurrency, packageCacheControl)
            (self.manifestCacheControl, self.multipartThreshold) = (manifestCacheControl, multipartThreshold)
            (self.partSize, self.allowUnsigned) = (partSize, allowUnsigned)
        }
    }

    /// What a publication uploaded.
    public struct PublishSummary: Sendable, Hashable {
        /// Package files uploaded.
        public var uploaded: Int
        /// Package files the bucket held already.
        public var present: Int
        /// Manifests and timestamps uploaded.
        public var manifestsUploaded: Int
        /// Manifests the bucket held as they are.
        public var manifestsUnchanged: Int
    }

    /// Publishes the repository to `remote` in the one safe order: the package files the
    /// bucket lacks first, the manifests and timestamps last, so no client ever reads a
    /// manifest naming a file the bucket does not hold.
    ///
    /// - Parameters:
    ///   - remote: Where to publish.
    ///   - options: How: a dry run, concurrency, cache headers, part sizes.
    ///   - report: Called with a line for each file uploaded or left, from several tasks.
    /// - Throws: `HotUpdateError.Code.signatureInvalid` for an unsigned manifest (unless
    ///   allowed); `HotUpdateError.Code.httpStatus` or `transportFailed` when the storage
    ///   refuses; `HotUpdateError.Code.unsupported` in a build without the `Curl` trait.
    public func publish(
        to remote: S3Remote,
        options: PublishOptions = PublishOptions(),
        report: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws -> PublishSummary {
        #if Curl && canImport(CHotCurl)
        let (location, bucket) = try Self.bucket(of: remote)
        let summary = try await lockedAwaiting {
            try await Publisher(
                repository: LocalRepository(files: files),
                location: location,
                bucket: bucket,
                settings: Publisher.Settings(
                    dryRun: options.dryRun,
                    concurrency: options.concurrency,
                    packageCacheControl: options.packageCacheControl,
                    manifestCacheControl: options.manifestCacheControl,
                    multipartThreshold: options.multipartThreshold,
                    partSize: options.partSize,
                    extraHeaders: remote.acl.map { ["x-amz-acl": $0] } ?? [:],
                    allowUnsigned: options.allowUnsigned
                ),
                report: report
            ).publish()
        }
        return PublishSummary(
            uploaded: summary.uploaded,
            present: summary.present,
            manifestsUploaded: summary.manifestsUploaded,
            manifestsUnchanged: summary.manifestsUnchanged
        )
        #else
        throw HotUpdateError(.unsupported, "this build has no S3 publishing (the Curl trait)")
        #endif
    }

    /// Downloads the live manifests (and the timestamp beside each) published at `remote`
    /// into the repository's directory, each checked to be what it says and written
    /// atomically: to change and sign there, then ``publish(to:options:report:)``. Package
    /// files stay in the bucket.
    ///
    /// - Returns: The manifests' paths, sorted.
    /// - Throws: `HotUpdateError.Code.notFound` when the bucket holds no manifest there;
    ///   `HotUpdateError.Code.unsupported` in a build without the `Curl` trait.
    @discardableResult
    public func pull(from remote: S3Remote) async throws -> [String] {
        #if Curl && canImport(CHotCurl)
        let (location, bucket) = try Self.bucket(of: remote)
        return try await lockedAwaiting {
            var pulled: [String] = []
            for object in try await bucket.list(prefix: location.prefix) {
                guard object.key.hasPrefix(location.prefix) else { continue }
                let path = String(object.key.dropFirst(location.prefix.count))
                let isTimestamp = Publisher.isTimestampPath(path)
                guard Publisher.isManifestPath(path) || isTimestamp else { continue }
                guard let data = try await bucket.get(key: object.key) else { continue }
                do {
                    if isTimestamp {
                        _ = try TimestampPart.decode(try SignedEnvelope.parse(data).signed)
                    } else {
                        _ = try SignedEnvelope.read(data)
                    }
                } catch var error as HotUpdateError {
                    error.subject = bucket.endpoint.describe(key: object.key)
                    throw error
                }
                let target = directory.appendingPathComponent(path)
                try FileSystem.createDirectory(target.deletingLastPathComponent())
                try DurableFile.write(data, to: target)
                if !isTimestamp { pulled.append(path) }
            }
            guard !pulled.isEmpty else {
                throw HotUpdateError(
                    .notFound,
                    "\(remote.location) holds no manifest.json and no channels/*/manifest.json"
                )
            }
            return pulled.sorted()
        }
        #else
        throw HotUpdateError(.unsupported, "this build has no S3 publishing (the Curl trait)")
        #endif
    }

    /// Deletes the package files no kept manifest names: the manifests of the last `keep`
    /// signings of each channel name what stays.
    ///
    /// - Returns: How many files were (or, dry, would be) deleted.
    public func prune(
        _ remote: S3Remote,
        keep: Int,
        dryRun: Bool = false,
        report: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws -> Int {
        #if Curl && canImport(CHotCurl)
        guard keep >= 1 else { throw HotUpdateError(.invalidArgument, "keep at least 1 signing") }
        let (location, bucket) = try Self.bucket(of: remote)
        var options = PublishOptions()
        options.dryRun = dryRun
        return try await lockedAwaiting {
            try await Publisher(
                repository: LocalRepository(files: files),
                location: location,
                bucket: bucket,
                settings: Publisher.Settings(
                    dryRun: dryRun,
                    concurrency: options.concurrency,
                    packageCacheControl: options.packageCacheControl,
                    manifestCacheControl: options.manifestCacheControl,
                    multipartThreshold: options.multipartThreshold,
                    partSize: options.partSize,
                    extraHeaders: [:],
                    allowUnsigned: true
                ),
                report: report
            ).prune(keep: keep)
        }
        #else
        throw HotUpdateError(.unsupported, "this build has no S3 publishing (the Curl trait)")
        #endif
    }

    #if Curl && canImport(CHotCurl)
    /// The bucket of `remote`, with the credentials of the environment or profile.
    static func bucket(of remote: S3Remote) throws -> (S3Location, S3Bucket) {
        let location = try S3Location(remote.location)
        let environment = ProcessInfo.processInfo.environment
        let region = remote.region ?? environment["AWS_REGION"] ?? environment["AWS_DEFAULT_REGION"] ?? "us-east-1"
        let addressing = try remote.addressing.map { text -> S3Endpoint.Addressing in
            guard let value = S3Endpoint.Addressing(rawValue: text) else {
                throw HotUpdateError(.invalidArgument, "addressing is path or virtual, not '\(text)'")
            }
            return value
        }
        let bucket = S3Bucket(
            client: try S3Client(
                endpoint: try S3Endpoint(
                    bucket: location.bucket,
                    endpoint: remote.endpoint,
                    region: region,
                    addressing: addressing
                ),
                credentials: try S3Credentials.load(),
                region: region,
                trust: remote.trust
            )
        )
        return (location, bucket)
    }
    #endif
}
