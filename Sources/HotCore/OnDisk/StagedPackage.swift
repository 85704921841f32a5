import Foundation

/// A package downloaded, verified and unpacked into staging, not yet installed.
struct StagedPackage: Sendable {
    /// The staging entry holding everything below, owned by this process; removed after
    /// install or failure (see ``discard()``).
    var owner: StagingOwner
    /// The staging directory holding everything below.
    var stagingDirectory: URL { owner.directory }
    /// The unpacked tree.
    var tree: URL
    /// The archive's size.
    var size: Int64
    /// The archive's SHA-256.
    var sha256: Digest
    /// The archive's MD5, when the manifest asked for one.
    var md5: Digest?
    /// The tree's regular files with their SHA-256, hashed while they were unpacked.
    var files: [FileList.Entry]
    /// Bytes downloaded to stage it: the archive's size, or a delta's.
    var downloaded: Int64 = 0
    /// Whether the SHA-256s of ``files`` may be the archive's records, taken unhashed
    /// (``ExtractOptions/trustsRecordedDigests``) rather than hashed here.
    var digestsClaimed = false

    /// Removes the staging entry and lets go of it.
    func discard() {
        try? FileSystem.remove(stagingDirectory)
        owner.release()
    }
}
