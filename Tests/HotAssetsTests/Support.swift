import Foundation
import HotCore
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
