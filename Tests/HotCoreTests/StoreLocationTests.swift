import Foundation
import Testing

@testable import HotCore

/// Where the store root goes: the decision every platform runs, with Apple's calls as
/// stand-ins (Application Support, the backup exclusion) and this platform's real ones.
@Suite("Store location")
struct StoreLocationTests {
    /// Records the folders marked excluded from backup, and can refuse to mark them.
    final class BackupMarks: @unchecked Sendable {
        private let lock = NSLock()
        private var marked: [URL] = []
        var folders: [URL] { lock.withLock { marked } }
        func mark(_ folder: URL) { lock.withLock { marked.append(folder) } }
    }

    /// A fresh directory under the temporary directory, not yet created.
    private func scratch(_ name: String) -> URL {
        FileManager.default.temporaryDirectory
            .appendingPathComponent("store-location-\(name)-\(UUID().uuidString)", isDirectory: true)
    }

    private func isDirectory(_ url: URL) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) && isDirectory.boolValue
    }

    /// Apple's calls: Application Support at `applicationSupport`, an environment whose XDG
    /// data home must be ignored, and exclusions recorded in `marks`.
    private func appleCalls(
        applicationSupport: URL,
        marks: BackupMarks,
        exclusionError: (any Error & Sendable)? = nil
    ) -> StoreLocationCalls {
        StoreLocationCalls(
            applicationSupport: {
                try FileManager.default.createDirectory(at: applicationSupport, withIntermediateDirectories: true)
                return applicationSupport
            },
            environment: { ["XDG_DATA_HOME": "/xdg-must-not-be-used", "HOME": "/home-must-not-be-used"] },
            accountHome: { URL(fileURLWithPath: "/account-must-not-be-used") },
            excludeFromBackup: { folder in
                if let exclusionError { throw exclusionError }
                marks.mark(folder)
            }
        )
    }

    /// The calls of a platform without Application Support or backups (Linux), with
    /// `environment`.
    private func dataHomeCalls(environment: [String: String]) -> StoreLocationCalls {
        StoreLocationCalls(
            applicationSupport: nil,
            environment: { environment },
            accountHome: { URL(fileURLWithPath: "/account-must-not-be-used") },
            excludeFromBackup: nil
        )
    }

    /// This platform's calls with another environment.
    private func systemCalls(environment: [String: String]) -> StoreLocationCalls {
        var calls = StoreLocationCalls.system
        calls.environment = { environment }
        return calls
    }

    @Test("Apple: the subfolder of Application Support, created and excluded from backup")
    func appleApplicationSupport() throws {
        let support = scratch("apple")
        defer { try? FileManager.default.removeItem(at: support) }
        let marks = BackupMarks()

        let root = try StoreLocation.directory(
            subdirectory: "com.example.app/HotUpdate",
            calls: appleCalls(applicationSupport: support, marks: marks)
        )

        let expected = support.appendingPathComponent("com.example.app/HotUpdate", isDirectory: true)
        #expect(root.standardizedFileURL.path == expected.standardizedFileURL.path)
        #expect(isDirectory(root))
        #expect(marks.folders.map(\.standardizedFileURL.path) == [expected.standardizedFileURL.path])
    }

    @Test("Apple: a folder that cannot be excluded from backup is a typed error naming it")
    func appleExclusionRefused() throws {
        let support = scratch("apple-refused")
        defer { try? FileManager.default.removeItem(at: support) }
        let calls = appleCalls(
            applicationSupport: support,
            marks: BackupMarks(),
            exclusionError: CocoaError(.fileWriteNoPermission)
        )

        let error = try #require(throws: HotUpdateError.self) {
            try StoreLocation.directory(subdirectory: "HotUpdate", calls: calls)
        }
        let folder = support.appendingPathComponent("HotUpdate").path
        #expect(error.code == .fileSystem)
        #expect(error.subject == folder)
        #expect(error.message.contains("cannot exclude the store folder \(folder) from backup"))
    }

    @Test("Apple: an Application Support folder that cannot be found is a typed error")
    func appleNoApplicationSupport() throws {
        let calls = StoreLocationCalls(
            applicationSupport: { throw CocoaError(.fileNoSuchFile) },
            environment: { [:] },
            accountHome: { URL(fileURLWithPath: "/unused") },
            excludeFromBackup: { _ in Issue.record("nothing may be marked when there is no folder") }
        )
        let error = try #require(throws: HotUpdateError.self) {
            try StoreLocation.directory(subdirectory: "HotUpdate", calls: calls)
        }
        #expect(error.code == .fileSystem)
        #expect(error.message.contains("cannot find the Application Support folder"))
    }

    @Test("Linux: the XDG data home, then HOME, then the account's home")
    func linuxDataHomeDecision() {
        let account = URL(fileURLWithPath: "/account", isDirectory: true)
        func dataHome(_ environment: [String: String]) -> String {
            StoreLocation.dataHome(environment: environment, accountHome: { account }).path
        }
        #expect(dataHome(["XDG_DATA_HOME": "/data", "HOME": "/home/a"]) == "/data")
        // The XDG specification: a relative or empty path is invalid and ignored.
        #expect(dataHome(["XDG_DATA_HOME": "data", "HOME": "/home/a"]) == "/home/a/.local/share")
        #expect(dataHome(["XDG_DATA_HOME": "", "HOME": "/home/a"]) == "/home/a/.local/share")
        #expect(dataHome(["HOME": "/home/a"]) == "/home/a/.local/share")
        #expect(dataHome(["HOME": "relative"]) == "/account/.local/share")
        #expect(dataHome([:]) == "/account/.local/share")
    }

    @Test("This platform's calls: Application Support and the backup mark on Apple platforms only")
    func platformCalls() {
        #if canImport(Darwin)
        #expect(StoreLocationCalls.system.applicationSupport != nil)
        #expect(StoreLocationCalls.system.excludeFromBackup != nil)
        #else
        #expect(StoreLocationCalls.system.applicationSupport == nil)
        #expect(StoreLocationCalls.system.excludeFromBackup == nil)
        #endif
    }

    #if !canImport(Darwin)
    @Test("Linux: the folder and its missing parents are created under $XDG_DATA_HOME")
    func linuxCreatesUnderDataHome() throws {
        let scratchFolder = scratch("xdg")
        defer { try? FileManager.default.removeItem(at: scratchFolder) }
        let dataHome = scratchFolder.appendingPathComponent("not-yet/share", isDirectory: true)

        let root = try StoreLocation.directory(
            subdirectory: "HotUpdate",
            calls: systemCalls(environment: ["XDG_DATA_HOME": dataHome.path, "HOME": "/nonexistent-home"])
        )

        #expect(root.path == dataHome.appendingPathComponent("HotUpdate").path)
        #expect(isDirectory(root))
    }

    @Test("Linux: ~/.local/share when XDG_DATA_HOME is not set")
    func linuxCreatesUnderHome() throws {
        let home = scratch("home")
        defer { try? FileManager.default.removeItem(at: home) }

        let root = try StoreLocation.directory(
            subdirectory: "HotUpdate",
            calls: systemCalls(environment: ["HOME": home.path])
        )

        #expect(root.path == home.appendingPathComponent(".local/share/HotUpdate").path)
        #expect(isDirectory(root))
    }

    @Test("Linux: the public call puts the store under this process's data home")
    func linuxPublicCall() throws {
        let name = "store-location-test-\(UUID().uuidString)"
        let expected = StoreLocation.dataHome(
            environment: ProcessInfo.processInfo.environment,
            accountHome: { URL(fileURLWithPath: NSHomeDirectory(), isDirectory: true) }
        ).appendingPathComponent(name, isDirectory: true)
        defer { try? FileManager.default.removeItem(at: expected) }

        let root = try StoreLocation.applicationSupport(subdirectory: name)

        #expect(root.path == expected.path)
        #expect(isDirectory(root))
    }
    #endif

    @Test("An existing folder is reused as it is")
    func existingFolderReused() throws {
        let dataHome = scratch("existing")
        defer { try? FileManager.default.removeItem(at: dataHome) }
        let folder = dataHome.appendingPathComponent("HotUpdate", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let kept = folder.appendingPathComponent("store.json")
        try Data("{}".utf8).write(to: kept)
        let marks = BackupMarks()
        let calls = StoreLocationCalls(
            applicationSupport: { dataHome },
            environment: { [:] },
            accountHome: { URL(fileURLWithPath: "/unused") },
            excludeFromBackup: { marks.mark($0) }
        )

        let first = try StoreLocation.directory(subdirectory: "HotUpdate", calls: calls)
        let second = try StoreLocation.directory(subdirectory: "HotUpdate", calls: calls)

        #expect(first.path == folder.path)
        #expect(second.path == folder.path)
        #expect(try Data(contentsOf: kept) == Data("{}".utf8))
        // The mark is set again at each call, so a folder restored without it gets it back.
        #expect(marks.folders.count == 2)
    }

    @Test("A parent that cannot hold a folder is a typed error naming the path")
    func unwritableParent() throws {
        let scratchFolder = scratch("parent")
        defer { try? FileManager.default.removeItem(at: scratchFolder) }
        try FileManager.default.createDirectory(at: scratchFolder, withIntermediateDirectories: true)
        // A regular file where the data home should be: even root cannot create a folder in it.
        let file = scratchFolder.appendingPathComponent("data-home-is-a-file")
        try Data().write(to: file)
        let marks = BackupMarks()
        let calls = StoreLocationCalls(
            applicationSupport: nil,
            environment: { ["XDG_DATA_HOME": file.path] },
            accountHome: { URL(fileURLWithPath: "/unused") },
            excludeFromBackup: { marks.mark($0) }
        )

        let error = try #require(throws: HotUpdateError.self) {
            try StoreLocation.directory(subdirectory: "HotUpdate", calls: calls)
        }

        let folder = file.appendingPathComponent("HotUpdate").path
        #expect(error.code == .fileSystem)
        #expect(error.subject == folder)
        #expect(error.message == "cannot create the store folder \(folder): Not a directory")
        #expect(marks.folders.isEmpty)
    }

    @Test("A file where the store folder should be is a typed error, not reused")
    func fileInPlaceOfFolder() throws {
        let dataHome = scratch("file-in-place")
        defer { try? FileManager.default.removeItem(at: dataHome) }
        try FileManager.default.createDirectory(at: dataHome, withIntermediateDirectories: true)
        let folder = dataHome.appendingPathComponent("HotUpdate")
        try Data().write(to: folder)

        let error = try #require(throws: HotUpdateError.self) {
            try StoreLocation.directory(
                subdirectory: "HotUpdate",
                calls: dataHomeCalls(environment: ["XDG_DATA_HOME": dataHome.path])
            )
        }
        #expect(error.code == .fileSystem)
        #expect(error.subject == folder.path)
    }

    @Test(
        "A subdirectory that names no folder inside the data folder is refused",
        arguments: ["", "/HotUpdate", "../HotUpdate", "HotUpdate/..", "a//b", "./HotUpdate", "HotUpdate/"]
    )
    func invalidSubdirectory(_ subdirectory: String) throws {
        let dataHome = scratch("invalid")
        defer { try? FileManager.default.removeItem(at: dataHome) }

        let error = try #require(throws: HotUpdateError.self) {
            try StoreLocation.directory(
                subdirectory: subdirectory,
                calls: dataHomeCalls(environment: ["XDG_DATA_HOME": dataHome.path])
            )
        }
        #expect(error.code == .invalidArgument)
        #expect(!FileManager.default.fileExists(atPath: dataHome.path))
    }
}
