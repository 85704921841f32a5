import Foundation
import Testing

/// A corpus kept in `shared/corpora/<folder>` beside the repository: CI always has it, a new
/// user's clone does not. The suites that read it run where it is present, and under
/// `CI=true` even where it is missing, so that CI fails instead of skipping them.
struct SharedCorpus: Sendable {
    /// What the corpus is, for messages ("the peer ZIP corpus").
    let title: String
    /// The folder under `shared/corpora`.
    let folder: String
    /// The environment variable that names the folder, for a copy kept elsewhere.
    let environmentVariable: String
    /// `$<environmentVariable>`, else `../shared/corpora/<folder>` from the package root.
    let location: URL

    init(title: String, folder: String, environmentVariable: String) {
        self.title = title
        self.folder = folder
        self.environmentVariable = environmentVariable
        if let path = ProcessInfo.processInfo.environment[environmentVariable], !path.isEmpty {
            location = URL(fileURLWithPath: path, isDirectory: true).standardizedFileURL
        } else {
            // This file is Tests/HotArchiveTests/Support/SharedCorpus.swift.
            location =
                URL(fileURLWithPath: #filePath)
                .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("shared/corpora/\(folder)", isDirectory: true)
                .standardizedFileURL
        }
    }

    /// Whether the folder is there.
    var isPresent: Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: location.path, isDirectory: &isDirectory) && isDirectory.boolValue
    }

    /// Whether the suites run: where the folder is present, and always under `CI=true`.
    var suitesRun: Bool {
        isPresent || ProcessInfo.processInfo.environment["CI"] == "true"
    }

    /// Why the suites are skipped, as the test output shows it.
    var skipReason: Comment {
        Comment(
            rawValue: """
                skipped: \(title) not found beside this clone (looked for ../shared/corpora/\(folder), \
                or set \(environmentVariable) to its directory); under CI=true its absence fails instead
                """
        )
    }

    /// The folder; a test that needs it fails when it is missing.
    func root(sourceLocation: SourceLocation = #_sourceLocation) throws -> URL {
        try #require(
            isPresent,
            """
            \(title) not found: expected the directory \(location.path) \
            (shared/corpora/\(folder) beside the repository, or $\(environmentVariable); CI always has it)
            """,
            sourceLocation: sourceLocation
        )
        return location
    }
}
