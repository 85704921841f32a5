import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The lock every change of a repository holds: `.hot-lock` in its directory, an exclusive
/// `flock` held for the change, released by the kernel when the process ends however it ends.
/// `hot` and a service that links HotPublish take the same lock, so two changes of one
/// repository never interleave: the second is refused (`HotUpdateError.Code.storeBusy`)
/// while the first holds it, naming the process that does.
package struct RepositoryLock {
    /// The lock file's name in the repository's directory.
    package static let fileName = ".hot-lock"

    /// Runs `body` holding the lock of the repository in `directory`, creating the directory
    /// and the lock file when they do not exist.
    ///
    /// - Throws: `HotUpdateError.Code.storeBusy` when another process or another change of
    ///   this one holds the lock; `HotUpdateError.Code.fileSystem` when the lock file cannot
    ///   be opened; what `body` throws.
    package static func holding<T>(_ directory: URL, _ body: () async throws -> T) async throws -> T {
        let descriptor = try acquire(directory)
        defer { release(descriptor) }
        return try await body()
    }

    /// ``holding(_:_:)`` for a change that does not wait.
    package static func holding<T>(_ directory: URL, _ body: () throws -> T) throws -> T {
        let descriptor = try acquire(directory)
        defer { release(descriptor) }
        return try body()
    }

    private static func acquire(_ directory: URL) throws -> Int32 {
        try FileSystem.createDirectory(directory)
        let path = directory.appendingPathComponent(fileName).path
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw HotUpdateError(
                .fileSystem,
                "cannot open the repository's lock: \(String(cString: strerror(errno)))",
                subject: path
            )
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            let holder = holderDescription(path)
            close(descriptor)
            guard code == EWOULDBLOCK else {
                throw HotUpdateError(
                    .fileSystem,
                    "cannot lock the repository: \(String(cString: strerror(code)))",
                    subject: path
                )
            }
            throw HotUpdateError(
                .storeBusy,
                "another change of the repository is under way\(holder): nothing was changed; try again when it ends",
                subject: directory.path
            )
        }
        // Who holds it, for the message of the one refused.
        let name = ProcessInfo.processInfo.processName
        let text = Array("\(getpid()) \(name)\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = text.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        return descriptor
    }

    private static func release(_ descriptor: Int32) {
        _ = ftruncate(descriptor, 0)
        close(descriptor)
    }

    /// `(process N, NAME)` from the lock file, when the holder wrote it.
    private static func holderDescription(_ path: String) -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return "" }
        let parts = text.split(separator: " ", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        guard let pid = parts.first.flatMap({ Int32($0) }) else { return "" }
        return " (process \(pid)" + (parts.count > 1 && !parts[1].isEmpty ? ", \(parts[1]))" : ")")
    }
}
