import Foundation
import HotAssets
import HotCore
import HotTesting
import Testing

/// Names that exercise every rule: scales, extensions, exact names, normalisation, `..`.
private let askedNames = [
    "config.json", "config", "LICENSE", "sub/sample", "sub/sample.png", "sub/sample@2x.png", "sub/sample@3x",
    "sub/sample@2x", "sub/only1x", "sub/only1x.png", "sub/two", "sub/two.png", "photo", "photo.jpg", "odd", "Pic",
    "Pic.jpg", "Pic.PNG", "mixed", "mixed.png", "mixed.jpg", "deep/a/b/c/file", "deep/a/b/c/file.txt", "图片/猫",
    "图片/猫.png", ".hidden", "/sub/sample", "./sub/sample", "sub//sample", "sub/./sample", "sub/sample/",
    "//./sub/sample", "../config.json", "sub/../config.json", "..", "", "/", "deep/a", "missing", "theme", "theme.css",
    "only-second", "only-bundle.png", "shared@2x.png", "shared",
]

@Suite("Resolvers built from file lists, and merged chains")
struct FileListIndexTests {
    @Test("A resolver built from a list answers every name exactly as one that walked the same tree")
    func listMatchesWalk() async throws {
        try await withTemporaryDirectory { root in
            try makeTree(root, files: DirectoryAssetResolverTests.files, tag: "b")
            for scales in [ScalePreference.standard, ScalePreference([2, 3, 1]), ScalePreference([2])] {
                let walked = try DirectoryAssetResolver(directory: root, origin: .bundle, scales: scales)
                let listed = DirectoryAssetResolver(
                    directory: root,
                    origin: .bundle,
                    files: DirectoryAssetResolverTests.files,
                    scales: scales
                )
                #expect(listed.fileCount == walked.fileCount)
                for name in askedNames {
                    #expect(listed.resolve(name)?.url.path == walked.resolve(name)?.url.path, "\(name) at \(scales)")
                }
            }
            // The list is not checked against the disk: nothing below is read.
            let listed = DirectoryAssetResolver(
                directory: root.appendingPathComponent("not-there"),
                origin: .package(id: "p", version: "1"),
                files: ["img/a@2x.png"]
            )
            #expect(listed.resolve("img/a")?.url.lastPathComponent == "a@2x.png")
        }
    }

    @Test("Listed paths with a .. component are skipped; leading ./ and / are dropped")
    func hostileListedPaths() {
        let root = URL(fileURLWithPath: "/store/packages/p/1", isDirectory: true)
        let resolver = DirectoryAssetResolver(
            directory: root,
            origin: .bundle,
            files: ["../outside.png", "sub/../../escape.png", "./a.png", "/b.png", "ok/../c.png", "..", ""]
        )
        #expect(resolver.fileCount == 2)
        #expect(resolver.resolve("a")?.url.path == "/store/packages/p/1/a.png")
        #expect(resolver.resolve("b.png")?.url.path == "/store/packages/p/1/b.png")
        for name in ["../outside", "outside", "escape", "../escape.png", "c", "ok/../c.png", ".."] {
            #expect(resolver.resolve(name) == nil, "\(name)")
        }
    }

    @Test("A merged chain gives the first resolver's answer for every name, around other resolvers")
    func mergedChainMatchesAskingInTurn() async throws {
        try await withTemporaryDirectory { parent in
            let trees: [(String, [String])] = [
                ("first", ["sub/sample@2x.png", "config.json", "shared@2x.png"]),
                ("second", ["sub/sample@3x.png", "theme.css", "only-second.txt", "shared@3x.png", "Pic.jpg"]),
                ("bundle", DirectoryAssetResolverTests.files + ["sub/only-bundle.png", "shared.png"]),
            ]
            var resolvers: [DirectoryAssetResolver] = []
            for (name, files) in trees {
                let directory = parent.appendingPathComponent(name)
                try makeTree(directory, files: files, tag: name)
                resolvers.append(
                    DirectoryAssetResolver(
                        directory: directory,
                        origin: name == "bundle" ? .bundle : .package(id: name, version: "1"),
                        files: files
                    )
                )
            }
            // A resolver of another kind between the packages keeps its place.
            let between = FakeAssetResolver(
                ["theme": ResolvedAsset(url: parent.appendingPathComponent("fake/theme"), origin: .bundle)])
            let inTurn: [any AssetResolver] = [resolvers[0], between, resolvers[1], resolvers[2]]
            let chain = AssetResolverChain(inTurn)
            let nested = AssetResolverChain([
                AssetResolverChain([resolvers[0]]), between,
                AssetResolverChain(Array(resolvers[1...])),
            ])
            for name in askedNames {
                let expected = inTurn.lazy.compactMap { $0.resolve(name) }.first
                #expect(chain.resolve(name) == expected, "\(name)")
                #expect(nested.resolve(name) == expected, "\(name)")
            }
            // Spot checks that the comparison above is not vacuous.
            #expect(tag(of: chain.resolve("sub/sample")) == "first:sub/sample@2x.png")
            #expect(chain.resolve("theme")?.url.lastPathComponent == "theme")
            #expect(tag(of: chain.resolve("theme.css")) == "second:theme.css")
            #expect(tag(of: chain.resolve("shared")) == "first:shared@2x.png")
            #expect(tag(of: chain.resolve("/sub/only-bundle")) == "bundle:sub/only-bundle.png")
            #expect(chain.resolve("../bundle/config.json") == nil)
        }
    }

    @Test("AssetResolverChain.make(updater:) indexes installed packages from the store's file lists")
    func chainFromUpdater() async throws {
        try await withTemporaryDirectory { parent in
            let root = parent.appendingPathComponent("store")
            let transport = FakeTransport()
            let verifier = FakeVerifier()
            var configuration = UpdaterConfiguration(
                root: root,
                transport: transport,
                unarchiver: FakeUnarchiver(),
                verifier: verifier,
                store: FakeMetadataStore()
            )
            configuration.commitHooks = [NameIndexWriter()]
            let updater = Updater(configuration: configuration)
            func publish(_ id: String, _ files: [String: String]) async throws -> PackageDescriptor {
                let bytes = try FakeArchive.make(files)
                let url = try #require(URL(string: "https://cdn.test/\(id).zip"))
                await transport.serve(bytes, at: url)
                return try PackageDescriptor(
                    id: id,
                    version: "1",
                    url: url,
                    size: Int64(bytes.count),
                    sha256: verifier.digest(of: bytes, using: .sha256)
                )
            }
            let older = try await publish("older", ["img/icon@3x.png": "older", "only-older.json": "older"])
            _ = try await updater.install(older)
            let newer = try await publish("newer", ["img/icon@2x.png": "newer", "img/sub/deep.png": "newer"])
            _ = try await updater.install(newer)
            let bundle = parent.appendingPathComponent("bundle")
            try makeTree(bundle, files: ["img/icon.png", "only-bundle.txt"], tag: "bundle")

            let chain = try await AssetResolverChain.make(updater: updater, bundle: bundle)
            // The newest package wins even with a lower scale; the others fill in.
            let icon = try #require(chain.resolve("img/icon"))
            #expect(icon.origin == .package(id: "newer", version: "1"))
            #expect(tag(of: icon) == "newer")
            #expect(tag(of: chain.resolve("img/sub/deep")) == "newer")
            #expect(chain.resolve("only-older")?.origin == .package(id: "older", version: "1"))
            #expect(tag(of: chain.resolve("only-older.json")) == "older")
            #expect(chain.resolve("only-bundle")?.origin == .bundle)
            #expect(chain.resolve("img/missing") == nil)

            // The same answers as walking the installed trees.
            let packages = try await updater.installedPackages()
            let walked = try AssetResolverChain.make(
                packages: packages,
                bundle: bundle
            )
            for name in [
                "img/icon", "img/icon.png", "img/icon@3x.png", "img/sub/deep", "only-older", "only-bundle.txt",
            ] {
                #expect(chain.resolve(name) == walked.resolve(name), "\(name)")
            }

            // A package that is no longer the active version, and a missing list, say so.
            let stale = InstalledPackage(
                id: "newer",
                version: "0",
                directory: root,
                state: .installed,
                installedAt: Date()
            )
            let error = await #expect(throws: HotUpdateError.self) { try await updater.fileList(of: stale) }
            #expect(error?.code == .notFound)
            #expect(error?.packageID == "newer")
        }
    }
}
