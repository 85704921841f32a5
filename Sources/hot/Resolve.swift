import ArgumentParser
import Foundation
import HotAssets
import HotCore

/// `hot resolve NAME --root DIR [--bundle DIR]`
struct Resolve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the file an asset name resolves to: installed packages first, the bundle second.",
        discussion: """
            A name without a scale suffix prefers @3x, then @2x, then the plain file (see --scales); \
            a name without an extension matches any extension. Exits 1 when nothing matches.
            """
    )

    @Argument(help: "The asset name, e.g. sub/sample or sub/sample.png.")
    var name: String

    @OptionGroup var storeOptions: StoreOptions

    @Option(help: "The bundled copy to fall back to.")
    var bundle: String?

    @Option(help: "Scale preference, most preferred first, e.g. 3,2,1.")
    var scales = "3,2,1"

    @Flag(help: "Also print where the file came from (package id and version, or bundle).")
    var showOrigin = false

    func run() async throws {
        try await runReportingErrors {
            let scaleList = scales.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            guard !scaleList.isEmpty, scaleList.allSatisfy({ $0 >= 1 }) else {
                throw ValidationError("--scales takes positive integers separated by commas, e.g. 3,2,1")
            }
            try storeOptions.requireStore()
            let updater = storeOptions.makeUpdater()
            let resolver = try await AssetResolverChain.make(
                updater: updater,
                bundle: bundle.map(directoryURL),
                scales: ScalePreference(scaleList),
                rebuildingIndex: false
            )
            guard let asset = resolver.resolve(name) else {
                throw HotUpdateError(.notFound, "no installed package or bundle has this asset", subject: name)
            }
            if showOrigin {
                switch asset.origin {
                case .package(let id, let version): print("\(asset.url.path)\tpackage \(id) \(version)")
                case .bundle: print("\(asset.url.path)\tbundle")
                }
            } else {
                print(asset.url.path)
            }
        }
    }
}
