import Foundation

/// Copies a local folder into staging, hashing each file as it is copied.
enum LocalFolder {
    /// Whether a recorded source URL is a local folder (``UpdaterPatches/installLocal(from:id:version:)``).
    static func isLocalSource(_ sourceURL: String) -> Bool {
        guard let url = URL(string: sourceURL) else { return false }
        return url.isFileURL && url.hasDirectoryPath
    }

    static func stage(_ folder: URL, into owner: StagingOwner, verifier: any Verifier) throws -> StagedPackage {
        let staging = owner.directory
        guard FileSystem.isDirectory(folder) else {
            throw HotUpdateError(.notFound, "the local patch folder is not a directory", subject: folder.path)
        }
        let tree = staging.appendingPathComponent("tree", isDirectory: true)
        try FileSystem.createDirectory(tree)
        var files: [FileList.Entry] = []
        var total: Int64 = 0
        try DirectoryWalker.walk(folder.path) { item in
            let target = tree.appendingPathComponent(item.path)
            switch item.kind {
            case .directory:
                try FileSystem.createDirectory(target)
            case .file:
                let data: Data
                do {
                    data = try Data(contentsOf: URL(fileURLWithPath: item.absolute, isDirectory: false))
                    try data.write(to: target)
                } catch {
                    throw HotUpdateError.wrap(error, as: .fileSystem, "cannot copy \(item.path)")
                }
                let hasher = try verifier.makeHasher(for: .sha256)
                hasher.update(data)
                files.append(FileList.Entry(path: item.path, size: Int64(data.count), sha256: hasher.finalize().hex))
                total += Int64(data.count)
            case .symlink, .other:
                throw HotUpdateError(
                    .unsafeEntry,
                    "only regular files and folders can be installed from a folder",
                    subject: item.path
                )
            }
            return true
        }
        // The version's identity: a digest over its file list.
        let identity = try verifier.makeHasher(for: .sha256)
        for file in files.sorted(by: { $0.path < $1.path }) {
            identity.update(Data("\(file.path)\u{0}\(file.size)\u{0}\(file.sha256)\n".utf8))
        }
        return StagedPackage(
            owner: owner,
            tree: tree,
            size: total,
            sha256: identity.finalize(),
            md5: nil,
            files: files
        )
    }
}
