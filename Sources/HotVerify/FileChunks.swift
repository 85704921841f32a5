import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a file sequentially in 1 MiB chunks.
enum FileChunks {
    static let chunkSize = 1 << 20

    /// Calls `body` with each chunk of the file at `url`, in order, reusing one buffer.
    ///
    /// - Throws: `HotUpdateError.Code.fileSystem` naming the file and the reason.
    static func forEachChunk(of url: URL, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        #if canImport(Glibc) || canImport(Musl) || canImport(Android) || canImport(Darwin)
        let path = url.path
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw HotUpdateError(.fileSystem, "cannot open for reading: \(Self.reason(errno))", subject: path)
        }
        defer { close(descriptor) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = read(descriptor, buffer.baseAddress, chunkSize)
            if count < 0 {
                if errno == EINTR { continue }
                throw HotUpdateError(.fileSystem, "cannot read: \(Self.reason(errno))", subject: path)
            }
            if count == 0 { return }
            try body(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        }
        #else
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: url)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot open \(url.path) for reading")
        }
        defer { try? handle.close() }
        while true {
            let chunk: Data?
            do {
                chunk = try handle.read(upToCount: chunkSize)
            } catch {
                throw HotUpdateError.wrap(error, as: .fileSystem, "cannot read \(url.path)")
            }
            guard let chunk, !chunk.isEmpty else { return }
            try chunk.withUnsafeBytes { try body($0) }
        }
        #endif
    }

    #if canImport(Glibc) || canImport(Musl) || canImport(Android) || canImport(Darwin)
    private static func reason(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "errno \(code)" }
        return "\(String(cString: text)) (errno \(code))"
    }
    #endif
}
