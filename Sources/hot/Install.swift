import ArgumentParser
import Foundation
import HotCore
import HotManifest
import HotTransport

/// `hot install ID --root DIR [--manifest URL --trust KEY]`
struct Install: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Install one package the trusted manifest offers, such as an on-demand pack.",
        discussion: """
            The package is looked up in the last trusted manifest the store recorded: the one \
            given with --manifest (fetched and checked as `hot sync` checks it, installing \
            nothing else), else the one the last sync applied. A package that manifest does \
            not offer is refused: nothing is installed from outside it. Only that package is \
            downloaded, and only when its offered version is not installed yet; from then on \
            every sync keeps it current. Prints the package, its version and its directory.
            """
    )

    @Argument(help: "The package id.")
    var id: String

    @Option(help: "The manifest's URL (http, https or file) or path; the one the last sync recorded when omitted.")
    var manifest: String?

    @OptionGroup var storeOptions: StoreOptions

    @Option(help: "The transport; chosen from the URL when omitted.")
    var transport: TransportKind?

    @OptionGroup(title: "TLS") var tlsOptions: TLSOptions

    @Option(help: "The app version, checked against the manifest's min/max app version policy.")
    var appVersion: String?

    @OptionGroup(title: "Manifest") var manifestOptions: ManifestOptions

    @OptionGroup(title: "Network") var network: NetworkOptions

    func validate() throws {
        if manifest != nil, manifestOptions.trust.isEmpty, !manifestOptions.allowUnsigned {
            throw ValidationError(
                "--manifest needs --trust PUBLIC_KEY (or --allow-unsigned for a development repository)"
            )
        }
    }

    func run() async throws {
        try await runReportingErrors {
            let manifestURL = try manifest.map(parseLocation)
            var location = manifestURL
            if location == nil {
                let offered = try await storeOptions.makeUpdater().offeredPackages()
                location = offered.first { $0.id == id }?.url
            }
            let transport = try (transport ?? location.map(TransportKind.defaultKind(for:)) ?? .defaultHTTP).make(
                trust: tlsOptions.trust()
            )
            let updater = storeOptions.makeUpdater(
                transport: transport,
                timeouts: manifestOptions.downloadTimeouts,
                network: network
            )
            if let manifestURL {
                let source = try manifestOptions.signedSource(
                    url: manifestURL,
                    transport: transport,
                    store: storeOptions,
                    appVersion: appVersion
                )
                _ = try await updater.recordManifest(from: source)
            }
            let package = try await updater.install(id: id)
            print("\(package.id)\t\(package.version)\t\(package.directory.path)")
        }
    }
}
