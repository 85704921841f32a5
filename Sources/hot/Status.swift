import ArgumentParser
import Foundation
import HotCore

/// `hot status --root DIR [--json]`
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show what a store has installed and each package's state.",
        discussion: """
            States: new, updateAvailable (planned by a sync, not installed yet), installed, \
            failed (the last update failed; the previous version stays active), fileMissing, \
            digestMismatch (found by a check; `hot repair` fixes them), disabled.
            """)

    @OptionGroup var storeOptions: StoreOptions

    @Flag(help: "Print JSON: {\"packages\": [{id, version, state, path, …}]}.")
    var json = false

    @Flag(help: "Check every package's files first (presence and sizes), recording what is missing or damaged.")
    var check = false

    /// One package in `--json` output.
    struct PackageStatus: Encodable {
        var id: String
        var version: String?
        var state: String
        var path: String?
        var sha256: String?
        var installedAt: Date?
        var previousVersions: [String]
        var lastError: String?
    }

    /// The `--json` document.
    struct StatusDocument: Encodable {
        var root: String
        var packages: [PackageStatus]
    }

    func run() async throws {
        try await runReportingErrors {
            let updater = storeOptions.makeUpdater()
            if check { _ = try await updater.verifyAll(depth: .quick) }
            let snapshot = try await updater.currentSnapshot()
            let packages = try snapshot.packages.values.sorted { $0.id < $1.id }.map { record in
                PackageStatus(
                    id: record.id, version: record.active?.version, state: record.state.rawValue,
                    path: try record.active.map { try updater.layout.url(forRelativePath: $0.path).path },
                    sha256: record.active?.sha256, installedAt: record.active?.installedAt,
                    previousVersions: record.previous.map(\.version), lastError: record.lastError)
            }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                encoder.dateEncodingStrategy = .iso8601
                let data = try encoder.encode(StatusDocument(root: storeOptions.rootURL.path, packages: packages))
                print(String(decoding: data, as: UTF8.self))
                return
            }
            if packages.isEmpty {
                print("no packages installed in \(storeOptions.rootURL.path)")
            }
            for package in packages {
                var line = "\(package.id)\t\(package.version ?? "-")\t\(package.state)\t\(package.path ?? "-")"
                if !package.previousVersions.isEmpty {
                    line += "\tprevious: \(package.previousVersions.joined(separator: ","))"
                }
                if let error = package.lastError { line += "\terror: \(error)" }
                print(line)
            }
        }
    }
}
