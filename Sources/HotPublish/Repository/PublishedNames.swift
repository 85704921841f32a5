import Foundation
import HotArchive
import HotCore
import HotManifest

/// The publisher's half of ``PathCollision``: what `hot pack`, `hot sign` and `hot verify`
/// refuse before a client would.
package enum PublishedNames {
    /// The paths under `source` (files, symlinks and directories), `/`-separated, relative
    /// to it; symlinks are not followed.
    package static func paths(under source: URL) throws -> [String] {
        let base = source.standardizedFileURL.path
        guard
            let walker = FileManager.default.enumerator(
                at: source,
                includingPropertiesForKeys: nil,
                options: [],
                errorHandler: { _, _ in true }
            )
        else {
            throw HotUpdateError(.fileSystem, "cannot list the directory", subject: source.path)
        }
        var paths: [String] = []
        for case let url as URL in walker {
            let path = url.standardizedFileURL.path
            guard path.hasPrefix(base + "/") else { continue }
            paths.append(String(path.dropFirst(base.count + 1)))
        }
        return paths.sorted()
    }

    /// Refuses a directory to pack as package `id` when two of its paths are one name on some
    /// file system, or when `id` is another spelling of a package id the manifest has.
    package static func checkPack(source: URL, id: String, caseSensitive: Bool, existingIDs: [String]) throws {
        try PathCollision.check(
            try paths(under: source),
            caseSensitive: caseSensitive,
            what: "the paths of \(source.lastPathComponent)",
            packageID: id
        )
        try PathCollision.check(
            existingIDs.filter { $0 != id } + [id],
            caseSensitive: false,
            what: "the package ids of the manifest"
        )
    }

    /// What is wrong with the entry names of the archive at `url` of a version entry; empty
    /// when nothing is.
    package static func archiveProblems(
        of version: SignedManifestBody.Version,
        at url: URL,
        label: String
    ) async -> [String] {
        do {
            let entries = try await ZipUnarchiver().entries(of: url, options: ExtractOptions())
            try PathCollision.check(
                entries.map(\.path),
                caseSensitive: version.caseSensitive ?? false,
                what: "the paths of \(version.url)"
            )
            return []
        } catch let error as HotUpdateError {
            return ["\(label): \(error.message)"]
        } catch {
            return ["\(label): cannot list \(version.url): \(error)"]
        }
    }
}
