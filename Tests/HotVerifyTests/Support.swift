import Foundation
import HotTestServers
import HotTesting
import Testing

/// A fresh directory for one test, removed when the test ends.
func withTemporaryDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("HotVerifyTests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

struct CommandFailed: Error, CustomStringConvertible {
    var description: String
}

/// Runs a command found on `PATH` and returns its standard output; throws on a non-zero exit.
@discardableResult
func run(_ arguments: [String]) async throws -> Data {
    try await Subprocess.check(arguments[0], Array(arguments.dropFirst())).standardOutput
}

/// The first whitespace-separated word of a command's output: the hex digest of
/// `sha256sum`, `md5sum` and `openssl dgst -r`.
func firstWord(of output: Data) -> String {
    String(decoding: output, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" }).first.map(String.init)
        ?? ""
}

/// Deterministic pseudo-random bytes (xorshift), so failures reproduce.
func pseudoRandomBytes(count: Int, seed: UInt64) -> Data {
    var state = seed | 1
    var bytes = [UInt8](repeating: 0, count: count)
    for index in 0..<count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        bytes[index] = UInt8(truncatingIfNeeded: state >> 24)
    }
    return Data(bytes)
}
