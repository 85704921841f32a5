// A libFuzzer target over `ZipUnarchiver`, HotArchive's own ZIP reader.
//
// Each input is written to a file and handed to the public API: the entries are
// listed and, when listing succeeds, extracted into a fresh directory, which is
// then removed. Besides the sanitizers' findings (memory errors, Swift traps such
// as an overflow or an out-of-range index), the harness checks the reader's safety
// contract itself and calls `abort()` when it is broken, so libFuzzer records the
// input as a crash:
//
// - every error is a `HotUpdateError`, never `.internalInconsistency`;
// - a listing holds at most `maxEntries` entries, with normalised relative paths
//   (no `..`, no absolute path, no empty or `.` component, no component over 255
//   bytes, no duplicate), no device,
//   and declared file sizes within `maxTotalBytes`;
// - once an archive lists, extraction fails only for reasons in its data
//   (corrupt data, checksum, password, WinZip AES authentication, limit, method),
//   never `.unsafeEntry` or a
//   file-system error (a name component over 255 bytes is refused when listing);
// - after a failed extraction, the destination does not exist and nothing was left
//   beside it (no staging directory);
// - after a successful one, nothing exists beside the destination, and the tree
//   under it is exactly what the listing and the report say: the same files with
//   the sizes declared, the same directories and symlinks, no setuid, setgid or
//   sticky bit, and every symlink resolving inside the destination;
// - nothing appears in the directories above the destination (up to the fuzzer's
//   scratch directory), where `..` escapes would land.
//
// Built with `-sanitize=fuzzer,address` (see `scripts/fuzz` and `Fuzz/README.md`).
// The scratch directory is `FileManager.default.temporaryDirectory` (`TMPDIR`),
// which the script points at a fresh directory on a RAM file system when it can.

import CLibFuzzer
import Dispatch
import Foundation
import Glibc
import HotArchive
import HotCore

/// What the harness extracts with: tight limits, symlinks allowed (so their
/// checks run), a password (so encrypted entries, ZipCrypto and WinZip AES, are
/// decrypted, authenticated and inflated: the seeds use this password).
let options = ExtractOptions(
    password: "12345678",
    maxTotalBytes: 16 << 20,
    maxEntries: 1000,
    symlinks: .allowWithinDestination,
    concurrency: 1)

/// The directories the harness works in, created once per process.
///
/// `base/input.zip` is the archive; the destination is `out` inside `base/up1/up2/up3/work`.
/// The `up` levels catch `..` escapes that climb out of `work`.
struct Sandbox {
    let base: String
    let archive: URL
    /// From `base` down to `work`: each holds only the next one.
    let levels: [String]
    let work: String
    let destination: URL

    init() {
        let root = FileManager.default.temporaryDirectory.path
        base = root + "/zipfuzz-\(getpid())"
        levels = [base, base + "/up1", base + "/up1/up2", base + "/up1/up2/up3", base + "/up1/up2/up3/work"]
        work = levels[levels.count - 1]
        archive = URL(fileURLWithPath: base + "/input.zip")
        destination = URL(fileURLWithPath: work + "/out", isDirectory: true)
        try? FileManager.default.removeItem(atPath: base)
        do {
            try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        } catch {
            harnessFailure("cannot create the scratch directory '\(work)': \(error)")
        }
    }
}

/// Counts of what the inputs led to, printed when the fuzzer exits.
nonisolated(unsafe) var outcomes: [String: Int] = [:]
nonisolated(unsafe) var sandbox: Sandbox?

/// A break of the reader's contract: print why and abort, so libFuzzer saves the input.
func violation(_ reason: String) -> Never {
    FileHandle.standardError.write(Data("\nZIPFUZZ CONTRACT VIOLATION: \(reason)\n".utf8))
    abort()
}

/// The harness itself cannot work (not the reader's fault).
func harnessFailure(_ reason: String) -> Never {
    FileHandle.standardError.write(Data("\nzipfuzz: harness failure: \(reason)\n".utf8))
    exit(2)
}

/// Carries a task's result to the thread waiting for it (the semaphore orders the accesses).
final class ResultBox<T: Sendable>: @unchecked Sendable {
    var result: Result<T, any Error>?
}

/// Runs async work from libFuzzer's synchronous callback and waits for it.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) -> Result<T, any Error> {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do {
            box.result = .success(try await body())
        } catch {
            box.result = .failure(error)
        }
        done.signal()
    }
    done.wait()
    guard let result = box.result else { harnessFailure("a task finished without a result") }
    return result
}

/// Names in a directory (not `.` and `..`), sorted; nil when it does not exist.
func names(in path: String) -> [String]? {
    guard let handle = opendir(path) else {
        if errno == ENOENT { return nil }
        harnessFailure("cannot list '\(path)': errno \(errno)")
    }
    defer { closedir(handle) }
    var result: [String] = []
    while let entry = readdir(handle) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        if name != "." && name != ".." { result.append(name) }
    }
    return result.sorted()
}

/// Checks that every level above the destination holds only the next level, and
/// `work` holds `expected` (the destination's name, or nothing).
func checkSurroundings(_ box: Sandbox, work expected: [String], after stage: String) {
    let wanted: [[String]] = [["input.zip", "up1"], ["up2"], ["up3"], ["work"], expected]
    for (level, want) in zip(box.levels, wanted) {
        let found = names(in: level) ?? []
        if found != want {
            violation("after \(stage), '\(level)' holds \(found), expected \(want)")
        }
    }
}

/// Whether `path` is a normalised relative path: no empty, `.` or `..` component, no `\`.
func isNormalisedRelative(_ path: String) -> Bool {
    guard !path.isEmpty, !path.hasPrefix("/"), !path.contains("\\"), !path.utf8.contains(0) else { return false }
    return path.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { $0 != "" && $0 != "." && $0 != ".." }
}

/// Checks a listing on its own.
func checkListing(_ entries: [ArchiveEntry]) {
    if entries.count > options.maxEntries {
        violation("the listing has \(entries.count) entries, more than the limit of \(options.maxEntries)")
    }
    var seen = Set<String>()
    var declared: Int64 = 0
    for entry in entries {
        if !isNormalisedRelative(entry.path) { violation("the listing has the unsafe path '\(entry.path)'") }
        if !seen.insert(entry.path).inserted { violation("the listing has '\(entry.path)' twice") }
        if entry.path.split(separator: "/").contains(where: { $0.utf8.count > 255 }) {
            violation("the listing admits '\(entry.path)', with a component longer than 255 bytes")
        }
        if entry.kind == .other { violation("the listing admits the device/FIFO/socket '\(entry.path)'") }
        if entry.uncompressedSize < 0 || entry.compressedSize < 0 {
            violation("the listing gives '\(entry.path)' a negative size")
        }
        if entry.kind == .symlink && entry.linkTarget == nil {
            violation("the listing gives the symlink '\(entry.path)' no target")
        }
        if entry.kind != .directory { declared += entry.uncompressedSize }
    }
    if declared > options.maxTotalBytes {
        violation("the listing declares \(declared) bytes, more than the limit of \(options.maxTotalBytes)")
    }
}

/// What is on disk under the destination, found with `lstat` (links not followed).
struct Tree {
    var files: [String: Int64] = [:]
    var directories: Set<String> = []
    var symlinks: [String: String] = [:]

    init(root: String) {
        walk(root: root, relative: "")
    }

    private mutating func walk(root: String, relative: String) {
        let directory = relative.isEmpty ? root : root + "/" + relative
        for name in names(in: directory) ?? [] {
            let path = relative.isEmpty ? name : relative + "/" + name
            let full = root + "/" + path
            var info = stat()
            guard lstat(full, &info) == 0 else { harnessFailure("cannot inspect '\(full)': errno \(errno)") }
            if info.st_mode & 0o7000 != 0 {
                violation("'\(path)' was created with mode \(String(info.st_mode & 0o7777, radix: 8))")
            }
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                directories.insert(path)
                walk(root: root, relative: path)
            case S_IFREG:
                files[path] = Int64(info.st_size)
            case S_IFLNK:
                var buffer = [CChar](repeating: 0, count: 4097)
                let length = readlink(full, &buffer, 4096)
                guard length >= 0 else { harnessFailure("cannot read the link '\(full)': errno \(errno)") }
                symlinks[path] = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            default:
                violation("'\(path)' was created as a device, FIFO or socket")
            }
        }
    }
}

/// Checks that resolving `target` from the directory of the link at `path` stays
/// inside the destination, lexically and on disk.
func checkLink(_ path: String, target: String, destination: String) {
    if target.hasPrefix("/") { violation("the symlink '\(path)' has the absolute target '\(target)'") }
    var stack = path.split(separator: "/").dropLast().map(String.init)
    for part in target.split(separator: "/") {
        if part == "." { continue }
        if part == ".." {
            if stack.isEmpty { violation("the symlink '\(path)' -> '\(target)' climbs out of the destination") }
            stack.removeLast()
        } else {
            stack.append(String(part))
        }
    }
    guard let resolvedRoot = realpath(destination, nil) else { harnessFailure("cannot resolve '\(destination)'") }
    let root = String(cString: resolvedRoot)
    free(resolvedRoot)
    if let resolved = realpath(destination + "/" + path, nil) {
        let real = String(cString: resolved)
        free(resolved)
        if real != root && !real.hasPrefix(root + "/") {
            violation("the symlink '\(path)' -> '\(target)' resolves to '\(real)', outside the destination")
        }
    }
}

/// Checks a successful extraction against the listing and the report.
func checkExtraction(_ report: ExtractionReport, listing: [ArchiveEntry], destination: String) {
    let tree = Tree(root: destination)
    let reported = Dictionary(report.files.map { ($0.path, $0.size) }, uniquingKeysWith: { first, _ in first })
    if reported.count != report.files.count { violation("the report names a file twice") }
    if tree.files != reported {
        violation("the files on disk \(tree.files) are not the files reported \(reported)")
    }
    if tree.directories != Set(report.directories) {
        violation("the directories on disk \(tree.directories.sorted()) are not those reported \(report.directories)")
    }
    if Set(tree.symlinks.keys) != Set(report.symlinks) {
        violation("the symlinks on disk \(tree.symlinks.keys.sorted()) are not those reported \(report.symlinks)")
    }
    if report.totalBytes != reported.values.reduce(0, +) || report.totalBytes > options.maxTotalBytes {
        violation("the report's total of \(report.totalBytes) bytes is wrong or over the limit")
    }
    for entry in listing {
        switch entry.kind {
        case .file:
            if tree.files[entry.path] != entry.uncompressedSize {
                violation("the listed file '\(entry.path)' (\(entry.uncompressedSize) bytes) is on disk as \(String(describing: tree.files[entry.path]))")
            }
        case .directory:
            if !tree.directories.contains(entry.path) { violation("the listed directory '\(entry.path)' was not created") }
        case .symlink:
            if tree.symlinks[entry.path] != entry.linkTarget {
                violation("the listed symlink '\(entry.path)' -> \(String(describing: entry.linkTarget)) is on disk as \(String(describing: tree.symlinks[entry.path]))")
            }
        default:
            violation("the listing has an entry of kind \(entry.kind)")
        }
    }
    let listedPaths = Set(listing.map(\.path))
    for path in tree.files.keys where !listedPaths.contains(path) { violation("'\(path)' was written but not listed") }
    for path in tree.symlinks.keys where !listedPaths.contains(path) { violation("'\(path)' was linked but not listed") }
    for (path, target) in tree.symlinks { checkLink(path, target: target, destination: destination) }
}

/// Error codes an extraction may fail with once the archive has listed: reasons in the data.
let dataErrorCodes: Set<HotUpdateError.Code> = [
    .corruptArchive, .checksumMismatch, .wrongPassword, .authenticationFailed, .passwordRequired,
    .unsupportedMethod, .unsupportedEncryption, .limitExceeded,
]

func typed(_ error: any Error, stage: String) -> HotUpdateError {
    guard let hot = error as? HotUpdateError else {
        violation("\(stage) threw a \(type(of: error)), not a HotUpdateError: \(error)")
    }
    if hot.code == .internalInconsistency { violation("\(stage) reported an internal inconsistency: \(hot.detailedDescription())") }
    return hot
}

/// One input.
func fuzzOne(_ bytes: UnsafeRawBufferPointer) {
    guard let box = sandbox else { harnessFailure("no sandbox") }
    guard FileManager.default.createFile(atPath: box.archive.path, contents: Data(bytes)) else {
        harnessFailure("cannot write '\(box.archive.path)'")
    }
    let archive = box.archive
    let listed = blocking { try await ZipUnarchiver().entries(of: archive, options: options) }
    let listing: [ArchiveEntry]
    switch listed {
    case .success(let entries):
        listing = entries
    case .failure(let error):
        let hot = typed(error, stage: "listing")
        outcomes["list: \(hot.code)", default: 0] += 1
        checkSurroundings(box, work: [], after: "a failed listing")
        return
    }
    checkListing(listing)

    let destination = box.destination
    let extracted = blocking { try await ZipUnarchiver().extract(archive, to: destination, options: options, progress: nil) }
    switch extracted {
    case .success(let report):
        checkSurroundings(box, work: ["out"], after: "a successful extraction")
        checkExtraction(report, listing: listing, destination: destination.path)
        outcomes["extract: ok", default: 0] += 1
        do {
            try FileManager.default.removeItem(at: destination)
        } catch {
            harnessFailure("cannot remove '\(destination.path)': \(error)")
        }
    case .failure(let error):
        let hot = typed(error, stage: "extraction")
        if FileManager.default.fileExists(atPath: destination.path) {
            violation("extraction failed (\(hot)) but the destination exists")
        }
        checkSurroundings(box, work: [], after: "a failed extraction (\(hot))")
        if !dataErrorCodes.contains(hot.code) {
            violation("the archive listed, then extraction failed with \(hot.code): \(hot.detailedDescription())")
        }
        outcomes["extract: \(hot.code)", default: 0] += 1
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    fuzzOne(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size))
    return 0
}

sandbox = Sandbox()
atexit {
    let lines = outcomes.sorted { $0.key < $1.key }.map { "  \($0.key): \($0.value)" }
    FileHandle.standardError.write(Data("zipfuzz outcomes:\n\(lines.joined(separator: "\n"))\n".utf8))
    if let base = sandbox?.base { try? FileManager.default.removeItem(atPath: base) }
}
var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, testOneInput))
