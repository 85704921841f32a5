#if Curl && canImport(CHotCurl)
import ArgumentParser
import Foundation
import HotCore
import HotPublish
import HotManifest
import HotStore
import HotTransport
import HotVerify

/// `hot publish REPO s3://BUCKET/PREFIX`
struct Publish: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Upload a repository to S3-compatible object storage: package files first, manifests last.",
        discussion: """
            Every file under packages/ is uploaded only when the bucket lacks it (If-None-Match: *), \
            with Cache-Control "public, max-age=31536000, immutable" and its content type; files \
            larger than --multipart-threshold go up in parts, and a rerun resumes an interrupted \
            upload from the parts already stored. Only when every package file is in the bucket \
            are the manifests uploaded (Cache-Control "no-cache"), each after a copy under \
            history/ that --prune reads; a manifest naming a file the bucket lacks is never \
            uploaded. A publish stopped at any point leaves the previous manifests serving a \
            consistent repository; run it again to finish.

            --prune then deletes the package files that neither a live manifest nor the last \
            --keep manifests of any channel (live included) name. --dry-run prints what would \
            be uploaded and deleted and changes nothing.

            Credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, else \
            the profile AWS_PROFILE (or default) in ~/.aws/credentials. Region: --region, else \
            AWS_REGION, else us-east-1. Requests are signed by libcurl (SigV4).
            """
    )

    enum ACL: String, ExpressibleByArgument, CaseIterable {
        case `private`
        case publicRead = "public-read"
    }

    @Argument(help: "The repository directory.") var repo: String

    @Argument(help: "Where to publish: s3://BUCKET/PREFIX.") var destination: String

    @OptionGroup var bucketOptions: BucketOptions

    @Option(help: "A canned ACL for every uploaded object (private or public-read); the bucket's default when omitted.")
    var acl: ACL?

    @Flag(help: "Print what would be uploaded (and deleted) without changing the bucket.") var dryRun = false

    @Option(help: "How many files are uploaded at once.") var concurrency = 4

    @Option(help: "Cache-Control of package files.") var packageCacheControl = "public, max-age=31536000, immutable"

    @Option(help: "Cache-Control of manifests.") var manifestCacheControl = "no-cache"

    @Option(help: "Files larger than this many MiB go up in a multipart upload.") var multipartThreshold = 16

    @Option(help: "The part size of a multipart upload, in MiB (5 or more).") var partSize = 8

    @Flag(help: "After publishing, delete package files no kept manifest names.") var prune = false

    @Option(help: "With --prune: how many of each channel's newest manifests (the live one included) keep their files.")
    var keep = 5

    @Flag(help: "Publish manifests that carry no signature (development repositories only).") var allowUnsigned = false

    func validate() throws {
        guard concurrency >= 1 else { throw ValidationError("--concurrency must be 1 or more") }
        guard partSize >= 5, multipartThreshold >= partSize else {
            throw ValidationError("--part-size must be 5 MiB or more, and --multipart-threshold at least --part-size")
        }
        guard keep >= 1 else { throw ValidationError("--keep must be 1 or more") }
    }

    func run() async throws {
        try await runReportingErrors {
            let repository = Repository(directory: directoryURL(repo))
            let remote = try bucketOptions.remote(destination, acl: acl?.rawValue)
            let summary = try await repository.publish(
                to: remote,
                options: Repository.PublishOptions(
                    dryRun: dryRun,
                    concurrency: concurrency,
                    packageCacheControl: packageCacheControl,
                    manifestCacheControl: manifestCacheControl,
                    multipartThreshold: Int64(multipartThreshold) << 20,
                    partSize: partSize << 20,
                    allowUnsigned: allowUnsigned
                ),
                report: emit
            )
            emit(
                "\(dryRun ? "would publish" : "published") \(destination): \(summary.uploaded) package file(s) uploaded, "
                    + "\(summary.present) already there, \(summary.manifestsUploaded) manifest(s) uploaded, "
                    + "\(summary.manifestsUnchanged) unchanged"
            )
            if prune {
                let deleted = try await repository.prune(remote, keep: keep, dryRun: dryRun, report: emit)
                emit("\(dryRun ? "would delete" : "deleted") \(deleted) package file(s)")
            }
        }
    }
}

/// Where a bucket is and how to reach it: the options `hot publish` and `hot pull` share.
struct BucketOptions: ParsableArguments {
    @Option(help: "The S3-compatible endpoint (http or https URL); AWS's regional endpoint when omitted.")
    var endpoint: String?

    @Option(help: "The region (signing scope); AWS_REGION or us-east-1 when omitted.") var region: String?

    @Option(help: "path (ENDPOINT/BUCKET/KEY) or virtual (BUCKET.HOST/KEY); path with --endpoint, virtual without.")
    var addressing: String?

    func validate() throws {
        if let addressing, !["path", "virtual"].contains(addressing) {
            throw ValidationError("--addressing takes path or virtual, not '\(addressing)'")
        }
    }

    @OptionGroup(title: "TLS (an https endpoint)") var tlsOptions: TLSOptions

    /// The remote at `location` (`s3://BUCKET/PREFIX`) these options reach.
    func remote(_ location: String, acl: String? = nil) throws -> S3Remote {
        let endpointURL = try endpoint.map { text -> URL in
            guard let url = URL(string: text) else { throw ValidationError("--endpoint \(text) is not a URL") }
            return url
        }
        return S3Remote(
            location: location,
            endpoint: endpointURL,
            region: region,
            addressing: addressing,
            trust: try tlsOptions.trust(),
            acl: acl
        )
    }
}

/// `hot pull s3://BUCKET/PREFIX --repo DIR`
struct Pull: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Download a published repository's live manifests into a directory, to edit and sign there.",
        discussion: """
            Only manifest.json and channels/*/manifest.json are downloaded, with the timestamp \
            beside each, each checked to be what it says and written atomically; package files \
            stay in the bucket. Edit and sign \
            in DIR as usual (hot release, hot rollout, hot sign) and `hot publish DIR \
            s3://BUCKET/PREFIX`: a manifest may name package files only the bucket holds. This \
            is how the release console works on a bucket.
            """
    )

    @Argument(help: "Where the repository is published: s3://BUCKET/PREFIX.") var source: String
    @Option(help: "The directory to write the manifests to.") var repo: String
    @OptionGroup var bucketOptions: BucketOptions

    func run() async throws {
        try await runReportingErrors {
            let pulled = try await Repository(directory: directoryURL(repo)).pull(
                from: try bucketOptions.remote(source)
            )
            emit("pulled \(pulled.count) manifest(s) from \(source): \(pulled.joined(separator: ", "))")
        }
    }
}
#endif
