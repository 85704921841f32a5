import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Shorthands for the errors the archive code raises, so every message names
/// the archive and, where there is one, the entry.
enum ArchiveError {
    /// The file is not a ZIP archive (empty, random bytes, another format).
    static func notAnArchive(
        _ archive: String,
        _ reason: String,
        file: String = #fileID,
        line: Int = #line
    )
        -> HotUpdateError
    {
        HotUpdateError(
            .notAnArchive,
            "'\(archive)' is not a ZIP archive: \(reason)",
            subject: archive,
            file: file,
            line: line
        )
    }

    /// The archive is damaged or inconsistent.
    static func corrupt(
        _ archive: String,
        _ reason: String,
        entry: String? = nil,
        file: String = #fileID,
        line: Int = #line
    ) -> HotUpdateError {
        make(.corruptArchive, archive, reason, entry: entry, file: file, line: line)
    }

    /// An entry would escape the destination or is a kind that is never created.
    static func unsafe(
        _ archive: String,
        _ reason: String,
        entry: String,
        file: String = #fileID,
        line: Int = #line
    )
        -> HotUpdateError
    {
        make(.unsafeEntry, archive, reason, entry: entry, file: file, line: line)
    }

    /// A limit of ``ExtractOptions`` was reached.
    static func limit(
        _ archive: String,
        _ reason: String,
        entry: String? = nil,
        file: String = #fileID,
        line: Int = #line
    ) -> HotUpdateError {
        make(.limitExceeded, archive, reason, entry: entry, file: file, line: line)
    }

    /// Any other code, with the same message shape.
    static func make(
        _ code: HotUpdateError.Code,
        _ archive: String,
        _ reason: String,
        entry: String? = nil,
        cause: (any Error & Sendable)? = nil,
        file: String = #fileID,
        line: Int = #line
    ) -> HotUpdateError {
        if let entry {
            return HotUpdateError(
                code,
                "entry '\(entry)' of '\(archive)': \(reason)",
                subject: entry,
                cause: cause,
                file: file,
                line: line
            )
        }
        return HotUpdateError(code, "'\(archive)': \(reason)", subject: archive, cause: cause, file: file, line: line)
    }

    /// A failed system call, with `errno` decoded.
    static func system(
        _ operation: String,
        path: String,
        errno code: Int32,
        file: String = #fileID,
        line: Int = #line
    ) -> HotUpdateError {
        HotUpdateError(
            code == ENOENT ? .notFound : HotUpdateError.code(forErrno: code),
            "\(operation) '\(path)' failed: \(HotUpdateError.reason(errno: code)) (errno \(code))",
            subject: path,
            file: file,
            line: line
        )
    }
}
