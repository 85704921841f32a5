import ArgumentParser
import Foundation
import HotAssets
import HotCore

/// `hot resolve NAME... --root DIR [--bundle DIR]`
struct Resolve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the file an asset name resolves to: installed packages first, the bundle second.",
        discussion: """
            A name without a scale suffix prefers @3x, then @2x, then the plain file (see --scales); \
            a name without an extension matches any extension. Exits 1 when nothing matches. \
            Several names are resolved by one resolver, as an app resolves them: each line is then \
            the name, a tab and the file (nothing after the tab when none matches). \
            A root that does not exist resolves from the bundle alone, as an app whose store was \
            deleted does.
            """
    )

    @Argument(help: "The asset names, e.g. sub/sample or sub/sample.png.")
    var names: [String]

    @OptionGroup var storeOptions: StoreOptions

    @Option(help: "The bundled copy to fall back to.")
    var bundle: String?

    @Option(help: "Scale preference, most preferred first, e.g. 3,2,1.")
    var scales = "3,2,1"

    @Flag(help: "Also print where the file came from (package id and version, or bundle).")
    var showOrigin = false

    func validate() throws {
        guard !names.isEmpty else { throw ValidationError("give at least one asset name") }
    }

    func run() async throws {
        try await runReportingErrors {
            let scaleList = scales.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            guard !scaleList.isEmpty, scaleList.allSatisfy({ $0 >= 1 }) else {
                throw ValidationError("--scales takes positive integers separated by commas, e.g. 3,2,1")
            }
            let resolver: AssetResolverChain
            if let bundle, !FileSystem.isDirectory(storeOptions.rootURL) {
                // No store (never made, or deleted): the bundle answers alone.
                resolver = try AssetResolverChain.make(
                    packages: [],
                    bundle: directoryURL(bundle),
                    scales: ScalePreference(scaleList)
                )
            } else {
                try storeOptions.requireStore()
                resolver = try await AssetResolverChain.make(
                    updater: storeOptions.makeUpdater(),
                    bundle: bundle.map(directoryURL),
                    scales: ScalePreference(scaleList),
                    rebuildingIndex: false
                )
            }
            if names.count == 1, let name = names.first {
                guard let asset = resolver.resolve(name) else {
                    throw HotUpdateError(.notFound, "no installed package or bundle has this asset", subject: name)
                }
                print(line(for: asset))
                return
            }
            var unmatched = 0
            for name in names {
                if let asset = resolver.resolve(name) {
                    print(name + "\t" + line(for: asset))
                } else {
                    print(name + "\t")
                    unmatched += 1
                }
            }
            guard unmatched == 0 else {
                throw HotUpdateError(
                    .notFound,
                    "\(unmatched) of \(names.count) names have no asset in a package or the bundle"
                )
            }
        }
    }

    /// The file, with its origin after a tab when asked.
    private func line(for asset: ResolvedAsset) -> String {
        guard showOrigin else { return asset.url.path }
        switch asset.origin {
        case .package(let id, let version): return "\(asset.url.path)\tpackage \(id) \(version)"
        case .bundle: return "\(asset.url.path)\tbundle"
        }
    }
}
