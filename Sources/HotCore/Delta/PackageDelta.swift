import Foundation

extension PackageDescriptor {
    /// A delta package that turns one installed version into the descriptor's version: the
    /// new and changed files (or binary patches of them), the removed paths and the target's
    /// full file list, in a ZIP archive laid out as the delta layout says.
    ///
    /// A client whose active version's archive has ``baseSHA256`` may download the delta
    /// instead of the full package when it is smaller; on any failure it falls back to the
    /// full package and says so (``SyncReport/PackageOutcome/deltaFallback``).
    public struct Delta: Sendable, Hashable {
        /// The version the delta applies to.
        public var baseVersion: String
        /// The SHA-256 of the base version's full package archive: what an installed version
        /// records, so the delta is chosen by content, not by name. Nil when the source knows
        /// only the base version (the offline-package check): the delta's own header then
        /// decides, and a delta made against other content is refused.
        public var baseSHA256: Digest?
        /// Where the delta archive is, absolute.
        public var url: URL
        /// The delta archive's exact size in bytes, when the source knows it.
        public var size: Int64?
        /// The delta archive's SHA-256 (the signed manifest always gives one).
        public var sha256: Digest?
        /// The delta archive's MD5, for older servers that publish nothing better.
        public var md5: Digest?

        /// Creates a delta entry.
        ///
        /// - Throws: ``HotUpdateError/Code/manifestInvalid`` for a base version that is not a
        ///   safe path component, a negative size, or digests that are not SHA-256.
        public init(
            baseVersion: String,
            baseSHA256: Digest?,
            url: URL,
            size: Int64?,
            sha256: Digest?,
            md5: Digest? = nil
        )
            throws
        {
            try PackageDescriptor.validateComponent(baseVersion, what: "delta base version")
            guard size ?? 0 >= 0, baseSHA256.map({ $0.algorithm == .sha256 }) ?? true,
                sha256.map({ $0.algorithm == .sha256 }) ?? true, sha256 != nil || md5 != nil
            else {
                throw HotUpdateError(.manifestInvalid, "the delta from \(baseVersion) has a bad size or digest")
            }
            self.baseVersion = baseVersion
            self.baseSHA256 = baseSHA256
            self.url = url
            self.size = size
            self.sha256 = sha256
            self.md5 = md5
        }

        /// Whether the delta applies to `installed`: same version, and the same archive
        /// digest when the delta names one.
        public func applies(to installed: InstalledVersion) -> Bool {
            guard installed.version == baseVersion else { return false }
            guard let baseSHA256 else { return true }
            return installed.sha256?.lowercased() == baseSHA256.hex
        }
    }
}

/// How a delta archive is laid out, version the delta layout.
///
/// ```
/// hotdelta.json     DeltaLayout.Header: base and target, removed paths, patches
/// files.list        the target's full file list (FileList format: sha256, size, path)
/// files/<path>      each new or changed file stored whole
/// patches/<n>       binary patches, each against one file of the base
/// ```
///
/// Every path the delta names is hostile input: ``DeltaLayout/validatePath(_:)`` refuses
/// `..`, absolute paths, empty components and control characters, and the assembler never
/// follows a link.
package enum DeltaLayout {
    /// The format this code reads and writes.
    package static let format = 1
    /// The header's name in the archive.
    package static let headerName = "hotdelta.json"
    /// The target file list's name in the archive.
    package static let fileListName = "files.list"
    /// The directory of whole files.
    package static let filesDirectory = "files"
    /// The directory of patches.
    package static let patchesDirectory = "patches"

    /// The header of a delta archive.
    package struct Header: Codable, Sendable, Hashable {
        /// the delta layout.
        package var format: Int
        /// The package id.
        package var package: String
        /// The base version.
        package var baseVersion: String
        /// The base's full package SHA-256, hex.
        package var baseSHA256: String
        /// The target version.
        package var targetVersion: String
        /// The target's full package SHA-256, hex.
        package var targetSHA256: String
        /// Paths of the base that the target no longer has.
        package var removed: [String]
        /// Files of the target built from a base file and a patch.
        package var patches: [Patch]

        /// Creates a header.
        package init(
            package: String,
            baseVersion: String,
            baseSHA256: String,
            targetVersion: String,
            targetSHA256: String,
            removed: [String],
            patches: [Patch]
        ) {
            self.format = DeltaLayout.format
            self.package = package
            self.baseVersion = baseVersion
            self.baseSHA256 = baseSHA256
            self.targetVersion = targetVersion
            self.targetSHA256 = targetSHA256
            self.removed = removed
            self.patches = patches
        }
    }

    /// One patched file.
    package struct Patch: Codable, Sendable, Hashable {
        /// The target path.
        package var path: String
        /// The base file's SHA-256, hex: the object the patch applies to.
        package var base: String
        /// The patch's name under the delta layout.
        package var patch: String
        /// The patch's format, as a ``BinaryPatcher`` names it (`zstd`).
        package var method: String

        /// Creates a patch entry.
        package init(path: String, base: String, patch: String, method: String) {
            self.path = path
            self.base = base
            self.patch = patch
            self.method = method
        }
    }

    /// Checks a path a delta names: relative, `/`-separated, no empty, `.` or `..`
    /// component, no backslash, no control character, at most 4,096 bytes.
    ///
    /// - Throws: ``HotUpdateError/Code/unsafeEntry`` naming the path.
    package static func validatePath(_ path: String) throws {
        let components = path.split(separator: "/", omittingEmptySubsequences: false)
        let bad =
            path.isEmpty || path.utf8.count > 4096 || path.hasPrefix("/")
            || components.contains { $0.isEmpty || $0 == "." || $0 == ".." }
            || path.unicodeScalars.contains { $0.value < 0x20 || $0 == "\\" || $0.value == 0x7F }
        if bad {
            throw HotUpdateError(.unsafeEntry, "the delta names an unsafe path", subject: path)
        }
    }

    /// Checks a SHA-256 written as hex in a delta.
    static func validateDigest(_ hex: String, _ what: String) throws {
        let allowed = Set("0123456789abcdef".utf8)
        guard hex.utf8.count == 64, hex.utf8.allSatisfy({ allowed.contains($0) }) else {
            throw HotUpdateError(.corruptArchive, "the delta's \(what) is not a SHA-256")
        }
    }
}

extension PackageDescriptor.Delta {
    /// The version of the delta layout this client reads; a manifest's delta of another
    /// format is skipped and the full package downloaded.
    public static let format = DeltaLayout.format
}
