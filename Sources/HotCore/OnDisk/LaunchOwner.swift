import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Who runs a launch: `launches/<token>.launch` under the root, held with `flock(2)` by the
/// process whose ``UpdaterLaunch/begin()`` made it, for as long as that launch lives (until
/// the updater is released, the process ends, or its next ``UpdaterLaunch/begin()``). The
/// file lists the trees the launch runs from, one relative version path per line.
///
/// A lock ends with its process, so another launch tells a trial that is still running
/// (its owner's lock is held) from one whose process died (the lock can be taken), as a
/// sweep does for staging entries (``StagingOwner``). Locks taken through different file
/// descriptions conflict within one process too, so two updaters over one root in one
/// process are two launches.
package final class LaunchOwner: Sendable {
    /// The extension of an owner file.
    static let fileExtension = "launch"

    private let file: OwnerFile
    /// The launch's token.
    package let token: String
    /// When the launch began, by a clock no one sets: how long its trial ran is measured
    /// with it in this process, whatever the wall clock did meanwhile.
    let began: ContinuousClock.Instant

    private init(file: OwnerFile, token: String) {
        self.file = file
        self.token = token
        self.began = .now
    }

    /// How long ago the launch began, in seconds.
    var secondsSinceBegan: TimeInterval {
        (ContinuousClock.now - began).timeInterval
    }

    /// The owner file of the launch of `token`.
    static func url(token: String, layout: StoreLayout) -> URL {
        layout.launchesDirectory.appendingPathComponent("\(token).\(fileExtension)", isDirectory: false)
    }

    /// Creates the owner file of the launch of `token`, locked by this process, listing the
    /// version paths the launch runs from. Call it under the exclusive store lock.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem``, ``HotUpdateError/Code/diskFull``.
    static func create(token: String, runs paths: [String], layout: StoreLayout) throws -> LaunchOwner {
        try FileSystem.createDirectory(layout.launchesDirectory)
        let url = url(token: token, layout: layout)
        let file = try OwnerFile.create(at: url.path, truncating: true, what: "the launch's owner file")
        let bytes = Array(paths.map { $0 + "\n" }.joined().utf8)
        let written = bytes.withUnsafeBytes { pwrite(file.descriptor, $0.baseAddress, $0.count, 0) }
        guard written == bytes.count else {
            let code = written < 0 ? errno : ENOSPC
            file.release()
            try? FileSystem.remove(url)
            throw HotUpdateError.system("cannot write the launch's owner file", errno: code, subject: url.path)
        }
        return LaunchOwner(file: file, token: token)
    }

    /// Lets go of the launch: its trees are no longer held, and a trial it runs counts as
    /// ended. The file is left for the next look at `launches/`.
    package func release() {
        file.release()
    }

    /// What the live launches under a root hold, read under the exclusive store lock: the
    /// owner files of launches that ended are removed on the way.
    struct Live: Sendable {
        /// The tokens of the launches whose owner still runs.
        var tokens: Set<String> = []
        /// The version paths they run from.
        var paths: Set<String> = []
    }

    /// The launches under `layout`'s root whose owner is alive, and the trees they run from.
    /// Owner files whose lock can be taken belong to launches that ended: they are removed.
    static func live(in layout: StoreLayout) -> Live {
        var live = Live()
        let suffix = ".\(fileExtension)"
        for name in FileSystem.contents(of: layout.launchesDirectory) {
            let url = layout.launchesDirectory.appendingPathComponent(name, isDirectory: false)
            guard name.hasSuffix(suffix) else {
                try? FileSystem.remove(url)
                continue
            }
            switch OwnerFile.isHeld(at: url.path) {
            case .some(true): break
            case .some(false):
                try? FileSystem.remove(url)  // its launch ended
                continue
            case nil: continue
            }
            live.tokens.insert(String(name.dropLast(suffix.count)))
            let text = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
            for line in text.split(separator: "\n") where !line.isEmpty { live.paths.insert(String(line)) }
        }
        return live
    }
}
