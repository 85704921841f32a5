import Foundation
import HotCore

/// Writes a delta package (the layout of HotCore's `DeltaLayout`) that turns one version's
/// tree into another's: each new or changed file whole, or as a zstd patch of the file at
/// the same path in the base when the patch is at most half the file compressed alone and
/// applies back to the exact file; the removed paths; and the target's full file list. A
/// file whose content the base already holds (unchanged, moved or copied) costs nothing:
/// the client takes it from its store's objects.
///
/// ```swift
/// let summary = try DeltaWriter.write(
///     packageID: "web", base: .init(version: "3", sha256: old.hex, directory: oldTree),
///     target: .init(version: "4", sha256: new.hex, directory: newTree),
///     to: deltaFile, verifier: CryptoVerifier())
/// ```
public enum DeltaWriter {
    /// One side of a delta: a version, its full archive's SHA-256, and its unpacked tree.
    public struct Side: Sendable {
        /// The version.
        public var version: String
        /// The full package archive's SHA-256, hex.
        public var sha256: String
        /// The version's files.
        public var directory: URL

        /// Creates a side.
        public init(version: String, sha256: String, directory: URL) {
            self.version = version
            self.sha256 = sha256
            self.directory = directory
        }
    }

    /// Options for ``DeltaWriter/write(packageID:base:target:to:verifier:options:)``.
    public struct Options: Sendable {
        /// Makes binary patches; nil stores every changed file whole. By default a patcher
        /// where this build can make patches (``ZstdPatcher/canMakePatches``), nil elsewhere.
        public var patcher: ZstdPatcher?
        /// Files smaller than this are stored whole.
        public var minPatchBytes: Int64
        /// A patch is kept when at most this fraction of the file compressed alone.
        public var maxPatchRatio: Double
        /// How the delta archive is written.
        public var zip: ZipWriter.Options

        /// Creates options.
        public init(
            patcher: ZstdPatcher? = ZstdPatcher.canMakePatches ? ZstdPatcher() : nil,
            minPatchBytes: Int64 = 4096,
            maxPatchRatio: Double = 0.5,
            zip: ZipWriter.Options = ZipWriter.Options()
        ) {
            self.patcher = patcher
            self.minPatchBytes = minPatchBytes
            self.maxPatchRatio = maxPatchRatio
            self.zip = zip
        }
    }

    /// What a delta holds.
    public struct Summary: Sendable, Hashable {
        /// Files stored whole (new, or changed without a worthwhile patch).
        public var wholeFiles: Int
        /// Files stored as patches.
        public var patchedFiles: Int
        /// Files the base already holds.
        public var reusedFiles: Int
        /// Paths removed.
        public var removedPaths: Int
        /// The delta archive's size.
        public var archiveBytes: Int64
    }

    /// Writes the delta from `base` to `target` at `archive`.
    ///
    /// - Throws: `HotUpdateError` when a tree cannot be read (a link or special
    ///   file in it included) or the archive cannot be written.
    @discardableResult
    public static func write(
        packageID: String,
        base: Side,
        target: Side,
        to archive: URL,
        verifier: any Verifier,
        options: Options = Options()
    ) throws -> Summary {
        let baseFiles = try listFiles(base.directory, verifier: verifier)
        let targetFiles = try listFiles(target.directory, verifier: verifier)
        let baseByPath = Dictionary(baseFiles.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first })
        let baseDigests = Set(baseFiles.map(\.sha256))
        let targetPaths = Set(targetFiles.map(\.path))

        let work = archive.deletingLastPathComponent()
            .appendingPathComponent(".delta-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileSystem.remove(work) }
        let filesDirectory = work.appendingPathComponent(DeltaLayout.filesDirectory, isDirectory: true)
        let patchesDirectory = work.appendingPathComponent(DeltaLayout.patchesDirectory, isDirectory: true)
        try FileSystem.createDirectory(filesDirectory)
        var summary = Summary(wholeFiles: 0, patchedFiles: 0, reusedFiles: 0, removedPaths: 0, archiveBytes: 0)
        var patches: [DeltaLayout.Patch] = []
        for file in targetFiles {
            if baseDigests.contains(file.sha256) {
                summary.reusedFiles += 1
                continue
            }
            let source = target.directory.appendingPathComponent(file.path, isDirectory: false)
            if let old = baseByPath[file.path], let patcher = options.patcher, file.size >= options.minPatchBytes,
                file.size <= patcher.maxFileBytes, old.size <= patcher.maxFileBytes,
                let patch = try worthwhilePatch(
                    from: base.directory.appendingPathComponent(old.path, isDirectory: false),
                    to: source,
                    patcher: patcher,
                    ratio: options.maxPatchRatio
                )
            {
                let name = "\(patches.count)"
                try FileSystem.createDirectory(patchesDirectory)
                try write(patch, to: patchesDirectory.appendingPathComponent(name))
                patches.append(
                    DeltaLayout.Patch(path: file.path, base: old.sha256, patch: name, method: patcher.method)
                )
                summary.patchedFiles += 1
                continue
            }
            let destination = filesDirectory.appendingPathComponent(file.path, isDirectory: false)
            try FileSystem.createDirectory(destination.deletingLastPathComponent())
            do {
                try FileManager.default.copyItem(at: source, to: destination)
            } catch {
                throw HotUpdateError.wrap(error, as: .fileSystem, "cannot copy \(file.path) into the delta")
            }
            summary.wholeFiles += 1
        }
        let removed = baseFiles.map(\.path).filter { !targetPaths.contains($0) }
        summary.removedPaths = removed.count
        let header = DeltaLayout.Header(
            package: packageID,
            baseVersion: base.version,
            baseSHA256: base.sha256,
            targetVersion: target.version,
            targetSHA256: target.sha256,
            removed: removed,
            patches: patches
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        try write(try encoder.encode(header), to: work.appendingPathComponent(DeltaLayout.headerName))
        try write(FileList(files: targetFiles).encoded(), to: work.appendingPathComponent(DeltaLayout.fileListName))
        summary.archiveBytes = try ZipWriter.write(directory: work, to: archive, options: options.zip).archiveBytes
        return summary
    }

    /// A patch from `base` to `target` when it is at most `ratio` of `target` compressed
    /// alone and applies back to exactly `target`; nil otherwise.
    static func worthwhilePatch(from base: URL, to target: URL, patcher: ZstdPatcher, ratio: Double) throws -> Data? {
        let baseData: Data
        let targetData: Data
        do {
            baseData = try Data(contentsOf: base)
            targetData = try Data(contentsOf: target)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot read \(target.path) or its base")
        }
        let patch = try patcher.makePatch(base: baseData, target: targetData)
        let alone = try patcher.compressedSize(of: targetData)
        guard Double(patch.count) <= ratio * Double(alone) else { return nil }
        // Verified at publish time: a patch that does not give back the file is never shipped.
        let back = try patcher.applied(patch: patch, base: baseData, expectedSize: Int64(targetData.count))
        guard back == targetData else {
            throw HotUpdateError(.internalInconsistency, "the zstd patch of \(target.path) does not round-trip")
        }
        return patch
    }

    /// The regular files under `directory` with their SHA-256, sorted by path.
    ///
    /// - Throws: `HotUpdateError.Code.invalidArgument` for a link or special file.
    public static func listFiles(_ directory: URL, verifier: any Verifier) throws -> [FileList.Entry] {
        var files: [FileList.Entry] = []
        var pending = [""]
        while let relative = pending.popLast() {
            let url = relative.isEmpty ? directory : directory.appendingPathComponent(relative, isDirectory: true)
            for name in FileSystem.contents(of: url) {
                let path = relative.isEmpty ? name : "\(relative)/\(name)"
                let child = directory.appendingPathComponent(path, isDirectory: false)
                let values = try? child.resourceValues(forKeys: [
                    .isRegularFileKey, .isDirectoryKey, .isSymbolicLinkKey, .fileSizeKey,
                ])
                if values?.isSymbolicLink == true {
                    throw HotUpdateError(.invalidArgument, "a delta cannot hold a link", subject: path)
                } else if values?.isDirectory == true {
                    pending.append(path)
                } else if values?.isRegularFile == true {
                    let digest = try verifier.digest(ofFile: child, using: .sha256)
                    files.append(FileList.Entry(path: path, size: Int64(values?.fileSize ?? 0), sha256: digest.hex))
                } else {
                    throw HotUpdateError(.invalidArgument, "not a regular file", subject: path)
                }
            }
        }
        return files.sorted { $0.path < $1.path }
    }

    private static func write(_ data: Data, to url: URL) throws {
        do {
            try data.write(to: url)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot write \(url.lastPathComponent)")
        }
    }
}
