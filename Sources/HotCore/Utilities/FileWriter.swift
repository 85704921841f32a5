import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Appends bytes to a new file through a file descriptor, with errors that name the file.
/// Used by one task at a time.
package final class FileWriter {
    private var fd: Int32
    /// The file being written.
    package let url: URL
    /// Bytes written so far.
    package private(set) var bytesWritten: Int64 = 0

    /// Creates `url`, which must not exist.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem``.
    package init(creating url: URL) throws {
        self.url = url
        fd = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw HotUpdateError.system("cannot create \(url.path)", errno: errno, subject: url.path)
        }
    }

    deinit {
        if fd >= 0 { _ = systemClose(fd) }
    }

    /// Appends `bytes`.
    ///
    /// - Throws: ``HotUpdateError/Code/diskFull`` when the disk is full,
    ///   ``HotUpdateError/Code/fileSystem`` for other failures.
    package func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard var base = bytes.baseAddress else { return }
        var remaining = bytes.count
        while remaining > 0 {
            let written = systemWrite(fd, base, remaining)
            if written < 0 {
                let code = errno
                if code == EINTR { continue }
                throw HotUpdateError.system("cannot write \(url.path)", errno: code, subject: url.path)
            }
            remaining -= written
            base += written
            bytesWritten += Int64(written)
        }
    }

    /// Appends `data`.
    package func write(_ data: Data) throws {
        try data.withUnsafeBytes { try write($0) }
    }

    /// Closes the file, first flushing it to stable storage when `sync` is true.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem``.
    package func close(sync: Bool = true) throws {
        guard fd >= 0 else { return }
        let syncError = sync ? FileSystem.flush(fd) : 0
        let closeResult = systemClose(fd)
        let closeError = errno
        fd = -1
        guard syncError == 0, closeResult == 0 else {
            throw HotUpdateError.system(
                "cannot flush \(url.path)",
                errno: syncError != 0 ? syncError : closeError,
                subject: url.path
            )
        }
    }
}

private func systemClose(_ fd: Int32) -> Int32 { close(fd) }
private func systemWrite(_ fd: Int32, _ base: UnsafeRawPointer, _ count: Int) -> Int { write(fd, base, count) }
