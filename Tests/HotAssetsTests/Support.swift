import Foundation
import HotAssets
import HotCore
import HotTestServers
import HotTesting
import Testing

/// A fresh directory for one test, removed when the test ends.
func withTemporaryDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("HotAssetsTests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

/// Creates each file under `root` with its own tag as content, so a test can tell
/// which file a resolver returned.
func makeTree(_ root: URL, files: [String], tag: String) throws {
    for path in files {
        let url = root.appendingPathComponent(path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("\(tag):\(path)".utf8).write(to: url)
    }
}

/// The tag of a resolved file: `"<tree>:<path>"`, or nil when nothing resolved.
func tag(of asset: ResolvedAsset?) -> String? {
    guard let asset else { return nil }
    return (try? Data(contentsOf: asset.url)).map { String(decoding: $0, as: UTF8.self) }
}

/// Runs a command found on `PATH`; throws on a non-zero exit.
func run(_ arguments: [String]) async throws {
    try await Subprocess.check(arguments[0], Array(arguments.dropFirst()))
}

/// Where the name slots, the path slots and the string pool lie in the bytes of a name
/// index (offsets from the file's start; see `NameIndexFormat`).
func nameIndexSections(_ bytes: Data) -> (nameSlots: Range<Int>, pathSlots: Range<Int>, pool: Range<Int>) {
    func u32(_ offset: Int) -> Int {
        bytes.withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self))) }
    }
    func aligned(_ value: Int, _ alignment: Int) -> Int { (value + alignment - 1) / alignment * alignment }
    let packagesOffset = aligned(68 + u32(64), 8)
    let filesOffset = aligned(packagesOffset + u32(40) * 24, 8)
    let filesEnd = filesOffset + u32(44) * 16
    let slotsOffset = aligned(filesEnd + 8, 64)
    let pathSlotsOffset = slotsOffset + (1 << u32(52)) * NameIndexFormat.nameSlotSize
    let poolOffset = pathSlotsOffset + (1 << u32(filesEnd)) * NameIndexFormat.pathSlotSize
    let bodyLength = bytes.withUnsafeBytes {
        UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
    }
    let bodyEnd = 64 + Int(bodyLength)
    return (slotsOffset..<pathSlotsOffset, pathSlotsOffset..<poolOffset, poolOffset..<bodyEnd)
}
