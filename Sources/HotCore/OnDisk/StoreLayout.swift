import Foundation

/// Where things live under a store root.
///
/// ```
/// store.json (or .plist)         the metadata, relative paths only
/// objects/ab/ab12…               every installed file once, named by its SHA-256, read-only
/// packages/<id>/<version>/       the installed trees: hard links into objects/
/// filelists/<id>/<version>.files each version's files: path, size, SHA-256
/// staging/<uuid>/                downloads, unpacking and deletions in progress; swept by every change
/// partial/<sha256>(.json)        cut downloads kept to be resumed, with their sidecars; not swept,
///                                bounded by the updater's PartialDownloadPolicy
/// launches/<token>.launch        one per live launch: its owner lock and the trees it runs from
/// ```
///
/// Other directories under the root belong to the ``StoreCommitHook``s (HotAssets' `index/`):
/// the store's sweep leaves them alone.
package struct StoreLayout: Sendable, Hashable {
    /// The name of the trust state file a manifest source keeps under the root (`trust.json`);
    /// the first change of a process sweeps its leftover temporary files.
    package static let trustFileName = "trust.json"
    /// What the last manifest applied offered (``OfferedCatalog``), beside the snapshot.
    package static let catalogFileName = "catalog.json"
    /// When the app last checked for updates, and its backoff (``CheckSchedule/Record``).
    package static let checkScheduleFileName = "check-schedule.json"
    /// The last signed manifest accepted, kept for conditional requests (`manifest.kept`,
    /// and its validators in `manifest.kept.json`).
    package static let keptManifestFileName = "manifest.kept"
    /// The last timestamp accepted, kept for conditional requests (`timestamp.kept`, and its
    /// validators in `timestamp.kept.json`).
    package static let keptTimestampFileName = "timestamp.kept"
    /// The shards of the last sharded manifest accepted (`shards.kept`), so the next change
    /// downloads only the shards whose hash changed.
    package static let keptShardsFileName = "shards.kept"
    /// The manifest the last sync left nothing to do for (`settled.json`).
    package static let settledFileName = "settled.json"

    /// The store root.
    package let root: URL

    /// Creates a layout for `root`.
    package init(root: URL) {
        self.root = root.standardizedFileURL
    }

    /// `packages/`.
    package var packagesDirectory: URL { root.appendingPathComponent("packages", isDirectory: true) }
    /// `staging/`.
    package var stagingDirectory: URL { root.appendingPathComponent("staging", isDirectory: true) }

    /// `objects/`.
    package var objectsDirectory: URL { root.appendingPathComponent("objects", isDirectory: true) }
    /// `filelists/`.
    package var fileListsDirectory: URL { root.appendingPathComponent("filelists", isDirectory: true) }
    /// `launches/`: the owner file of each launch (see ``LaunchOwner``).
    package var launchesDirectory: URL { root.appendingPathComponent("launches", isDirectory: true) }
    /// `losses/`: a marker per package a reader found files missing from (``LossMarker``).
    package var lossesDirectory: URL { root.appendingPathComponent("losses", isDirectory: true) }

    /// The loss marker of package `id`.
    package func lossMarker(id: String) -> URL {
        lossesDirectory.appendingPathComponent(id, isDirectory: false)
    }

    /// The object holding the file whose SHA-256 is `hex`: `objects/<first 2 hex>/<hex>`.
    package func objectURL(sha256 hex: String) -> URL {
        objectsDirectory.appendingPathComponent(String(hex.prefix(2)), isDirectory: true)
            .appendingPathComponent(hex, isDirectory: false)
    }

    /// The file list of the installed version at `relativeVersionPath` (`packages/<id>/<name>`):
    /// `filelists/<id>/<name>.files`; nil for a path of another shape.
    package func fileListURL(forVersionPath relativeVersionPath: String) -> URL? {
        let parts = relativeVersionPath.split(separator: "/")
        guard parts.count == 3, parts[0] == "packages" else { return nil }
        return fileListsDirectory.appendingPathComponent(String(parts[1]), isDirectory: true)
            .appendingPathComponent(parts[2] + ".files", isDirectory: false)
    }

    /// The directory of one package's versions.
    package func packageDirectory(id: String) -> URL {
        packagesDirectory.appendingPathComponent(id, isDirectory: true)
    }

    /// The relative path of an installed version's directory.
    package func relativeVersionPath(id: String, directoryName: String) -> String {
        "packages/\(id)/\(directoryName)"
    }

    /// Turns a stored relative path into a URL under the root.
    ///
    /// - Throws: ``HotUpdateError/Code/storeCorrupt`` for a path that is absolute or escapes the root.
    package func url(forRelativePath path: String) throws -> URL {
        let components = path.split(separator: "/", omittingEmptySubsequences: false)
        guard !path.isEmpty, !path.hasPrefix("/"),
            components.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." })
        else {
            throw HotUpdateError(.storeCorrupt, "stored path '\(path)' is not a relative path inside the store")
        }
        return root.appendingPathComponent(path, isDirectory: true)
    }
}
