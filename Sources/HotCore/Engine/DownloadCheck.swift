import Foundation

/// The one check of a package's bytes against its manifest entry, used by every download
/// (straight to staging, or through a resumable partial file): the byte limit while the
/// bytes arrive, the size the server announces, and, at the end, the size and the digests.
/// Nothing downloaded is unpacked before ``finish()`` accepted it.
final class DownloadCheck {
    let descriptor: PackageDescriptor
    /// The most bytes accepted: the manifest's size, else ``UpdaterConfiguration/maxPackageBytes``.
    let limit: Int64
    private let verifier: any Verifier
    private var sha256: any DigestHasher
    private var md5: (any DigestHasher)?
    /// The bytes taken so far.
    private(set) var received: Int64 = 0

    init(_ descriptor: PackageDescriptor, configuration: UpdaterConfiguration) throws {
        self.descriptor = descriptor
        limit = descriptor.size ?? configuration.maxPackageBytes
        verifier = configuration.verifier
        sha256 = try verifier.makeHasher(for: .sha256)
        md5 = try Self.hashesMD5(descriptor) ? verifier.makeHasher(for: .md5) : nil
    }

    /// Whether the bytes are hashed with MD5 too: only when the manifest gives an MD5 and no
    /// SHA-256. The SHA-256 decides whenever it is given; hashing the bytes twice cost a
    /// quarter of an install's time.
    static func hashesMD5(_ descriptor: PackageDescriptor) -> Bool {
        descriptor.md5 != nil && descriptor.sha256 == nil
    }

    private var subject: String { descriptor.url.absoluteString }

    /// Starts over from no bytes (a server that sends the whole file again).
    func restart() throws {
        sha256 = try verifier.makeHasher(for: .sha256)
        md5 = try Self.hashesMD5(descriptor) ? verifier.makeHasher(for: .md5) : nil
        received = 0
    }

    /// Refuses a response whose announced length is not the manifest's size.
    func checkAnnounced(_ response: TransportResponse) throws {
        if let size = descriptor.size, let announced = response.expectedContentLength, announced != size {
            response.body.cancel()
            throw HotUpdateError(
                .sizeMismatch,
                "the server announces \(announced) bytes, the manifest says \(size)",
                subject: subject
            )
        }
    }

    /// Takes the next bytes into the digests.
    ///
    /// - Throws: ``oversize()`` when they go past ``limit``.
    func take(_ bytes: UnsafeRawBufferPointer) throws {
        guard received + Int64(bytes.count) <= limit else { throw oversize() }
        sha256.update(bytes)
        md5?.update(bytes)
        received += Int64(bytes.count)
    }

    /// The error for bytes past the limit: ``HotUpdateError/Code/sizeMismatch`` when the
    /// manifest gave the size, else ``HotUpdateError/Code/byteLimitExceeded``.
    func oversize() -> HotUpdateError {
        if let size = descriptor.size {
            return HotUpdateError(
                .sizeMismatch,
                "the package is larger than the \(size) bytes the manifest says",
                subject: subject
            )
        }
        return HotUpdateError(
            .byteLimitExceeded,
            "the package is larger than the \(limit)-byte limit",
            subject: subject
        )
    }

    /// Accepts the bytes taken when their size and digests are the manifest's.
    ///
    /// - Returns: The size and the digests. The MD5 is the one computed when the manifest
    ///   gives no SHA-256; else it is the manifest's, which the SHA-256 the bytes matched
    ///   vouches for as far as the manifest does.
    /// - Throws: ``HotUpdateError/Code/truncated`` for fewer bytes than the manifest says,
    ///   ``HotUpdateError/Code/digestMismatch`` for another SHA-256 or MD5.
    func finish() throws -> (size: Int64, sha256: Digest, md5: Digest?) {
        if let size = descriptor.size, received != size {
            throw HotUpdateError(.truncated, "the download ended after \(received) of \(size) bytes", subject: subject)
        }
        let sha256 = sha256.finalize()
        if let expected = descriptor.sha256, expected != sha256 {
            throw HotUpdateError(
                .digestMismatch,
                "SHA-256 is \(sha256.hex), the manifest says \(expected.hex)",
                subject: subject
            )
        }
        let md5 = md5?.finalize()
        if let expected = descriptor.md5, let md5, expected != md5 {
            throw HotUpdateError(
                .digestMismatch,
                "MD5 is \(md5.hex), the manifest says \(expected.hex)",
                subject: subject
            )
        }
        return (received, sha256, md5 ?? descriptor.md5)
    }
}
