import Foundation
import Logging

/// A package downloaded, verified and unpacked into staging, not yet installed.
struct StagedPackage: Sendable {
    /// The staging directory holding everything below; removed after install or failure.
    var stagingDirectory: URL
    /// The unpacked tree.
    var tree: URL
    /// The archive's size.
    var size: Int64
    /// The archive's SHA-256.
    var sha256: Digest
    /// The archive's MD5, when the manifest asked for one.
    var md5: Digest?
}

/// Downloads a package while hashing it, checks it against the manifest before a byte
/// of it is parsed, and unpacks it into staging. Runs outside the updater's actor.
struct PackageFetcher: Sendable {
    var configuration: UpdaterConfiguration
    var layout: StoreLayout

    /// Fetches, verifies and unpacks `descriptor` into a new staging directory.
    /// On failure the staging directory is removed and the error names the package.
    func stage(_ descriptor: PackageDescriptor) async throws -> StagedPackage {
        let staging = layout.stagingDirectory.appendingPathComponent(UUID().uuidString, isDirectory: true)
        do {
            try FileSystem.createDirectory(staging)
            let archive = staging.appendingPathComponent("package.archive")
            let (size, sha256, md5) = try await download(descriptor, to: archive)
            try Task.checkCancellation()
            let tree = staging.appendingPathComponent("tree", isDirectory: true)
            var options = configuration.extractOptions
            if let password = descriptor.password { options.password = password }
            do {
                _ = try await configuration.unarchiver.extract(archive, to: tree, options: options, progress: nil)
            } catch {
                throw HotUpdateError.wrap(error, as: .corruptArchive, "cannot unpack the package")
            }
            try? FileSystem.remove(archive)
            return StagedPackage(stagingDirectory: staging, tree: tree, size: size, sha256: sha256, md5: md5)
        } catch {
            try? FileSystem.remove(staging)
            throw HotUpdateError.wrap(error, as: .internalInconsistency, "staging failed", packageID: descriptor.id)
        }
    }

    /// Streams the package to `file`, hashing on the way, and checks size and digests.
    private func download(_ descriptor: PackageDescriptor, to file: URL) async throws -> (Int64, Digest, Digest?) {
        let verifier = configuration.verifier
        let sha256Hasher = try verifier.makeHasher(for: .sha256)
        let md5Hasher = try descriptor.md5.map { _ in try verifier.makeHasher(for: .md5) }
        let limit = descriptor.size ?? configuration.maxPackageBytes
        let request = TransportRequest(
            url: descriptor.url, timeouts: configuration.timeouts, maxBytes: limit)
        configuration.logger.debug(
            "downloading", metadata: ["package": "\(descriptor.id)", "url": "\(descriptor.url.absoluteString)"])

        let writer = try FileWriter(creating: file)
        do {
            let response = try await configuration.transport.fetch(request)
            try response.requireSuccess()
            if let size = descriptor.size, let announced = response.expectedContentLength, announced != size {
                response.body.cancel()
                throw HotUpdateError(
                    .sizeMismatch, "the server announces \(announced) bytes, the manifest says \(size)",
                    subject: descriptor.url.absoluteString)
            }
            for try await chunk in response.body {
                guard writer.bytesWritten + Int64(chunk.count) <= limit else {
                    response.body.cancel()
                    throw oversize(descriptor, limit: limit)
                }
                chunk.withUnsafeBytes { bytes in
                    sha256Hasher.update(bytes)
                    md5Hasher?.update(bytes)
                }
                try writer.write(chunk)
            }
            // A staging download needs no fsync: a crash sweeps staging, and what is
            // installed is flushed before it is recorded.
            try writer.close(sync: false)
        } catch let error as HotUpdateError where error.code == .byteLimitExceeded {
            throw oversize(descriptor, limit: limit)
        }

        let size = writer.bytesWritten
        if let expected = descriptor.size, size != expected {
            throw HotUpdateError(
                .truncated, "the download ended after \(size) of \(expected) bytes",
                subject: descriptor.url.absoluteString)
        }
        let sha256 = sha256Hasher.finalize()
        if let expected = descriptor.sha256, expected != sha256 {
            throw HotUpdateError(
                .digestMismatch, "SHA-256 is \(sha256.hex), the manifest says \(expected.hex)",
                subject: descriptor.url.absoluteString)
        }
        let md5 = md5Hasher?.finalize()
        if let expected = descriptor.md5, let md5, expected != md5 {
            throw HotUpdateError(
                .digestMismatch, "MD5 is \(md5.hex), the manifest says \(expected.hex)",
                subject: descriptor.url.absoluteString)
        }
        return (size, sha256, md5)
    }

    private func oversize(_ descriptor: PackageDescriptor, limit: Int64) -> HotUpdateError {
        if let size = descriptor.size {
            return HotUpdateError(
                .sizeMismatch, "the package is larger than the \(size) bytes the manifest says",
                subject: descriptor.url.absoluteString)
        }
        return HotUpdateError(
            .byteLimitExceeded, "the package is larger than the \(limit)-byte limit",
            subject: descriptor.url.absoluteString)
    }
}
