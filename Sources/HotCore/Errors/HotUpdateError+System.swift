import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension HotUpdateError {
    /// Whether `errno` says the file system or the user's quota has no room left
    /// (`ENOSPC`, `EDQUOT`).
    package static func isDiskFull(errno code: Int32) -> Bool {
        code == ENOSPC || code == EDQUOT
    }

    /// The code for a failed system call: ``Code/diskFull`` when `errno` says the disk or
    /// the quota is full, `fallback` otherwise.
    package static func code(forErrno code: Int32, otherwise fallback: Code = .fileSystem) -> Code {
        isDiskFull(errno: code) ? .diskFull : fallback
    }

    /// Why a system call failed, for a message: `disk full (No space left on device)` for a
    /// full disk or quota, the system's text otherwise.
    package static func reason(errno code: Int32) -> String {
        let text = strerror(code).map { String(cString: $0) } ?? "errno \(code)"
        return isDiskFull(errno: code) ? "disk full (\(text))" : text
    }

    /// A failed system call on `path`: ``Code/diskFull`` for `ENOSPC` and `EDQUOT`,
    /// `fallback` otherwise, with the message `what: reason`.
    package static func system(
        _ what: String,
        errno code: Int32,
        otherwise fallback: Code = .fileSystem,
        subject: String? = nil,
        file: String = #fileID,
        line: Int = #line
    ) -> HotUpdateError {
        HotUpdateError(
            Self.code(forErrno: code, otherwise: fallback),
            "\(what): \(reason(errno: code))",
            subject: subject,
            file: file,
            line: line
        )
    }

    /// Whether `error` (a Foundation or POSIX error, or one of their underlying errors) says
    /// the disk or the quota is full.
    static func isDiskFull(_ error: any Error) -> Bool {
        if let posix = error as? POSIXError { return isDiskFull(errno: posix.code.rawValue) }
        var current: NSError? = error as NSError
        var depth = 0
        while let ns = current, depth < 8 {
            if ns.domain == NSPOSIXErrorDomain, isDiskFull(errno: Int32(truncatingIfNeeded: ns.code)) { return true }
            if ns.domain == NSCocoaErrorDomain, ns.code == CocoaError.fileWriteOutOfSpace.rawValue { return true }
            current = ns.userInfo[NSUnderlyingErrorKey] as? NSError
            depth += 1
        }
        return false
    }
}
