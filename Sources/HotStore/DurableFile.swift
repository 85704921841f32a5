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

/// Replaces a file's content atomically and durably.
///
/// ``write(_:to:)`` writes the bytes to a new temporary file in the same directory
/// (`open` with `O_CREAT|O_EXCL`), writes them all, flushes it (`F_FULLFSYNC` on Apple
/// platforms, `fsync` elsewhere), renames it over the target and flushes the directory. A
/// reader sees either the old content or the new, never a mix, even after a crash or power
/// loss. On failure the temporary file is removed and the target is left as it was.
///
/// ```swift
/// try DurableFile.write(Data(json.utf8), to: root.appendingPathComponent("store.json"))
/// ```
package enum DurableFile {
    /// The prefix of temporary files written next to `url`'s file.
    static func temporaryPrefix(for url: URL) -> String { ".\(url.lastPathComponent).tmp-" }

    /// Replaces the content of the file at `url` with `data`, atomically and durably.
    ///
    /// - Parameters:
    ///   - data: The new content.
    ///   - url: The target file. Its directory must exist; the file need not.
    /// - Throws: `HotUpdateError.Code.diskFull` when the disk is full,
    ///   `HotUpdateError.Code.fileSystem` for other failures, naming the file and the failing
    ///   step; the target then still holds its old content and no temporary file is left.
    package static func write(_ data: Data, to url: URL) throws {
        try write([data], to: url, faultPoint: nil)
    }

    /// ``write(_:to:)`` of `parts` one after the other: a large file framed by a few bytes
    /// (a signed envelope around a catalogue's manifest) is written without joining them.
    package static func write(_ parts: [Data], to url: URL) throws {
        try write(parts, to: url, faultPoint: nil)
    }

    /// ``write(_:to:)``, reaching `faultPoint` (see ``FaultPoint``) after the temporary file
    /// is written and flushed and before it is renamed over the target.
    static func write(_ data: Data, to url: URL, faultPoint: StaticString?) throws {
        try write([data], to: url, faultPoint: faultPoint)
    }

    /// ``write(_:to:)`` of `parts`, reaching `faultPoint` after the temporary file is written
    /// and flushed and before it is renamed over the target.
    static func write(_ parts: [Data], to url: URL, faultPoint: StaticString?) throws {
        #if canImport(Glibc) || canImport(Musl) || canImport(Android) || canImport(Darwin)
        let target = url.path
        let directory = url.deletingLastPathComponent().path
        let temporary = url.deletingLastPathComponent()
            .appendingPathComponent(temporaryPrefix(for: url) + UUID().uuidString).path

        let descriptor = open(temporary, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw failure("cannot create a temporary file in \(directory)", errno, subject: target)
        }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        do {
            defer { close(descriptor) }
            for data in parts { try writeAll(data, to: descriptor, subject: target) }
            let code = FileSystem.flush(descriptor)
            guard code == 0 else {
                throw failure("cannot fsync the temporary file", code, subject: target)
            }
        }
        if let faultPoint { FaultPoint.reached(faultPoint) }
        guard rename(temporary, target) == 0 else {
            throw failure("cannot rename the temporary file over it", errno, subject: target)
        }
        renamed = true
        try syncDirectory(directory, subject: target)
        #else
        do {
            try parts.reduce(into: Data()) { $0.append($1) }.write(to: url, options: .atomic)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot write \(url.path)")
        }
        #endif
    }

    /// Reads the whole file at `url`, or returns nil when it does not exist.
    ///
    /// - Throws: `HotUpdateError.Code.fileSystem` when it exists but cannot be read.
    static func readIfExists(_ url: URL) throws -> Data? {
        #if canImport(Glibc) || canImport(Musl) || canImport(Android) || canImport(Darwin)
        let path = url.path
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        if descriptor < 0 {
            if errno == ENOENT { return nil }
            throw failure("cannot open for reading", errno, subject: path)
        }
        defer { close(descriptor) }
        var data = Data()
        let chunkSize = 1 << 16
        var buffer = [UInt8](repeating: 0, count: chunkSize)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, chunkSize) }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure("cannot read", errno, subject: path)
            }
            if count == 0 { return data }
            data.append(contentsOf: buffer[0..<count])
        }
        #else
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        do {
            return try Data(contentsOf: url)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot read \(url.path)")
        }
        #endif
    }

    /// Removes temporary files a crashed ``write(_:to:)`` of `url` left behind.
    ///
    /// Only call it while no other ``write(_:to:)`` of the same file can run.
    static func removeLeftoverTemporaries(of url: URL) {
        let directory = url.deletingLastPathComponent()
        let prefix = temporaryPrefix(for: url)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return }
        for name in names where name.hasPrefix(prefix) {
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
        }
    }

    #if canImport(Glibc) || canImport(Musl) || canImport(Android) || canImport(Darwin)
    private static func writeAll(_ data: Data, to descriptor: Int32, subject: String) throws {
        try data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            var offset = 0
            while offset < bytes.count {
                let written = writeSome(descriptor, bytes, from: offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw failure("cannot write the temporary file", errno, subject: subject)
                }
                offset += written
            }
        }
    }

    /// Makes the rename durable. File systems that cannot sync a directory (`EINVAL`)
    /// are accepted: they give no stronger guarantee to ask for.
    private static func syncDirectory(_ directory: String, subject: String) throws {
        let descriptor = open(directory, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw failure(
                "the new content is in place but its directory cannot be opened to fsync it",
                errno,
                subject: subject
            )
        }
        defer { close(descriptor) }
        let code = FileSystem.flush(descriptor)
        if code != 0, code != EINVAL, code != ENOTSUP {
            throw failure("the new content is in place but its directory cannot be fsynced", code, subject: subject)
        }
    }

    private static func failure(_ what: String, _ code: Int32, subject: String) -> HotUpdateError {
        HotUpdateError.system("\(what)", errno: code, subject: subject)
    }
    #endif
}

#if canImport(Glibc) || canImport(Musl) || canImport(Android) || canImport(Darwin)
/// One `write(2)` of `bytes[offset...]` (outside ``DurableFile``, whose own `write` hides the C one).
private func writeSome(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, from offset: Int) -> Int {
    guard let base = bytes.baseAddress else { return 0 }
    return write(descriptor, base + offset, bytes.count - offset)
}
#endif
