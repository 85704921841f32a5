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
            digestMismatch, treeOutsideStore (the version's directory, or one above or inside \
            it, is a symbolic link or not a directory; nothing is read through it) (found by a \
            check; `hot repair` and `hot sync` fix them), disabled.

            Guarded packages also show the version waiting for the next launch, the active version's \
            launch phase (pending, trial, confirmed) and the versions a failed launch blocked \
            (`hot unblock` lets one be downloaded again). \
            Downloads kept in partial/ to be resumed are listed last (`hot gc` removes them).

            Without --check it is read-only: it creates nothing, removes nothing and records \
            nothing. It waits at most half a second for another process's store lock, then names \
            that process on stderr and shows the state last committed. A root that does not \
            exist is an error.

            With --check, every file's presence, size and modification time is compared with \
            what the install left (a file written since, even at the same size, is hashed); the \
            states shown are those the check found, each file found missing or damaged is named \
            on stderr, the package is marked for the next plain `hot sync` to heal (losses/<id>, \
            as a reader that misses a file marks it), and the command exits 1. A version once \
            found damaged is checked by hash.
            """
    )

    @OptionGroup var storeOptions: StoreOptions

    @Flag(
        help:
            "Print JSON: {\"packages\": [{id, version, state, path, pendingVersion, launchPhase, blocked, …}], \"partialDownloads\": {count, bytes, downloads}}."
    )
    var json = false

    @Flag(
        help:
            "Check every package's files first (presence, size, and content where the modification time shows a write), name what is missing or damaged, mark it for the next sync to heal, and exit 1 if anything is."
    )
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
        /// A version installed and waiting for the next launch.
        var pendingVersion: String?
        /// The active version's launch phase (pending, trial, confirmed) for a guarded package.
        var launchPhase: String?
        /// Versions a failed launch blocked.
        var blocked: [PackageRecord.BlockedVersion]?
    }

    /// The downloads kept under `partial/` in `--json` output.
    struct PartialDownloads: Encodable {
        var count: Int
        var bytes: Int64
        var downloads: [PartialDownloadStatus]
    }

    /// The `--json` document.
    struct StatusDocument: Encodable {
        var root: String
        var packages: [PackageStatus]
        var partialDownloads: PartialDownloads
    }

    func run() async throws {
        try await runReportingErrors {
            try storeOptions.requireStore()
            let updater = storeOptions.makeUpdater()
            var found: [String: PackageHealth] = [:]
            if check {
                for health in try await updater.health.verifyAll(depth: .quick, recording: false) {
                    found[health.id] = health
                    guard !health.isHealthy else { continue }
                    // The next plain sync checks a marked package file by file and heals it.
                    LossMarker.record(health.id, layout: updater.layout)
                    let name = "\(health.id) \(health.version)"
                    if let component = health.outsideStore {
                        printNote("hot: \(name): \(component) is not a directory inside the store")
                    }
                    for path in health.missing where health.outsideStore == nil {
                        printNote("hot: \(name): missing \(path)")
                    }
                    for path in health.damaged { printNote("hot: \(name): damaged \(path)") }
                }
            }
            let snapshot = try await updater.currentSnapshot()
            let packages = try snapshot.packages.values.sorted { $0.id < $1.id }.map { record in
                let checked = found[record.id].flatMap { $0.version == record.active?.version ? $0 : nil }
                var state = checked.map { $0.isHealthy ? record.state : $0.state } ?? record.state
                // Never "installed" at a path that is gone, or reached through a link: one stat
                // per directory of the path.
                if let active = record.active, state != .disabled, !updater.store.treeExists(active) {
                    state = updater.store.treeIsOutsideStore(active) ? .treeOutsideStore : .fileMissing
                }
                return PackageStatus(
                    id: record.id,
                    version: record.active?.version,
                    state: state.rawValue,
                    path: try record.active.map { try updater.layout.url(forRelativePath: $0.path).path },
                    sha256: record.active?.sha256,
                    installedAt: record.active?.installedAt,
                    previousVersions: record.previous.map(\.version),
                    lastError: record.lastError,
                    pendingVersion: record.pending?.version,
                    launchPhase: record.launch?.phase.rawValue,
                    blocked: record.blocked
                )
            }
            let kept = updater.store.partialDownloads()
            let partials = PartialDownloads(
                count: kept.count,
                bytes: kept.reduce(Int64(0)) { $0 + $1.bytes },
                downloads: kept
            )
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                encoder.dateEncodingStrategy = .iso8601
                let data = try encoder.encode(
                    StatusDocument(root: storeOptions.rootURL.path, packages: packages, partialDownloads: partials)
                )
                print(String(decoding: data, as: UTF8.self))
                if found.values.contains(where: { !$0.isHealthy }) { throw ExitCode(1) }
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
                if let pending = package.pendingVersion { line += "\twaiting: \(pending)" }
                if let phase = package.launchPhase { line += "\tlaunch: \(phase)" }
                if let blocked = package.blocked, !blocked.isEmpty {
                    line += "\tblocked: \(blocked.map(\.version).joined(separator: ","))"
                }
                if let error = package.lastError { line += "\terror: \(error)" }
                print(line)
            }
            if partials.count > 0 {
                let each = kept.map { download in
                    let name = download.package.map { "\($0) \(download.version ?? "-")" } ?? download.sha256
                    let whole = download.size.map { " of \(ByteCount.format($0))" } ?? ""
                    return "\(name): \(ByteCount.format(download.bytes))\(whole)"
                }
                print(
                    "partial downloads: \(partials.count), \(ByteCount.format(partials.bytes)) "
                        + "(\(each.joined(separator: "; ")))"
                )
            }
            if found.values.contains(where: { !$0.isHealthy }) { throw ExitCode(1) }
        }
    }
}
