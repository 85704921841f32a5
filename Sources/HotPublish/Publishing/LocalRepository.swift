import Foundation
import HotCore
import HotManifest
import HotVerify

/// What a repository on disk offers for publishing: its immutable files and its manifests.
package struct LocalRepository {
    /// Folders whose files are named by their content and never change.
    package static let immutableFolders = ["packages", "deltas", "filelists", "manifests"]

    package struct Manifest {
        /// The path in the repository: `manifest.json` or `channels/NAME/manifest.json`.
        package var path: String
        package var data: Data
        package var body: SignedManifestBody
        package var signatureCount: Int
        /// The repository paths of the package files it names (URLs outside the repository left out).
        package var namedPaths: Set<String>

        /// Where its copy for `hot publish --prune` goes: `history/manifest-VERSION.json` beside it.
        package var historyPath: String { Self.historyPath(of: path, version: body.version) }

        package static func historyPath(of path: String, version: Int) -> String {
            let directory = (path as NSString).deletingLastPathComponent
            return (directory.isEmpty ? "" : directory + "/") + "history/manifest-\(version).json"
        }
    }

    package let files: RepositoryFiles

    /// The repository `files` describe.
    package init(files: RepositoryFiles) {
        self.files = files
    }

    /// Every regular file under the immutable folders: repository path → file URL.
    package func immutableFiles() -> [(path: String, url: URL)] {
        var result: [(String, URL)] = []
        for folder in Self.immutableFolders {
            let directory = files.root.appendingPathComponent(folder, isDirectory: true)
            guard FileSystem.isDirectory(directory) else { continue }
            // Hidden entries are left out; links are not followed, so nothing outside the folder is listed.
            try? DirectoryWalker.walk(directory.path) { item in
                guard !item.name.hasPrefix(".") else { return false }
                if item.kind == .file {
                    result.append((folder + "/" + item.path, URL(fileURLWithPath: item.absolute, isDirectory: false)))
                }
                return true
            }
        }
        return result.sorted { $0.0 < $1.0 }
    }

    /// Every channel's timestamp (`timestamp.json` beside its manifest), with the repository
    /// path of the content-addressed manifest it names, if it names one.
    package func timestamps() throws -> [(path: String, data: Data, names: String?)] {
        try files.channels().compactMap { channel in
            let url = files.timestampURL(channel: channel)
            guard FileManager.default.fileExists(atPath: url.path) else { return nil }
            let path = files.timestampPath(channel: channel)
            let data: Data
            do {
                data = try Data(contentsOf: url)
            } catch {
                throw HotUpdateError.wrap(error, as: .fileSystem, "cannot read \(path)")
            }
            let part = try TimestampPart.decode(try SignedEnvelope.parse(data).signed)
            return (path, data, part.manifest.path.flatMap { Self.repositoryPath(of: $0, relativeTo: path) })
        }
    }

    /// The repository path of the content-addressed copy of manifest bytes `data`
    /// (`manifests/<sha256>.json`), which timestamps name.
    package static func contentAddressedPath(of data: Data) throws -> String {
        "manifests/\(try CryptoVerifier().digest(of: data, using: .sha256).hex).json"
    }

    /// Every manifest, read and decoded.
    package func manifests() throws -> [Manifest] {
        try files.channels().map { channel in
            let path = files.manifestPath(channel: channel)
            return try Self.decode(try files.manifestData(channel: channel), path: path)
        }
    }

    /// Decodes a manifest served at `path` (relative to the repository root).
    package static func decode(_ data: Data, path: String) throws -> Manifest {
        guard let envelope = try SignedEnvelope.read(data) else {
            throw HotUpdateError(.manifestUnsigned, "not a signed manifest (schema 1 is not published)", subject: path)
        }
        let body = try envelope.effectiveBody(verifier: CryptoVerifier())
        var named = Set<String>()
        for package in body.packages {
            for version in package.versions {
                if let path = repositoryPath(of: version.url, relativeTo: path) { named.insert(path) }
            }
        }
        return Manifest(
            path: path,
            data: data,
            body: body,
            signatureCount: envelope.signatures.count,
            namedPaths: named
        )
    }

    /// The repository path a manifest's package URL points at, or nil for a URL elsewhere.
    package static func repositoryPath(of reference: String, relativeTo manifestPath: String) -> String? {
        let base = "https://repository.invalid/"
        guard let manifest = URL(string: base + manifestPath),
            let url = URL(string: reference, relativeTo: manifest)?.absoluteURL.standardized,
            url.absoluteString.hasPrefix(base)
        else { return nil }
        let path = String(url.absoluteString.dropFirst(base.count))
        return path.removingPercentEncoding ?? path
    }

    /// A file's size in bytes.
    package static func size(of url: URL) throws -> Int64 {
        do {
            let size = try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber
            return size?.int64Value ?? 0
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot read \(url.lastPathComponent)")
        }
    }

    /// The content type a file is served with.
    package static func contentType(of path: String) -> String {
        switch (path as NSString).pathExtension.lowercased() {
        case "zip": "application/zip"
        case "json": "application/json"
        default: "application/octet-stream"
        }
    }
}
