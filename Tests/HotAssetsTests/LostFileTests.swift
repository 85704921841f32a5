import Foundation
import HotAssets
import HotCore
import HotTesting
import Testing

/// Files deleted from an installed tree after it was installed, under every resolver made from
/// an updater: no answer names a file that is gone, and the package is marked for the next
/// sync to heal (`losses/<id>` under the root).
@Suite("Files gone from an installed tree")
struct LostFileTests {
    private let module = WebModule(id: "web", onlineBase: URL(string: "https://m.example.com/home/")!)

    private func marked(_ store: EngineStore, _ id: String) -> Bool {
        FileManager.default.fileExists(atPath: store.root.appendingPathComponent("losses/\(id)").path)
    }

    private func tree(_ store: EngineStore, _ id: String) async throws -> URL {
        try #require(try await store.locations().first { $0.id == id }).directory
    }

    @Test("a web page whose file is gone loads online, and its module is marked")
    func webPage() async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            try await store.install("web", files: ["index.html": "home", "detail.html": "detail"])
            try FileManager.default.removeItem(at: try await tree(store, "web").appendingPathComponent("detail.html"))
            let resolver = await WebModuleResolver.make(modules: [module], updater: store.relaunch())
            #expect(resolver.answersFromNameIndex)
            let detail = try #require(URL(string: "https://m.example.com/home/detail.html"))
            #expect(resolver.resolve(detail) == .online(detail, reason: .fileMissing))
            #expect(marked(store, "web"))
            let home = try #require(URL(string: "https://m.example.com/home/"))
            guard case .local(let page) = resolver.resolve(home) else {
                Issue.record("index.html, still there, is not served locally")
                return
            }
            #expect(try String(contentsOf: page.fileURL, encoding: .utf8) == "home")
        }
    }

    @Test("a resource pack missing a listed file is refused whole, and marked")
    func resourcePack() async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            try await store.install(
                "overlays",
                files: [
                    "index.json": #"{"id": "3000", "type": "overlay", "overlay": ["blend.jpg", "light.jpg"]}"#,
                    "blend.jpg": "blend", "light.jpg": "light",
                ]
            )
            let whole = await ResourcePackResolver().open(updater: store.relaunch())
            #expect(whole.pack(packageID: "overlays") != nil)
            try FileManager.default.removeItem(
                at: try await tree(store, "overlays").appendingPathComponent("light.jpg")
            )
            let library = await ResourcePackResolver().open(updater: store.relaunch())
            #expect(library.pack(packageID: "overlays") == nil)
            #expect(
                library.failures["overlays"]?.code == .fileSystem || library.failures["overlays"]?.code == .notFound
            )
            #expect(marked(store, "overlays"))
        }
    }

    @Test("the chain built from the file lists leaves out a file that is gone, and marks its package")
    func fileListChain() async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            try await store.install("images", files: ["logo.png": "new logo", "icon.png": "new icon"])
            let bundle = parent.appendingPathComponent("bundle")
            try FileManager.default.createDirectory(at: bundle, withIntermediateDirectories: true)
            try Data("bundled logo".utf8).write(to: bundle.appendingPathComponent("logo.png"))
            // No name index: the chain is built from the file lists.
            try FileManager.default.removeItem(at: store.root.appendingPathComponent("index"))
            try FileManager.default.removeItem(at: try await tree(store, "images").appendingPathComponent("logo.png"))
            let chain = try await AssetResolverChain.make(
                updater: store.relaunch(),
                bundle: bundle,
                rebuildingIndex: false
            )
            let logo = try #require(chain.resolve("logo.png"))
            #expect(logo.origin == .bundle)
            #expect(try String(contentsOf: logo.url, encoding: .utf8) == "bundled logo")
            #expect(chain.resolve("icon.png")?.origin == .package(id: "images", version: "1"))
            #expect(marked(store, "images"))
        }
    }

    @Test("the chain through the name index answers the next candidate, and marks the package")
    func indexedChain() async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            try await store.install("images", files: ["logo@2x.png": "2x", "logo.png": "1x"])
            try FileManager.default.removeItem(
                at: try await tree(store, "images").appendingPathComponent("logo@2x.png")
            )
            let chain = try await AssetResolverChain.make(updater: store.relaunch(), bundle: nil)
            let logo = try #require(chain.resolve("logo"))
            #expect(try String(contentsOf: logo.url, encoding: .utf8) == "1x")
            #expect(marked(store, "images"))
        }
    }
}
