import CHotZlib
import Foundation
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Copies one large stored entry with every worker at once: one deflate stream cannot be
/// split, but stored bytes can. Each worker takes 8 MiB slices, reads them with `pread`,
/// computes their CRC-32 and writes them with `pwrite` at their place; the slices' CRCs are
/// then combined (zlib's `crc32_combine`) and checked against the entry's, so a damaged
/// entry is refused exactly as when it is read in one piece.
///
/// Used only when no hasher has to see the bytes in order: no ``ExtractOptions/fileHasher``,
/// or a SHA-256 the archive records and the options trust.
enum StoredSlices {
    /// Entries at least this large are copied in slices (smaller ones are not worth the threads).
    static let threshold: UInt64 = 32 << 20
    /// The bytes one worker takes at a time.
    static let sliceSize: UInt64 = 8 << 20
    /// One worker's read buffer.
    static let bufferSize = 1 << 20

    /// Whether `entry` can be copied in slices by `workers` threads.
    static func applies(to entry: ZipEntryRecord, workers: Int) -> Bool {
        workers > 1 && entry.method == ZipFormat.methodStored && !entry.isEncrypted
            && entry.uncompressedSize >= threshold && entry.compressedSize == entry.uncompressedSize
    }

    /// Copies `entry` to `path` in the partial directory with `workers` threads and returns
    /// the file written; failures are recorded in `state` (and nil returned).
    static func copy(
        _ entry: ZipEntryRecord,
        name: String,
        path: String,
        mode: UInt16,
        file: ReadOnlyFile,
        partial: PartialDirectory,
        state: ExtractionState,
        workers: Int
    ) async -> Bool {
        let fd: Int32
        do {
            fd = try partial.createFile(path, mode: mode)
        } catch {
            state.fail(HotUpdateError.wrap(error, as: .fileSystem, "extracting '\(name)'"))
            return false
        }
        let size = entry.uncompressedSize
        let count = Int((size + sliceSize - 1) / sliceSize)
        let slices = SliceCRCs(count: count)
        let archive = file.displayName
        let target = partial.path(path)
        await BlockingThreads.run(count: min(workers, count)) { _ in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 16)
            defer { buffer.deallocate() }
            while let slice = slices.claim(), !state.isStopping {
                let start = UInt64(slice) * sliceSize
                let length = min(sliceSize, size - start)
                var crc: UInt32 = 0
                var done: UInt64 = 0
                do {
                    while done < length {
                        let count = Int(min(UInt64(buffer.count), length - done))
                        let chunk = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count])
                        let got = try file.read(into: chunk, at: Int64(entry.dataOffset + start + done))
                        guard got == count else {
                            throw ArchiveError.corrupt(
                                archive,
                                "its data is cut short by the end of the file",
                                entry: name
                            )
                        }
                        try state.account(count, entry: path)
                        crc = EntryDataReader.crc32(crc, UnsafeRawBufferPointer(chunk))
                        try writeAll(fd, UnsafeRawBufferPointer(chunk), at: Int64(start + done), path: target)
                        done += UInt64(count)
                    }
                    slices.set(slice, crc)
                } catch {
                    state.fail(HotUpdateError.wrap(error, as: .fileSystem, "extracting '\(name)'"))
                    return
                }
            }
        }
        do {
            guard !state.isStopping else {
                close(fd)
                return false
            }
            let crcs = slices.values
            var combined = uLong(crcs[0])
            for index in 1..<count {
                let length = min(sliceSize, size - UInt64(index) * sliceSize)
                combined = crc32_combine(combined, uLong(crcs[index]), .init(length))
            }
            guard UInt32(truncatingIfNeeded: combined) == entry.crc32 else {
                close(fd)
                throw ArchiveError.make(
                    .checksumMismatch,
                    archive,
                    "its CRC-32 is \(hex(UInt32(truncatingIfNeeded: combined))) but the archive declares \(hex(entry.crc32))",
                    entry: name
                )
            }
            guard close(fd) == 0 else { throw ArchiveError.system("closing", path: target, errno: errno) }
            return true
        } catch {
            state.fail(HotUpdateError.wrap(error, as: .fileSystem, "extracting '\(name)'"))
            return false
        }
    }
}

/// The slices of one entry: which is next, and the CRC-32 of each one done.
private final class SliceCRCs: Sendable {
    private struct State {
        var next = 0
        var crcs: [UInt32]
    }

    private let state: Locked<State>

    init(count: Int) { state = Locked(State(crcs: Array(repeating: 0, count: count))) }

    func claim() -> Int? {
        state.withLock { state in
            guard state.next < state.crcs.count else { return nil }
            state.next += 1
            return state.next - 1
        }
    }

    func set(_ slice: Int, _ crc: UInt32) { state.withLock { $0.crcs[slice] = crc } }

    var values: [UInt32] { state.withLock { $0.crcs } }
}

/// Writes all of `bytes` to `fd` at `offset`.
func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64, path: @autoclosure () -> String) throws {
    guard var base = bytes.baseAddress else { return }
    var left = bytes.count
    var position = offset
    while left > 0 {
        let n = pwrite(fd, base, left, off_t(position))
        if n < 0 {
            if errno == EINTR { continue }
            throw ArchiveError.system("writing", path: path(), errno: errno)
        }
        base += n
        left -= n
        position += Int64(n)
    }
}
