import Foundation
import HotCore
import HotStore
import HotTestServers
import HotTesting

/// A fresh directory for one test, removed when the test ends.
func withTemporaryDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("HotStoreTests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer {
        try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        try? FileManager.default.removeItem(at: directory)
    }
    return try await body(directory)
}

/// The store's formats, so every test runs against each.
enum StoreKind: String, CaseIterable, CustomStringConvertible, Sendable {
    case json, binaryPropertyList, xmlPropertyList

    var description: String { rawValue }

    var defaultFileName: String { self == .json ? "store.json" : "store.plist" }

    var format: FileMetadataStore.Format {
        switch self {
        case .json: .json
        case .binaryPropertyList: .propertyList
        case .xmlPropertyList: .xmlPropertyList
        }
    }

    func make(root: URL, fileName: String? = nil) -> any MetadataStore {
        FileMetadataStore(root: root, format: format, fileName: fileName)
    }
}

/// Runs a command found on `PATH`; returns standard output, throws on a non-zero exit.
@discardableResult
func run(_ arguments: [String]) async throws -> String {
    try await Subprocess.check(arguments[0], Array(arguments.dropFirst())).stdout
}

/// Names in `directory`, sorted.
func listing(_ directory: URL) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
}

/// A snapshot with several packages, older versions, dates and a unicode error message.
/// Dates are whole seconds, which every encoding keeps exactly.
func richSnapshot(generation: Int = 7) -> StoreSnapshot {
    func version(_ id: String, _ number: String, at seconds: TimeInterval) -> InstalledVersion {
        InstalledVersion(
            version: number,
            path: "packages/\(id)/\(number)",
            archiveSize: 1_234_567 + Int64(seconds) % 1000,
            sha256: String(repeating: "ab", count: 32),
            md5: number == "1" ? nil : String(repeating: "0f", count: 16),
            sourceURL: "https://cdn.example.com/\(id)-\(number).zip?sig=a%2Fb&x=1",
            installedAt: Date(timeIntervalSince1970: seconds)
        )
    }
    return StoreSnapshot(
        generation: generation,
        packages: [
            "images": PackageRecord(
                id: "images",
                state: .installed,
                active: version("images", "3", at: 1_700_000_300),
                previous: [version("images", "2", at: 1_700_000_200), version("images", "1", at: 1_700_000_100)]
            ),
            "h5-home": PackageRecord(
                id: "h5-home",
                state: .failed,
                active: version("h5-home", "1.0.2+build~7", at: 1_600_000_000),
                previous: [],
                lastError: "下载失败：摘要不匹配 — digest mismatch 🚫 \"quoted\" \\ <tag> &amp;"
            ),
            "fonts": PackageRecord(id: "fonts", state: .disabled, active: nil),
            "future": PackageRecord(id: "future", state: PackageState(rawValue: "someLaterState"), active: nil),
        ]
    )
}
