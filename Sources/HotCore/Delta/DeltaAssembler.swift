import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension PackageFetcher {
    /// The largest header a delta may carry.
    static let maxDeltaHeaderBytes = 16 << 20

    /// Downloads `delta`, checks it like any package, and assembles the target version's tree
    /// in staging from the store's objects, the delta's whole files and its patches. Every
    /// file of the tree is hashed and compared with the target's file list; every path the
    /// delta names is checked (``DeltaLayout/validatePath(_:)``) and no link is followed.
    ///
    /// - Parameters:
    ///   - delta: The delta the manifest lists.
    ///   - descriptor: The target version.
    ///   - base: The installed version the delta applies to.
    ///   - owner: The staging entry; removed on failure.
    /// - Returns: The staged target, with ``StagedPackage/downloaded`` the delta's size.
    /// - Throws: ``HotUpdateError`` saying why the delta was refused; the caller falls back.
    func stageDelta(
        _ delta: PackageDescriptor.Delta,
        of descriptor: PackageDescriptor,
        base: InstalledVersion,
        into owner: StagingOwner,
        observer: FetchObserver = FetchObserver()
    ) async throws -> StagedPackage {
        let staging = owner.directory
        do {
            try checkDeclaredSizes(descriptor)
            var archive = staging.appendingPathComponent("delta.archive")
            var fetched = try PackageDescriptor(
                id: descriptor.id,
                version: descriptor.version,
                url: delta.url,
                size: delta.size,
                sha256: delta.sha256,
                md5: delta.md5
            )
            fetched.deltas = []
            let (size, _, _, kept) = try await download(fetched, to: archive, observer: observer)
            // A resumable download is read where it lies, and let go of once unpacked.
            if let kept { archive = kept.dataURL }
            defer { kept?.close() }
            try Task.checkCancellation()
            observer.verifying()
            let unpacked = staging.appendingPathComponent("delta", isDirectory: true)
            var options = configuration.extractOptions
            options.maxTotalBytes = configuration.maxPackageBytes
            options.fileHasher = nil
            options.symlinks = .refuse
            // A delta is encrypted with its version's password (`hot pack --password`).
            if let password = descriptor.password { options.password = password }
            do {
                _ = try await configuration.unarchiver.extract(
                    archive,
                    to: unpacked,
                    options: options,
                    progress: { _ in }
                )
            } catch {
                throw HotUpdateError.wrap(error, as: .corruptArchive, "cannot unpack the delta")
            }
            if let kept { kept.discard() } else { try? FileSystem.remove(archive) }
            try Task.checkCancellation()
            let tree = staging.appendingPathComponent("tree", isDirectory: true)
            let assembler = DeltaAssembler(
                layout: layout,
                verifier: configuration.verifier,
                patcher: configuration.patcher,
                maxTotalBytes: descriptor.unpackedSize ?? configuration.maxPackageBytes
            )
            let (header, files) = try await FileSystem.offload {
                try assembler.assemble(unpacked, into: tree, descriptor: descriptor, base: base)
            }
            try? FileSystem.remove(unpacked)
            let sha256 = try Digest(algorithm: .sha256, hex: header.targetSHA256)
            return StagedPackage(
                owner: owner,
                tree: tree,
                size: descriptor.size ?? size,
                sha256: sha256,
                md5: descriptor.md5,
                files: files,
                downloaded: size
            )
        } catch {
            try? FileSystem.remove(staging)
            owner.release()
            throw HotUpdateError.wrap(
                error,
                as: .internalInconsistency,
                "the delta was refused",
                packageID: descriptor.id
            )
        }
    }
}

/// Builds a version's tree from an unpacked delta and the store's objects. Blocking; run
/// through ``FileSystem/offload(_:)``.
struct DeltaAssembler: Sendable {
    var layout: StoreLayout
    var verifier: any Verifier
    var patcher: (any BinaryPatcher)?
    /// The most the target tree may hold, the unpacking limit of a full package.
    var maxTotalBytes: Int64

    /// Reads and checks the delta in `unpacked`, then fills `tree`.
    ///
    /// - Returns: The header and the target's file list, every entry checked on disk.
    func assemble(
        _ unpacked: URL,
        into tree: URL,
        descriptor: PackageDescriptor,
        base: InstalledVersion
    ) throws
        -> (DeltaLayout.Header, [FileList.Entry])
    {
        let header = try readHeader(unpacked, descriptor: descriptor, base: base)
        let listURL = unpacked.appendingPathComponent(DeltaLayout.fileListName)
        guard let listInfo = FileInfo(listURL), listInfo.isRegular else {
            throw HotUpdateError(.corruptArchive, "the delta has no file list")
        }
        let target = try FileList.read(from: listURL).files
        var paths = Set<String>()
        var total: Int64 = 0
        for file in target {
            try DeltaLayout.validatePath(file.path)
            try DeltaLayout.validateDigest(file.sha256, "digest of \(file.path)")
            guard paths.insert(file.path).inserted, file.size >= 0 else {
                throw HotUpdateError(.corruptArchive, "the delta's file list names a path twice", subject: file.path)
            }
            total += file.size
            guard total <= maxTotalBytes else {
                throw HotUpdateError(.limitExceeded, "the target holds more than \(maxTotalBytes) bytes")
            }
        }
        // A path that is also another's directory cannot be a file.
        for path in paths {
            var prefix = Substring(path)
            while let slash = prefix.lastIndex(of: "/") {
                prefix = prefix[..<slash]
                if paths.contains(String(prefix)) {
                    throw HotUpdateError(.unsafeEntry, "the delta names a file inside a file", subject: path)
                }
            }
        }
        for removed in header.removed { try DeltaLayout.validatePath(removed) }
        var patches: [String: DeltaLayout.Patch] = [:]
        for patch in header.patches {
            try DeltaLayout.validatePath(patch.path)
            try DeltaLayout.validatePath(patch.patch)
            try DeltaLayout.validateDigest(patch.base, "base of the patch of \(patch.path)")
            guard paths.contains(patch.path), patches.updateValue(patch, forKey: patch.path) == nil else {
                throw HotUpdateError(.corruptArchive, "the delta patches a path it does not list", subject: patch.path)
            }
        }
        let whole = try wholeFiles(in: unpacked.appendingPathComponent(DeltaLayout.filesDirectory, isDirectory: true))
        for path in whole where !paths.contains(path) || patches[path] != nil {
            throw HotUpdateError(.corruptArchive, "the delta holds a file its list does not name", subject: path)
        }

        try FileSystem.createDirectory(tree)
        var directories = Set<String>()
        for file in target {
            let destination = tree.appendingPathComponent(file.path, isDirectory: false)
            let parent = String(file.path.split(separator: "/").dropLast().joined(separator: "/"))
            if !parent.isEmpty, directories.insert(parent).inserted {
                try FileSystem.createDirectory(destination.deletingLastPathComponent())
            }
            if let patch = patches[file.path] {
                guard let patcher, patcher.method == patch.method else {
                    throw HotUpdateError(
                        .unsupported,
                        "the delta holds a '\(patch.method)' patch and no patcher applies it",
                        subject: file.path
                    )
                }
                let baseObject = layout.objectURL(sha256: patch.base)
                guard let info = FileInfo(baseObject), info.isRegular else {
                    throw HotUpdateError(.notFound, "the patch's base file is not in the store", subject: file.path)
                }
                let patchURL = unpacked.appendingPathComponent(DeltaLayout.patchesDirectory, isDirectory: true)
                    .appendingPathComponent(patch.patch, isDirectory: false)
                guard let patchInfo = FileInfo(patchURL), patchInfo.isRegular else {
                    throw HotUpdateError(.corruptArchive, "the delta lacks the patch of \(file.path)")
                }
                try patcher.apply(patch: patchURL, base: baseObject, to: destination, expectedSize: file.size)
            } else if whole.contains(file.path) {
                try FileSystem.rename(
                    unpacked.appendingPathComponent(DeltaLayout.filesDirectory, isDirectory: true)
                        .appendingPathComponent(file.path, isDirectory: false),
                    to: destination,
                    durable: false
                )
            } else {
                let object = layout.objectURL(sha256: file.sha256)
                guard let info = FileInfo(object), info.isRegular else {
                    throw HotUpdateError(.notFound, "the store lacks the file the delta reuses", subject: file.path)
                }
                try linkOrCopy(object, to: destination)
            }
            try check(destination, against: file)
        }
        return (header, target)
    }

    private func readHeader(
        _ unpacked: URL,
        descriptor: PackageDescriptor,
        base: InstalledVersion
    ) throws
        -> DeltaLayout.Header
    {
        let url = unpacked.appendingPathComponent(DeltaLayout.headerName)
        guard let info = FileInfo(url), info.isRegular, info.size <= PackageFetcher.maxDeltaHeaderBytes else {
            throw HotUpdateError(.corruptArchive, "the delta has no readable \(DeltaLayout.headerName)")
        }
        let header: DeltaLayout.Header
        do {
            header = try JSONDecoder().decode(DeltaLayout.Header.self, from: Data(contentsOf: url))
        } catch {
            throw HotUpdateError.wrap(error, as: .corruptArchive, "the delta's header cannot be read")
        }
        guard header.format == DeltaLayout.format else {
            throw HotUpdateError(.unsupported, "delta format \(header.format) is not supported")
        }
        try DeltaLayout.validateDigest(header.baseSHA256, "base digest")
        try DeltaLayout.validateDigest(header.targetSHA256, "target digest")
        guard header.package == descriptor.id, header.targetVersion == descriptor.version,
            header.baseVersion == base.version
        else {
            throw HotUpdateError(
                .corruptArchive,
                "the delta turns \(header.package) \(header.baseVersion) into \(header.targetVersion), not \(base.version) into \(descriptor.version)"
            )
        }
        if let baseSHA = base.sha256, baseSHA.lowercased() != header.baseSHA256 {
            throw HotUpdateError(.corruptArchive, "the delta was made against other content of version \(base.version)")
        }
        if let targetSHA = descriptor.sha256, targetSHA.hex != header.targetSHA256 {
            throw HotUpdateError(.corruptArchive, "the delta builds other content than the manifest's version")
        }
        return header
    }

    /// The regular files under `directory`, relative; anything else there refuses the delta.
    private func wholeFiles(in directory: URL) throws -> Set<String> {
        guard FileInfo(directory) != nil else { return [] }
        var found = Set<String>()
        var pending = [""]
        while let relative = pending.popLast() {
            let url = relative.isEmpty ? directory : directory.appendingPathComponent(relative, isDirectory: true)
            for name in FileSystem.contents(of: url) {
                let path = relative.isEmpty ? name : "\(relative)/\(name)"
                let child = directory.appendingPathComponent(path, isDirectory: false)
                var info = stat()
                guard lstat(child.path, &info) == 0 else {
                    throw HotUpdateError(.corruptArchive, "cannot read the delta's file", subject: path)
                }
                switch info.st_mode & S_IFMT {
                case S_IFREG: found.insert(path)
                case S_IFDIR: pending.append(path)
                default: throw HotUpdateError(.unsafeEntry, "the delta holds something not a file", subject: path)
                }
            }
        }
        return found
    }

    /// Links `object` at `destination` (a new name), or copies it where links are refused.
    private func linkOrCopy(_ object: URL, to destination: URL) throws {
        if link(object.path, destination.path) == 0 { return }
        let code = errno
        guard code == EPERM || code == EMLINK || code == EXDEV || code == ENOTSUP || code == EOPNOTSUPP else {
            throw HotUpdateError.system("cannot link an object to \(destination.path)", errno: code)
        }
        do {
            try FileManager.default.copyItem(at: object, to: destination)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot copy an object to \(destination.path)")
        }
    }

    /// Checks a file of the tree against its entry in the target list.
    private func check(_ url: URL, against file: FileList.Entry) throws {
        guard let info = FileInfo(url), info.isRegular, info.size == file.size else {
            throw HotUpdateError(.sizeMismatch, "the assembled file has not the listed size", subject: file.path)
        }
        let digest = try verifier.digest(ofFile: url, using: .sha256)
        guard digest.hex == file.sha256 else {
            throw HotUpdateError(
                .digestMismatch,
                "the assembled file hashes to \(digest.hex), the list says \(file.sha256)",
                subject: file.path
            )
        }
    }
}
