import ArgumentParser
import Foundation
import HotCore

/// `hot sync --manifest URL --root DIR`
struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Bring a store up to date with a manifest.",
        discussion: """
            Downloads every package the store lacks, checks its size and digest before unpacking
            it, installs it and records it atomically. A package that fails leaves the version
            installed before it active. Exits 1 if any package failed.
            """)

    /// The manifest formats `hot sync` reads.
    enum Format: String, ExpressibleByArgument, CaseIterable {
        case native
        case patchinfo
    }

    @Option(help: "The manifest's URL (http, https or file) or path.")
    var manifest: String

    @OptionGroup var storeOptions: StoreOptions

    @Option(help: "The transport (curl|urlsession|file); chosen from the URL when omitted.")
    var transport: TransportKind?

    @Option(help: "The unarchiver (zip|libarchive).")
    var unarchiver: UnarchiverKind = .zip

    @Option(help: "The manifest format: native (manifest.json) or patchinfo ({url, md5}).")
    var format: Format = .native

    @Option(help: "The package id a patchinfo manifest installs under.")
    var patchID = "patch"

    func run() async throws {
        try await runReportingErrors {
            let manifestURL = try parseLocation(manifest)
            let transport = try (transport ?? TransportKind.defaultKind(for: manifestURL)).make()
            let updater = storeOptions.makeUpdater(transport: transport, unarchiver: try unarchiver.make())
            let source: any ManifestSource =
                switch format {
                case .native: StaticManifestSource(url: manifestURL, transport: transport)
                case .patchinfo: PatchInfoManifestSource(url: manifestURL, transport: transport, packageID: patchID)
                }
            let report = try await updater.sync(from: source)
            for outcome in report.packages {
                let version = outcome.activeVersion ?? "-"
                if let error = outcome.error {
                    print("\(outcome.id)\t\(outcome.change)\tfailed\t\(version)")
                    printError(error.description)
                } else {
                    print("\(outcome.id)\t\(outcome.change)\tok\t\(version)")
                }
            }
            if !report.failures.isEmpty { throw ExitCode(1) }
        }
    }
}
