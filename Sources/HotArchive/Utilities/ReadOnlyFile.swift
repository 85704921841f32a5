import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A regular file opened for reading at explicit offsets (`pread`), shared by
/// every worker of an extraction: `pread` has no file position, so concurrent
/// reads need no lock.
final class ReadOnlyFile: Sendable {
    /// The open descriptor.
    let descriptor: Int32
    /// The file's size when it was opened.
    let size: Int64
    /// The path it was opened from.
    let path: String
    /// The last path component, for messages.
    let displayName: String

    /// Opens `url` for reading.
    ///
    /// - Throws: `HotUpdateError.Code.notFound` when the file does not exist,
    ///   `HotUpdateError.Code.notAnArchive` when it is not a regular file,
    ///   `HotUpdateError.Code.fileSystem` for other failures.
    init(_ url: URL) throws {
        let path = url.path
        self.path = path
        self.displayName = url.lastPathComponent
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ArchiveError.system("opening archive", path: path, errno: errno) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            close(fd)
            throw ArchiveError.system("inspecting archive", path: path, errno: code)
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw ArchiveError.notAnArchive(url.lastPathComponent, "it is not a regular file")
        }
        self.descriptor = fd
        self.size = Int64(info.st_size)
    }

    deinit { close(descriptor) }

    /// Reads up to `buffer.count` bytes at `offset`; fewer only at the end of the file.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        var done = 0
        while done < buffer.count {
            let n = pread(descriptor, base + done, buffer.count - done, off_t(offset + Int64(done)))
            if n < 0 {
                if errno == EINTR { continue }
                throw ArchiveError.system("reading archive", path: path, errno: errno)
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Reads exactly `count` bytes at `offset`.
    ///
    /// - Throws: `HotUpdateError.Code.corruptArchive` naming `what` when the file ends first.
    func readExactly(_ count: Int, at offset: Int64, what: @autoclosure () -> String) throws -> [UInt8] {
        guard count > 0 else { return [] }
        guard offset >= 0, offset <= size, Int64(count) <= size - offset else {
            throw ArchiveError.corrupt(displayName, "\(what()) lies past the end of the file")
        }
        var bytes = [UInt8](repeating: 0, count: count)
        let got = try bytes.withUnsafeMutableBytes { try read(into: $0, at: offset) }
        guard got == count else {
            throw ArchiveError.corrupt(displayName, "\(what()) is cut short: the file ends")
        }
        return bytes
    }
}

extension UnsafeRawBufferPointer {
    /// The little-endian `UInt16` at `offset`; the caller checks bounds.
    @inline(__always) func uint16LE(at offset: Int) -> UInt16 {
        UInt16(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt16.self))
    }
    /// The little-endian `UInt32` at `offset`; the caller checks bounds.
    @inline(__always) func uint32LE(at offset: Int) -> UInt32 {
        UInt32(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }
    /// The little-endian `UInt64` at `offset`; the caller checks bounds.
    @inline(__always) func uint64LE(at offset: Int) -> UInt64 {
        UInt64(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }
}

extension Array where Element == UInt8 {
    /// The little-endian `UInt16` at `offset`; the caller checks bounds.
    func uint16LE(at offset: Int) -> UInt16 { withUnsafeBytes { $0.uint16LE(at: offset) } }
    /// The little-endian `UInt32` at `offset`; the caller checks bounds.
    func uint32LE(at offset: Int) -> UInt32 { withUnsafeBytes { $0.uint32LE(at: offset) } }
    /// The little-endian `UInt64` at `offset`; the caller checks bounds.
    func uint64LE(at offset: Int) -> UInt64 { withUnsafeBytes { $0.uint64LE(at: offset) } }

    /// Appends `value` little-endian.
    mutating func appendLE(_ value: UInt16) {
        append(UInt8(truncatingIfNeeded: value))
        append(UInt8(truncatingIfNeeded: value >> 8))
    }
    /// Appends `value` little-endian.
    mutating func appendLE(_ value: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) { append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }
    /// Appends `value` little-endian.
    mutating func appendLE(_ value: UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) { append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }
}
