import Foundation

/// A package a reader found files missing from: `losses/<id>` under the root, an empty file
/// a resolver creates when an answer it was about to give names a file that is gone. The
/// next plain sync checks that package's files (presence and size, every file), heals what
/// is missing from the objects or by downloading it again, and removes the marker; one stat
/// per package tells a sync which packages were marked.
package enum LossMarker {
    /// Records that files of `id` were found missing. Never throws: a reader that cannot
    /// write the marker still answers, and the loss is found by the next check.
    package static func record(_ id: String, layout: StoreLayout) {
        // Never creates a store: only under a root that exists.
        guard (try? PackageDescriptor.validateComponent(id, what: "package id")) != nil,
            FileSystem.isDirectory(layout.root)
        else { return }
        try? FileSystem.createDirectory(layout.lossesDirectory)
        _ = FileManager.default.createFile(atPath: layout.lossMarker(id: id).path, contents: nil)
    }

    /// Whether a reader found files of `id` missing since the marker was last cleared.
    package static func isRecorded(_ id: String, layout: StoreLayout) -> Bool {
        FileSystem.isRegularFile(atPath: layout.lossMarker(id: id).path)
    }

    /// Clears the marker of `id`, once its files were checked.
    package static func clear(_ id: String, layout: StoreLayout) {
        try? FileSystem.remove(layout.lossMarker(id: id))
    }
}
