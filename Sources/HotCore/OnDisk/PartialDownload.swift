import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What identifies the version of a file a server sent: its `ETag` or, failing that, its
/// `Last-Modified`.
struct ResourceValidator: Codable, Sendable, Hashable {
    var etag: String?
    var lastModified: String?

    /// The validator of a response, or nil when it carries neither header.
    init?(headers: [String: String]) {
        let etag = headers["etag"]?.trimmingCharacters(in: .whitespaces)
        let lastModified = headers["last-modified"]?.trimmingCharacters(in: .whitespaces)
        guard etag?.isEmpty == false || lastModified?.isEmpty == false else { return nil }
        self.etag = etag?.isEmpty == false ? etag : nil
        self.lastModified = lastModified?.isEmpty == false ? lastModified : nil
    }

    /// A strong ETag, the only kind `If-Range` and `If-Match` may compare.
    var strongETag: String? {
        guard let etag, !etag.hasPrefix("W/") else { return nil }
        return etag
    }

    /// The conditional headers of a request for the rest of the file: `If-Range` (a server
    /// that honours it sends the whole new file when this one changed) and, for servers that
    /// ignore `If-Range` (S3 and its kin), `If-Match` or `If-Unmodified-Since`, which make a
    /// changed file a `412`.
    var resumeHeaders: [String: String] {
        if let strongETag {
            return ["If-Range": strongETag, "If-Match": strongETag]
        }
        if let lastModified {
            return ["If-Range": lastModified, "If-Unmodified-Since": lastModified]
        }
        return [:]
    }

    /// Whether a response's validator says it is another version of the file than this one.
    /// Missing headers prove nothing: the digest decides in the end.
    func contradicts(_ other: ResourceValidator?) -> Bool {
        guard let other else { return false }
        if let etag, let otherETag = other.etag { return etag != otherETag }
        if etag == nil, other.etag == nil, let lastModified, let otherLastModified = other.lastModified {
            return lastModified != otherLastModified
        }
        return false
    }
}

/// What `partial/<sha256>.json` records about a cut download.
struct PartialSidecar: Codable, Sendable, Hashable {
    /// The URL the bytes came from.
    var url: String
    /// The validator of the response they came in; nil when the server sent none.
    var validator: ResourceValidator?
    /// Bytes written when the sidecar was last saved. The file's own length is what a resume
    /// trusts (the bytes of a killed process are on disk); this is for people reading it.
    var offset: Int64
    /// The package's size, when the manifest gives it.
    var size: Int64?
    /// The package the download is for (a delta's is the package it updates); nil in
    /// sidecars written before it was recorded.
    var package: String?
    /// The version the download is for.
    var version: String?
}

/// One kept download under `partial/`: the data file, held with an exclusive `flock(2)` for as
/// long as this process writes it, and its sidecar. Another process (or another flight of this
/// one) that finds it locked downloads into its staging entry as before.
final class PartialDownload {
    /// `partial/` under the store root.
    static func directory(_ layout: StoreLayout) -> URL {
        layout.root.appendingPathComponent("partial", isDirectory: true)
    }

    let dataURL: URL
    let sidecarURL: URL
    private var fd: Int32

    private init(dataURL: URL, sidecarURL: URL, fd: Int32) {
        self.dataURL = dataURL
        self.sidecarURL = sidecarURL
        self.fd = fd
    }

    deinit { close() }

    /// Opens (creating when missing) and locks `partial/<key>`; nil when another holder has it.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem`` when the directory or the file cannot be made.
    static func open(_ layout: StoreLayout, key: String) throws -> PartialDownload? {
        let directory = directory(layout)
        try FileSystem.createDirectory(directory)
        let dataURL = directory.appendingPathComponent(key, isDirectory: false)
        let sidecarURL = directory.appendingPathComponent(key + ".json", isDirectory: false)
        for _ in 0..<3 {
            let fd = systemOpen(dataURL.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            guard fd >= 0 else {
                throw HotUpdateError.system("cannot open the partial download", errno: errno, subject: dataURL.path)
            }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
                _ = systemCloseFile(fd)
                return nil
            }
            // The holder before us may have renamed the file into its staging entry: then the
            // lock is on that inode, not on the path's.
            var opened = stat()
            var current = stat()
            if fstat(fd, &opened) == 0, stat(dataURL.path, &current) == 0, opened.st_ino == current.st_ino,
                opened.st_dev == current.st_dev
            {
                return PartialDownload(dataURL: dataURL, sidecarURL: sidecarURL, fd: fd)
            }
            _ = systemCloseFile(fd)
        }
        return nil
    }

    /// The data file's length.
    func length() throws -> Int64 {
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw HotUpdateError.system("cannot read the partial download's size", errno: errno, subject: dataURL.path)
        }
        return Int64(info.st_size)
    }

    /// Cuts the data file to `length` bytes and writes from there on.
    ///
    /// A file already that long is not truncated: on ext4 (`auto_da_alloc`, the default) a
    /// truncate to zero marks the file as replaced by truncation, and its close then allocates
    /// and writes back every byte written since, although the archive is deleted after it is
    /// unpacked. A fresh download of 130 MB spent 87 ms in that `close` on disk.
    func truncate(to length: Int64) throws {
        guard try self.length() == length || ftruncate(fd, off_t(length)) == 0,
            lseek(fd, off_t(length), SEEK_SET) >= 0
        else {
            throw HotUpdateError.system("cannot truncate the partial download", errno: errno, subject: dataURL.path)
        }
    }

    /// Appends `bytes` at the current position.
    func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard var base = bytes.baseAddress else { return }
        var remaining = bytes.count
        while remaining > 0 {
            let written = systemWriteFile(fd, base, remaining)
            if written < 0 {
                let code = errno
                if code == EINTR { continue }
                throw HotUpdateError.system("cannot write \(dataURL.path)", errno: code, subject: dataURL.path)
            }
            remaining -= written
            base += written
        }
    }

    /// Feeds the first `length` bytes of the data file to `body`, in 1 MiB reads, and leaves
    /// the position at `length`.
    func readPrefix(_ length: Int64, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while offset < length {
            let want = Int(min(Int64(buffer.count), length - offset))
            let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, want, off_t(offset)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                throw HotUpdateError.system(
                    "cannot read the partial download",
                    errno: count < 0 ? errno : EIO,
                    subject: dataURL.path
                )
            }
            try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            offset += Int64(count)
        }
        guard lseek(fd, off_t(length), SEEK_SET) >= 0 else {
            throw HotUpdateError.system("cannot seek in the partial download", errno: errno, subject: dataURL.path)
        }
    }

    /// The sidecar, or nil when missing or unreadable.
    func readSidecar() -> PartialSidecar? {
        guard let data = try? Data(contentsOf: sidecarURL) else { return nil }
        return try? JSONDecoder().decode(PartialSidecar.self, from: data)
    }

    /// Replaces the sidecar (write to a temporary name, rename; not flushed: a sidecar lost in a
    /// crash of the machine only costs a download from the start).
    func writeSidecar(_ sidecar: PartialSidecar) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(sidecar)
        let temporary = sidecarURL.deletingLastPathComponent()
            .appendingPathComponent(".\(sidecarURL.lastPathComponent).\(UUID().uuidString)")
        do {
            try data.write(to: temporary)
            try FileSystem.rename(temporary, to: sidecarURL, durable: false)
        } catch {
            try? FileSystem.remove(temporary)
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot write the partial download's sidecar")
        }
    }

    /// Removes the data file and the sidecar; the lock ends with it.
    func discard() {
        try? FileSystem.remove(sidecarURL)
        try? FileSystem.remove(dataURL)
        close()
    }

    /// Lets go of the lock, keeping both files.
    func close() {
        if fd >= 0 {
            _ = systemCloseFile(fd)
            fd = -1
        }
    }

    /// Removes partial downloads no live process holds that are older than the policy's age,
    /// then the oldest until the rest fit its size; `keeping` is left alone. Also removes
    /// sidecars without a data file and leftover temporary sidecars.
    static func prune(
        _ layout: StoreLayout,
        policy: UpdaterConfiguration.PartialDownloadPolicy,
        keeping: String?,
        now: Date = Date()
    ) {
        let directory = directory(layout)
        var entries: [(key: String, size: Int64, modified: Date)] = []
        let names = FileSystem.contents(of: directory)
        let keys = Set(names.filter { !$0.hasPrefix(".") && !$0.hasSuffix(".json") })
        for name in names {
            let url = directory.appendingPathComponent(name, isDirectory: false)
            if name.hasPrefix(".") {
                if let modified = modificationDate(url), now.timeIntervalSince(modified) > 3600 {
                    try? FileSystem.remove(url)
                }
                continue
            }
            if name.hasSuffix(".json") {
                if !keys.contains(String(name.dropLast(5))) { try? FileSystem.remove(url) }
                continue
            }
            guard name != keeping else { continue }
            var info = stat()
            guard stat(url.path, &info) == 0 else { continue }
            entries.append((name, Int64(info.st_size), modificationDate(url) ?? now))
        }
        let maxAge = Double(policy.maxAge.components.seconds)
        var total = entries.reduce(Int64(0)) { $0 + $1.size }
        for entry in entries.sorted(by: { $0.modified < $1.modified }) {
            let tooOld = now.timeIntervalSince(entry.modified) > maxAge
            guard tooOld || total > policy.maxTotalBytes || !policy.isEnabled else { continue }
            // Only what no one holds: taking the lock proves the writer is gone.
            guard let held = try? open(layout, key: entry.key) else { continue }
            held.discard()
            total -= entry.size
        }
    }

    /// One kept download, as ``inventory(_:)`` finds it.
    struct Entry: Sendable, Hashable {
        /// The name under `partial/`: the SHA-256 the manifest gives the download.
        var key: String
        /// The package and version its sidecar names, when it names them.
        var package: String?
        var version: String?
        /// The bytes downloaded so far (the data file's length).
        var bytes: Int64
        /// The disk space the data file and its sidecar take.
        var allocatedBytes: Int64
        /// The download's whole size, when the manifest gave it.
        var size: Int64?
        /// When the data file was last written.
        var modified: Date
    }

    /// The kept downloads under `partial/`, read without a lock and without creating
    /// anything; held ones included.
    static func inventory(_ layout: StoreLayout) -> [Entry] {
        let directory = directory(layout)
        var entries: [Entry] = []
        for name in FileSystem.contents(of: directory) where !name.hasPrefix(".") && !name.hasSuffix(".json") {
            let data = directory.appendingPathComponent(name, isDirectory: false)
            let sidecarURL = directory.appendingPathComponent(name + ".json", isDirectory: false)
            guard let info = FileInfo(data), info.isRegular else { continue }
            let sidecar = (try? Data(contentsOf: sidecarURL)).flatMap {
                try? JSONDecoder().decode(PartialSidecar.self, from: $0)
            }
            entries.append(
                Entry(
                    key: name,
                    package: sidecar?.package,
                    version: sidecar?.version,
                    bytes: info.size,
                    allocatedBytes: info.allocatedBytes + (FileInfo(sidecarURL)?.allocatedBytes ?? 0),
                    size: sidecar?.size,
                    modified: modificationDate(data) ?? Date(timeIntervalSince1970: 0)
                )
            )
        }
        return entries.sorted { ($0.package ?? "", $0.key) < ($1.package ?? "", $1.key) }
    }

    /// What ``remove(_:where:)`` removed.
    struct Removed: Sendable, Hashable {
        var count = 0
        var allocatedBytes: Int64 = 0
    }

    /// Removes the kept downloads `matches` picks that no live download holds: each is
    /// taken with its lock first, so a download in progress, in this process or another,
    /// keeps its bytes.
    static func remove(_ layout: StoreLayout, where matches: (Entry) -> Bool) -> Removed {
        var removed = Removed()
        for entry in inventory(layout) where matches(entry) {
            guard let held = try? open(layout, key: entry.key) else { continue }
            held.discard()
            removed.count += 1
            removed.allocatedBytes += entry.allocatedBytes
        }
        return removed
    }

    /// Removes the kept download `key` unless a live download holds it.
    ///
    /// - Returns: Whether it was there and is gone.
    @discardableResult
    static func remove(_ layout: StoreLayout, key: String) -> Bool {
        remove(layout) { $0.key == key }.count > 0
    }

    private static func modificationDate(_ url: URL) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: url.path))?[.modificationDate] as? Date
    }
}

private func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 { open(path, flags, mode) }
private func systemCloseFile(_ fd: Int32) -> Int32 { close(fd) }
private func systemWriteFile(_ fd: Int32, _ base: UnsafeRawPointer, _ count: Int) -> Int { write(fd, base, count) }

extension UpdaterConfiguration {
    /// Limits on the downloads a cut transfer leaves under `partial/` for the next attempt.
    ///
    /// A download of a package whose manifest gives its SHA-256 is written to
    /// `partial/<sha256>` with a JSON sidecar (`partial/<sha256>.json`: URL, validator, offset).
    /// When the transfer is cut, the bytes stay there, out of reach of the staging sweep, and the
    /// next attempt asks only for the rest (`Range` with `If-Range`, and `If-Match` for servers
    /// that ignore `If-Range`). The whole file's digest still decides.
    ///
    /// What is kept is bounded: before each download and at the end of each sync, kept
    /// downloads no live download holds that were last written longer ago than ``maxAge`` are
    /// removed, then the oldest until the rest hold at most ``maxTotalBytes``. A download cut
    /// because the disk is full is not kept, nor is a delta refused for want of space (its
    /// bytes would take the room the full package needs). ``Updater/collectGarbage()`` removes
    /// every kept download no live download holds, and ``Updater/remove(packageID:)`` those
    /// of the package.
    public struct PartialDownloadPolicy: Sendable, Hashable {
        /// Whether cut downloads are kept and resumed.
        public var isEnabled: Bool
        /// The most bytes all kept partial downloads may hold; the oldest go first past it.
        public var maxTotalBytes: Int64
        /// How long a partial download is kept after it was last written.
        public var maxAge: Duration
        /// How many times one download whose body the server cut short (a proxy's idle
        /// timeout, a dropped or reused connection) is resumed from its kept bytes within the
        /// same sync before the package fails; each resume must have added bytes. 3 by default.
        public var resumesPerSync: Int

        /// Creates a policy. The defaults keep up to 4 GiB for a week, and resume a cut
        /// transfer up to 3 times within a sync.
        public init(
            isEnabled: Bool = true,
            maxTotalBytes: Int64 = 4 << 30,
            maxAge: Duration = .seconds(7 * 24 * 3600),
            resumesPerSync: Int = 3
        ) {
            self.isEnabled = isEnabled
            self.maxTotalBytes = max(0, maxTotalBytes)
            self.maxAge = maxAge
            self.resumesPerSync = max(0, resumesPerSync)
        }
    }
}

/// A download kept under `partial/` to be resumed, as ``Store/partialDownloads()`` lists it.
package struct PartialDownloadStatus: Sendable, Hashable, Codable {
    /// The SHA-256 the manifest gives the download: its name under `partial/`.
    package var sha256: String
    /// The package it is for (a delta's is the package it updates); nil when its sidecar does
    /// not say (one written by an older HotUpdate).
    package var package: String?
    /// The version it is for.
    package var version: String?
    /// The bytes downloaded so far.
    package var bytes: Int64
    /// The whole download's size, when the manifest gave it.
    package var size: Int64?
    /// When it was last written.
    package var lastWritten: Date
}

extension Store {
    /// The downloads kept under `partial/` to be resumed, held by a live download or not;
    /// read without a lock, creating nothing.
    package nonisolated func partialDownloads() -> [PartialDownloadStatus] {
        PartialDownload.inventory(layout).map { entry in
            PartialDownloadStatus(
                sha256: entry.key,
                package: entry.package,
                version: entry.version,
                bytes: entry.bytes,
                size: entry.size,
                lastWritten: entry.modified
            )
        }
    }
}
