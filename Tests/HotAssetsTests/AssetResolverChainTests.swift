import Foundation
import HotAssets
import HotCore
import Testing

@Suite("AssetResolverChain")
struct AssetResolverChainTests {
    @Test("Packages first, newest first, then the bundle; each answer reports its origin")
    func packageThenBundle() async throws {
        try await withTemporaryDirectory { parent in
            let bundle = parent.appendingPathComponent("bundle")
            let imagesV3 = parent.appendingPathComponent("packages/images/3")
            let themeV1 = parent.appendingPathComponent("packages/theme/1")
            try makeTree(
                bundle,
                files: ["sub/sample@3x.png", "sub/only-bundle.png", "config.json", "theme.css"],
                tag: "bundle"
            )
            try makeTree(imagesV3, files: ["sub/sample@2x.png", "config.json"], tag: "images")
            try makeTree(themeV1, files: ["theme.css", "config.json"], tag: "theme")

            let chain = try AssetResolverChain.make(
                packages: [
                    InstalledPackage(id: "images", version: "3", directory: imagesV3),
                    InstalledPackage(id: "theme", version: "1", directory: themeV1),
                ],
                bundle: bundle
            )
            #expect(chain.resolvers.count == 3)

            // The package overrides the bundle, even with a lower scale.
            let sample = try #require(chain.resolve("sub/sample"))
            #expect(sample.origin == .package(id: "images", version: "3"))
            #expect(tag(of: sample) == "images:sub/sample@2x.png")
            // The first package wins over the second.
            let config = try #require(chain.resolve("config.json"))
            #expect(config.origin == .package(id: "images", version: "3"))
            #expect(tag(of: config) == "images:config.json")
            // A file only the second package has.
            let theme = try #require(chain.resolve("theme"))
            #expect(theme.origin == .package(id: "theme", version: "1"))
            #expect(tag(of: theme) == "theme:theme.css")
            // A file the packages lack falls through to the bundle.
            let onlyBundle = try #require(chain.resolve("sub/only-bundle"))
            #expect(onlyBundle.origin == .bundle)
            #expect(tag(of: onlyBundle) == "bundle:sub/only-bundle.png")
            // A name in neither.
            #expect(chain.resolve("sub/absent") == nil)
            #expect(chain.resolve("../bundle/config.json") == nil)
        }
    }

    @Test("The scale preference applies to every tree of the chain")
    func scalesAcrossChain() async throws {
        try await withTemporaryDirectory { parent in
            let bundle = parent.appendingPathComponent("bundle")
            let package = parent.appendingPathComponent("package")
            try makeTree(bundle, files: ["b.png", "b@2x.png", "b@3x.png"], tag: "bundle")
            try makeTree(package, files: ["p.png", "p@2x.png", "p@3x.png"], tag: "package")
            let chain = try AssetResolverChain.make(
                packages: [InstalledPackage(id: "p", version: "1", directory: package)],
                bundle: bundle,
                scales: ScalePreference([2, 3, 1])
            )
            #expect(tag(of: chain.resolve("p")) == "package:p@2x.png")
            #expect(tag(of: chain.resolve("b.png")) == "bundle:b@2x.png")
        }
    }

    @Test("No bundle, no packages, and a missing package directory, which is left out while the others still resolve")
    func edges() async throws {
        try await withTemporaryDirectory { parent in
            let package = parent.appendingPathComponent("package")
            try makeTree(package, files: ["a.png"], tag: "package")
            let packagesOnly = try AssetResolverChain.make(
                packages: [InstalledPackage(id: "p", version: "2", directory: package)],
                bundle: nil
            )
            #expect(packagesOnly.resolve("a")?.origin == .package(id: "p", version: "2"))
            #expect(packagesOnly.resolve("b") == nil)

            #expect(AssetResolverChain([]).resolve("a") == nil)

            let bundle = parent.appendingPathComponent("bundle")
            try makeTree(bundle, files: ["a.png", "c.png"], tag: "bundle")
            let degraded = try AssetResolverChain.make(
                packages: [
                    InstalledPackage(
                        id: "gone",
                        version: "1",
                        directory: parent.appendingPathComponent("missing")
                    ),
                    InstalledPackage(
                        id: "listed-gone",
                        version: "1",
                        directory: parent.appendingPathComponent("missing2"),
                        files: ["c.png"]
                    ),
                    InstalledPackage(id: "p", version: "2", directory: package),
                ],
                bundle: bundle
            )
            #expect(degraded.resolve("a")?.origin == .package(id: "p", version: "2"))
            #expect(degraded.resolve("c")?.origin == .bundle)
        }
    }
}
