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

    /// The file whose modification time is when the last quick check of every package ran.
    static func quickCheckURL(_ layout: StoreLayout) -> URL {
        layout.lossesDirectory.appendingPathComponent(".quick-check", isDirectory: false)
    }

    /// Whether a quick check of every package is due: none ran, or the last one ran more
    /// than `interval` ago. A last check dated after now (a clock set back since) counts as
    /// due: one more check costs little, and waiting for the clock to catch up could cost days.
    package static func quickCheckDue(interval: TimeInterval, layout: StoreLayout, now: Date = Date()) -> Bool {
        guard
            let modified = try? FileManager.default.attributesOfItem(atPath: quickCheckURL(layout).path)[
                .modificationDate
            ] as? Date
        else { return true }
        return modified > now || now.timeIntervalSince(modified) >= interval
    }

    /// Records that a quick check of every package ran now.
    package static func quickCheckDone(layout: StoreLayout) {
        guard FileSystem.isDirectory(layout.root) else { return }
        try? FileSystem.createDirectory(layout.lossesDirectory)
        let url = quickCheckURL(layout)
        try? FileSystem.remove(url)
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
    }
}
