import Foundation
import HotTestServers
import Testing

/// The archivers the WinZip AES interop tests run: 7-Zip and Python's pyzipper. The suites run
/// where they are installed (`scripts/ensure-deps test` installs both) and always under
/// `CI=true`, so that CI fails instead of skipping them.
enum ArchiveTools {
    /// 7-Zip's command-line tool (`7z` from p7zip-full or 7zip, or `7zz`), if installed.
    static let sevenZip: String? = ["7z", "7zz", "7za"].first { executable($0) != nil }

    /// Whether python3 can import pyzipper.
    static let hasPyzipper = Subprocess.pythonImports("pyzipper")

    static var isCI: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }

    static var sevenZipRuns: Bool { sevenZip != nil || isCI }
    static var pyzipperRuns: Bool { hasPyzipper || isCI }

    static let sevenZipSkip = Comment(
        rawValue:
            "skipped: 7-Zip (7z) is not installed; scripts/ensure-deps test installs p7zip-full. Under CI=true its absence fails instead"
    )
    static let pyzipperSkip = Comment(
        rawValue:
            "skipped: python3 cannot import pyzipper; scripts/ensure-deps test installs it (pip). Under CI=true its absence fails instead"
    )

    /// 7-Zip's path; a test that needs it fails when it is missing.
    static func requireSevenZip(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        try #require(sevenZip, "7-Zip (7z) is not installed", sourceLocation: sourceLocation)
    }

    /// Requires pyzipper; a test that needs it fails when it is missing.
    static func requirePyzipper(sourceLocation: SourceLocation = #_sourceLocation) throws {
        try #require(hasPyzipper, "python3 cannot import pyzipper", sourceLocation: sourceLocation)
    }

    /// The path of `name` in `PATH`, if it is there and executable.
    static func executable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}
