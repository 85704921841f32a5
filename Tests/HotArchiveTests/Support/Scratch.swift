import Foundation
import HotTestServers
import HotTesting
import Testing

/// A fresh temporary directory for one test, removed by ``remove()``.
struct Scratch {
    let url: URL

    init() throws {
        url = try ScratchDirectory.make("hotarchive-tests")
    }

    /// A path inside the directory.
    func path(_ relative: String) -> URL { url.appendingPathComponent(relative) }

    /// Removes the directory, first giving the owner full access to every directory in it
    /// (an extracted read-only directory could not be emptied otherwise).
    func remove() {
        let manager = FileManager.default
        try? manager.setAttributes([.posixPermissions: 0o700], ofItemAtPath: url.path)
        if let walker = manager.enumerator(atPath: url.path) {
            while let relative = walker.nextObject() as? String {
                if walker.fileAttributes?[.type] as? FileAttributeType == .typeDirectory {
                    try? manager.setAttributes(
                        [.posixPermissions: 0o700],
                        ofItemAtPath: url.appendingPathComponent(relative).path
                    )
                }
            }
        }
        try? manager.removeItem(at: url)
    }

    /// Names in the directory itself (not recursive), sorted.
    func listing() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).sorted()
    }
}

/// Runs python3 scripts for the tests, through ``Subprocess`` (never blocking the
/// cooperative pool the tests share).
enum Python {
    /// Runs `script` with python3 in `directory`, where `zipcraft` is importable, and
    /// throws when it exits non-zero.
    @discardableResult
    static func run(_ script: String, in directory: URL) async throws -> Subprocess.Output {
        try ZipCraft.install(in: directory)
        let file = directory.appendingPathComponent("script-\(UUID().uuidString).py")
        try script.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        return try await Subprocess.check("python3", [file.path], in: directory)
    }
}
