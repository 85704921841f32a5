import ArgumentParser
import Foundation
import HotCore

/// `hot delete ID --root DIR`
struct Delete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete a package and every version of it from a store.",
        discussion: """
            Files the package shares with other packages stay for them: only the objects \
            nothing else links are freed. Its partial downloads (partial/) go too, unless a \
            download in progress holds them. Exits 1 when the store knows nothing of the package.
            """
    )

    @Argument(help: "The package id.")
    var id: String

    @OptionGroup var storeOptions: StoreOptions

    func run() async throws {
        try await runReportingErrors {
            let report = try await storeOptions.makeUpdater().remove(packageID: id)
            print(
                "deleted \(id): \(report.versionsRemoved) version(s), \(report.objectsRemoved) object(s), "
                    + "\(ByteCount.format(report.bytesFreed)) freed" + ByteCount.partials(report)
            )
        }
    }
}

/// `hot gc --root DIR [--keep N]`
struct GarbageCollect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gc",
        abstract: "Free the versions and objects a store no longer needs.",
        discussion: """
            Keeps each package's active version and its newest previous versions (one unless \
            --keep says otherwise), and frees every object no installed tree links and every \
            partial download (partial/) no download in progress holds. With \
            --on-demand-budget or --unused-days, on-demand packs are evicted first: those \
            unused for that many days, then the least recently used until the rest fit in the \
            budget. Launch and prefetch packages, guarded ones and those a live launch runs \
            from stay. An evicted pack is downloaded again when asked for (hot install).
            """
    )

    @OptionGroup var storeOptions: StoreOptions

    @Option(help: "How many previous versions of each package to keep for rollback.")
    var keep = 1

    @Option(help: "Evict on-demand packs, least recently used first, until they take at most this many bytes.")
    var onDemandBudget: Int64?

    @Option(help: "Evict on-demand packs unused for more than this many days.")
    var unusedDays: Int?

    func validate() throws {
        guard keep >= 0 else { throw ValidationError("--keep must be 0 or more") }
        guard onDemandBudget ?? 0 >= 0, unusedDays ?? 0 >= 0 else {
            throw ValidationError("--on-demand-budget and --unused-days must not be negative")
        }
    }

    func run() async throws {
        try await runReportingErrors {
            let updater = storeOptions.makeUpdater(keepPreviousVersions: keep)
            if onDemandBudget != nil || unusedDays != nil {
                let eviction = try await updater.evictOnDemandPacks(
                    budget: OnDemandBudget(maxBytes: onDemandBudget, maxUnusedDays: unusedDays)
                )
                for id in eviction.evicted { print("evicted \(id)") }
                print(
                    "evicted \(eviction.evicted.count) on-demand pack(s), \(ByteCount.format(eviction.bytes)) of files, "
                        + "\(ByteCount.format(eviction.garbage.bytesFreed)) freed"
                )
            }
            let report = try await updater.collectGarbage()
            print(
                "removed \(report.versionsRemoved) version(s), \(report.objectsRemoved) object(s), "
                    + "\(ByteCount.format(report.bytesFreed)) freed" + ByteCount.partials(report)
            )
        }
    }
}

/// `hot repair --root DIR [--quick] [--transport KIND]`
struct Repair: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check every installed package and make the damaged ones whole.",
        discussion: """
            A missing or damaged file is put back from the store's objects when its object is \
            intact, with no network; otherwise the package is downloaded again from where it \
            came from, and every kept version that shared the damaged file (one object, \
            hard-linked into each tree) is linked to the good one. Prints one line per package; \
            exits 1 if any package stays damaged.
            """
    )

    @OptionGroup var storeOptions: StoreOptions

    @Flag(help: "Check presence and sizes only, not hashes.")
    var quick = false

    @Option(help: "The transport for re-downloads; chosen from each package's URL when omitted.")
    var transport: TransportKind?

    @OptionGroup(title: "TLS") var tlsOptions: TLSOptions

    func run() async throws {
        try await runReportingErrors {
            let probe = storeOptions.makeUpdater()
            let snapshot = try await probe.currentSnapshot()
            let firstSource = snapshot.packages.values.compactMap { $0.active.flatMap { URL(string: $0.sourceURL) } }
                .first
            let kind = transport ?? firstSource.map(TransportKind.defaultKind(for:)) ?? .defaultHTTP
            let updater = storeOptions.makeUpdater(transport: try kind.make(trust: tlsOptions.trust()))
            let reports = try await updater.health.repairAll(depth: quick ? .quick : .full)
            if reports.isEmpty { print("no packages installed in \(storeOptions.rootURL.path)") }
            for report in reports {
                var line = "\(report.id)\t\(report.after.version)\t"
                if report.before.isHealthy {
                    line += "ok"
                } else if report.succeeded {
                    line += "repaired"
                    if !report.restored.isEmpty { line += "\trestored \(report.restored.count) file(s) from objects" }
                    if report.refetched { line += "\tdownloaded again" }
                    if !report.relinked.isEmpty {
                        line += "\trelinked \(report.relinked.count) file(s) of kept versions sharing them"
                    }
                } else {
                    line += "damaged\t\(report.after.missing.count) missing, \(report.after.damaged.count) damaged"
                }
                print(line)
                if let error = report.error { printError(error.description) }
            }
            if reports.contains(where: { !$0.succeeded }) { throw ExitCode(1) }
        }
    }
}

/// Human-readable byte counts.
enum ByteCount {
    static func format(_ bytes: Int64) -> String {
        ByteCountFormatter.string(fromByteCount: bytes, countStyle: .binary)
    }

    /// `, 2 partial download(s), 1.2 MiB`, or nothing when the report removed none.
    static func partials(_ report: GarbageReport) -> String {
        guard report.partialDownloadsRemoved > 0 else { return "" }
        return ", \(report.partialDownloadsRemoved) partial download(s), \(format(report.partialBytesFreed))"
    }
}
