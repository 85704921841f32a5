import Foundation
import Logging

/// Where a flight reports how far it has come; called from any thread.
struct FetchObserver: Sendable {
    /// Bytes of the archive received so far, and the size when known.
    var received: @Sendable (_ bytes: Int64, _ expected: Int64?) -> Void = { _, _ in }
    /// The download is complete: checking and unpacking start.
    var verifying: @Sendable () -> Void = {}
    /// Unpacking advanced.
    var unpacked: @Sendable (ExtractionReport.Progress) -> Void = { _ in }
}

/// Downloads a package while hashing it, checks it against the manifest before a byte
/// of it is parsed, and unpacks it into staging. Runs outside the updater's actor.
struct PackageFetcher: Sendable {
    var configuration: UpdaterConfiguration
    var layout: StoreLayout

    /// The unpacked size from which a tree's writeback starts as soon as it is unpacked
    /// (``FileSystem/beginWriteback(containing:)``); below it the commit's flush is short anyway.
    static let earlyWritebackBytes: Int64 = 16 << 20

    /// Fetches, verifies and unpacks `descriptor` into the staging entry `owner` holds, hashing
    /// every file as it is written (``ExtractOptions/fileHasher``) unless the archive, checked
    /// against the manifest's SHA-256, records the file's SHA-256
    /// (``ExtractOptions/trustsRecordedDigests``); files an unarchiver did not hash are hashed
    /// after. On failure the staging entry is removed and the error names the package.
    /// Refuses a package whose manifest declares more bytes than
    /// ``UpdaterConfiguration/maxPackageBytes``, downloaded or unpacked, before a byte of it
    /// is downloaded.
    func checkDeclaredSizes(_ descriptor: PackageDescriptor) throws {
        let limit = configuration.maxPackageBytes
        if let unpacked = descriptor.unpackedSize, unpacked > limit {
            throw HotUpdateError(
                .limitExceeded,
                "the package unpacks to \(unpacked) bytes, more than the \(limit) allowed",
                subject: descriptor.url.absoluteString
            )
        }
        if let size = descriptor.size, size > limit {
            throw HotUpdateError(
                .limitExceeded,
                "the package is \(size) bytes, more than the \(limit) allowed",
                subject: descriptor.url.absoluteString
            )
        }
    }

    func stage(
        _ descriptor: PackageDescriptor,
        into owner: StagingOwner,
        observer: FetchObserver = FetchObserver()
    )
        async throws -> StagedPackage
    {
        let staging = owner.directory
        do {
            try checkDeclaredSizes(descriptor)
            var archive = staging.appendingPathComponent("package.archive")
            let (size, sha256, md5, kept) = try await PhaseRecorder.measure(\.downloadSeconds) {
                try await download(descriptor, to: archive, observer: observer)
            }
            // A resumable download is unpacked where it lies: killed while unpacking, the next
            // attempt finds it whole and checks it instead of downloading it again.
            if let kept { archive = kept.dataURL }
            defer { kept?.close() }
            try Task.checkCancellation()
            observer.verifying()
            let tree = staging.appendingPathComponent(StoreSweeper.stagedTreeName, isDirectory: true)
            var options = configuration.extractOptions
            if let password = descriptor.password { options.password = password }
            // The signed figure, exact, is tighter against bombs than the limit.
            options.maxTotalBytes = descriptor.unpackedSize ?? configuration.maxPackageBytes
            let verifier = configuration.verifier
            options.fileHasher = { try verifier.makeHasher(for: .sha256) }
            // The archive matched the manifest's SHA-256 before a byte of it was parsed, so the
            // per-file SHA-256s it records (hot pack writes them) are as good as the bytes; the
            // reader still checks every entry's CRC-32. Without a SHA-256 every file is hashed.
            options.trustsRecordedDigests = descriptor.sha256?.algorithm == .sha256
            let report: ExtractionReport
            do {
                report = try await PhaseRecorder.measure(\.unpackSeconds) {
                    try await configuration.unarchiver.extract(
                        archive,
                        to: tree,
                        options: options,
                        progress: observer.unpacked
                    )
                }
            } catch {
                // A package that matched its digest and cannot be unpacked will not unpack next time.
                if !(error is CancellationError), (error as? HotUpdateError)?.code != .cancelled { kept?.discard() }
                throw HotUpdateError.wrap(error, as: .corruptArchive, "cannot unpack the package")
            }
            if let kept { kept.discard() } else { try? FileSystem.remove(archive) }
            // A large tree starts on its way to the disk while its files are adopted; the
            // commit's flush then waits for less (on disk, 200 MB: 160 ms became 25 ms).
            if report.totalBytes >= Self.earlyWritebackBytes { FileSystem.beginWriteback(containing: tree) }
            try Task.checkCancellation()
            let files = try await PhaseRecorder.measure(\.unpackSeconds) {
                try await FileSystem.offload { try Self.installedFiles(report, in: tree, verifier: verifier) }
            }
            return StagedPackage(
                owner: owner,
                tree: tree,
                size: size,
                sha256: sha256,
                md5: md5,
                files: files,
                downloaded: size,
                digestsClaimed: options.trustsRecordedDigests
            )
        } catch {
            try? FileSystem.remove(staging)
            owner.release()
            throw HotUpdateError.wrap(error, as: .internalInconsistency, "staging failed", packageID: descriptor.id)
        }
    }

    /// The report's files with their SHA-256; a file the unarchiver did not hash (one that
    /// ignores ``ExtractOptions/fileHasher``, or hashed with another algorithm) is hashed here.
    static func installedFiles(
        _ report: ExtractionReport,
        in tree: URL,
        verifier: any Verifier
    ) throws
        -> [FileList.Entry]
    {
        try report.files.map { file in
            let digest: Digest
            if let reported = file.digest, reported.algorithm == .sha256 {
                digest = reported
            } else {
                digest = try verifier.digest(ofFile: tree.appendingPathComponent(file.path), using: .sha256)
            }
            return FileList.Entry(path: file.path, size: file.size, sha256: digest.hex)
        }
    }

    /// Streams the package to `file`, hashing on the way, and checks size and digests.
    func download(
        _ descriptor: PackageDescriptor,
        to file: URL,
        observer: FetchObserver
    ) async throws
        -> (Int64, Digest, Digest?, PartialDownload?)
    {
        let policy = configuration.partialDownloads
        let key = descriptor.sha256.flatMap { $0.algorithm == .sha256 ? $0.hex : nil }
        PartialDownload.prune(layout, policy: policy, keeping: key)
        if policy.isEnabled, let key, (descriptor.size ?? 0) <= policy.maxTotalBytes,
            let partial = try? PartialDownload.open(layout, key: key)
        {
            let (size, sha256, md5) = try await resumableDownload(descriptor, partial: partial, observer: observer)
            return (size, sha256, md5, partial)
        }
        let check = try DownloadCheck(descriptor, configuration: configuration)
        let request = TransportRequest(url: descriptor.url, timeouts: configuration.timeouts, maxBytes: check.limit)
        configuration.logger.debug(
            "downloading",
            metadata: ["package": "\(descriptor.id)", "url": "\(descriptor.url.absoluteString)"]
        )

        let writer = try FileWriter(creating: file)
        do {
            let response = try await configuration.transport.fetch(request)
            try response.requireSuccess()
            try check.checkAnnounced(response)
            let expected = descriptor.size ?? response.expectedContentLength
            observer.received(0, expected)
            for try await chunk in response.body {
                do {
                    try chunk.withUnsafeBytes { try check.take($0) }
                } catch {
                    response.body.cancel()
                    throw error
                }
                try writer.write(chunk)
                observer.received(writer.bytesWritten, expected)
            }
            // A staging download needs no fsync: a crash sweeps staging, and what is
            // installed is flushed before it is recorded.
            try writer.close(sync: false)
        } catch let error as HotUpdateError where error.code == .byteLimitExceeded {
            throw check.oversize()  // the transport's own limit, in the manifest's terms
        }
        let (size, sha256, md5) = try check.finish()
        return (size, sha256, md5, nil)
    }
}
