import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Scratch directories for tests that leave nothing behind.
///
/// Every directory ``make(_:)`` returns lies under one parent per test process, in the
/// system's temporary directory, and that parent is removed with all it holds when the
/// process exits: a fixture with no place to clean up (a struct a test makes and drops), or
/// a test that fails half-way, leaves no store behind. A directory made read-only inside it
/// is made writable first. A test that removes its directory itself can go on doing so. A
/// process killed before it could remove its parent leaves it behind: the next test process
/// removes the parents of processes that are gone (``sweepAbandoned(in:)``).
///
/// ```swift
/// let root = try ScratchDirectory.make("store")   // …/hotupdate-tests-<pid>-…/store-<uuid>
/// ```
public enum ScratchDirectory {
    /// A new, empty directory whose name starts with `label`.
    ///
    /// - Throws: The file system's error when it cannot be made.
    public static func make(_ label: String) throws -> URL {
        let url = parent.url.appendingPathComponent("\(label)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// The parent of this process's scratch directories (made when first asked for), for a
    /// test that wants to name a directory in it that does not exist yet.
    public static var parentDirectory: URL { parent.url }

    /// The name every parent starts with, followed by its process id and a dash.
    static let prefix = "hotupdate-tests-"

    /// Removes the parents in `directory` left by test processes that are gone (killed
    /// before they could remove their own): those named for a process id no process has.
    /// A parent of a live process, or of a process of another user, is kept.
    ///
    /// - Returns: The parents removed.
    @discardableResult
    public static func sweepAbandoned(in directory: URL) -> [URL] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return [] }
        var removed: [URL] = []
        for name in names where name.hasPrefix(prefix) {
            let rest = name.dropFirst(prefix.count)
            guard let dash = rest.firstIndex(of: "-"), let pid = pid_t(rest[..<dash]), pid > 0, pid != getpid()
            else { continue }
            // No process has that id (not merely one this user may not signal).
            guard kill(pid, 0) != 0, errno == ESRCH else { continue }
            let url = directory.appendingPathComponent(name, isDirectory: true)
            Conformance.remove(url)
            removed.append(url)
        }
        return removed
    }

    /// The parent, made once, and the process that made it: only that process removes it (a
    /// child forked from it exits with its own handlers). Parents of processes that are
    /// gone are removed first.
    private static let parent: (url: URL, process: pid_t) = {
        sweepAbandoned(in: FileManager.default.temporaryDirectory)
        let url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "\(prefix)\(getpid())-\(UUID().uuidString.prefix(8))",
            isDirectory: true
        )
        // Made here for the tests that name a directory in it without making it; `make`
        // makes it again (with the directory it returns) should this have failed.
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        let made = (url, getpid())
        atexit {
            guard getpid() == ScratchDirectory.parent.process else { return }
            Conformance.remove(ScratchDirectory.parent.url)
        }
        return made
    }()
}
