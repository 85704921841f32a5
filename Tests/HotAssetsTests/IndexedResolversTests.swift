import Foundation
import HotAssets
import HotCore
import HotTesting
import Logging
import Testing

extension EngineStore {
    /// The packages as the engine lists them, for the resolvers made from a list.
    func locations() async throws -> [InstalledPackage] {
        try await updater.installedPackages()
    }

    /// Removes every file list the store keeps: what resolves afterwards came from elsewhere.
    func removeFileLists() throws {
        try FileManager.default.removeItem(at: root.appendingPathComponent("filelists"))
    }

    /// Flips a byte in every 16 KiB block of the current generation's name index that lies
    /// within its hash slots (names and paths, see `NameIndexFormat`), which opening does
    /// not read: the index opens, and the first lookup finds it damaged.
    func damageIndexSlots() async throws {
        let file = try await indexFile()
        var bytes = try Data(contentsOf: file)
        let sections = nameIndexSections(bytes)
        let slotsOffset = sections.nameSlots.lowerBound
        let poolOffset = sections.pool.lowerBound
        let block = 16 * 1024
        var flipped = 0
        for start in stride(from: 64, to: poolOffset, by: block)
        where start >= slotsOffset && start + block <= poolOffset {
            bytes[start + block / 2] ^= 0x5a
            flipped += 1
        }
        #expect(flipped >= 2, "the slots span \(flipped) whole blocks")
        try bytes.write(to: file)
    }

    /// Flips a byte of the current generation's name index, so that it fails its checksum.
    func damageIndex() async throws {
        let file = try await indexFile()
        var bytes = try Data(contentsOf: file)
        bytes[bytes.count - 3] ^= 0x5a
        try bytes.write(to: file)
    }
}

private let pages = [
    "index.html": "home", "detail.html": "detail", "sub/index.html": "sub", "sub/deep/page.html": "deep",
    "dist/app.js": "app",
]

private let overlayIndex = #"{"id": "3000", "type": "overlay", "overlay": ["blend.jpg", "light/1.jpg"]}"#

@Suite("Web modules and resource packs through the store's name index")
struct IndexedResolversTests {
    private let module = WebModule(id: "web", onlineBase: URL(string: "https://m.example.com/home/")!)

    private let urls = [
        "https://m.example.com/home/", "https://m.example.com/home/detail.html?x=1#y",
        "https://m.example.com/home/sub/", "https://m.example.com/home/sub/deep/page.html",
        "https://m.example.com/home/missing.html", "https://m.example.com/home/sub/deep/",
        "https://m.example.com/home/%2E%2E/secret", "https://m.example.com/other/index.html",
        "https://m.example.com/home/dist/app.js",
    ].compactMap(URL.init(string:))

    @Test("A web module resolver made from the updater answers from the index as one made from the list does")
    func webModulesFromIndex() async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            try await store.install("web", files: pages)
            try await store.install("other", files: ["index.html": "other"])
            let fromList = WebModuleResolver(modules: [module], installed: try await store.locations())

            let indexed = await WebModuleResolver.make(modules: [module], updater: store.relaunch())
            #expect(indexed.answersFromNameIndex)
            #expect(fromList.answersFromNameIndex == false)
            for url in urls { #expect(indexed.resolve(url) == fromList.resolve(url), "\(url)") }
            guard case .local(let page) = indexed.resolve(urls[1]) else {
                Issue.record("detail.html is not served locally")
                return
            }
            #expect(try String(contentsOf: page.fileURL.standardizedFileURL, encoding: .utf8) == "detail")
            #expect(page.version == "1")

            // No file list is read: without them, the index still answers.
            try store.removeFileLists()
            let withoutLists = await WebModuleResolver.make(modules: [module], updater: store.relaunch())
            #expect(withoutLists.answersFromNameIndex)
            for url in urls { #expect(withoutLists.resolve(url) == fromList.resolve(url), "\(url)") }

            // A file the store did not install is not a page of the module, though it is in the tree.
            let stray = page.readAccessRoot.appendingPathComponent("stray.html")
            try Data("stray".utf8).write(to: stray)
            let strayURL = try #require(URL(string: "https://m.example.com/home/stray.html"))
            #expect(withoutLists.resolve(strayURL) == .online(strayURL, reason: .fileMissing))
            #expect(fromList.resolve(strayURL).url.isFileURL)
        }
    }

    @Test("A web module resolver over a damaged index logs why and answers from the file system")
    func webModulesWithDamagedIndex() async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            try await store.install("web", files: pages)
            try await store.damageIndex()
            let logs = LogLines()
            let resolver = await WebModuleResolver.make(
                modules: [module],
                updater: store.relaunch(log: logs),
                rebuildingIndex: false
            )
            #expect(resolver.answersFromNameIndex == false)
            #expect(logs.lines.contains { $0.contains("resolving through the file lists") })
            let fromList = WebModuleResolver(modules: [module], installed: try await store.locations())
            for url in urls { #expect(resolver.resolve(url) == fromList.resolve(url), "\(url)") }
            #expect(resolver.resolve(urls[1]).url.isFileURL)
        }
    }

    @Test(
        "A web module resolver over an index found damaged after it opened answers from the package tree, as before, and logs why once"
    )
    func webModulesWithIndexDamagedLater() async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            var files = pages
            for number in 0..<1_500 { files["assets/\(number % 30)/file\(number).png"] = "\(number)" }
            try await store.install("web", files: files)
            let fromList = WebModuleResolver(modules: [module], installed: try await store.locations())
            try await store.damageIndexSlots()
            let logs = LogLines()
            let resolver = await WebModuleResolver.make(
                modules: [module],
                updater: store.relaunch(log: logs),
                rebuildingIndex: false
            )
            #expect(resolver.answersFromNameIndex)
            for url in urls { #expect(resolver.resolve(url) == fromList.resolve(url), "\(url)") }
            #expect(resolver.resolve(urls[1]).url.isFileURL)
            #expect(
                logs.lines.filter { $0.contains("resolving through the package trees") }.count == 1,
                "\(logs.lines)"
            )
        }
    }

    @Test("The resource-pack library opened from the updater checks each listed file in the index")
    func resourcePacksFromIndex() async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            try await store.install(
                "3000",
                files: ["index.json": overlayIndex, "blend.jpg": "blend", "light/1.jpg": "light", "extra.png": "extra"]
            )
            try await store.install("broken", files: ["index.json": overlayIndex, "blend.jpg": "blend"])
            try await store.install("plain", files: ["a.png": "a"])
            let fromList = ResourcePackResolver().open(try await store.locations())
            #expect(fromList.packs.map(\.packageID) == ["3000"])
            #expect(fromList.failures.keys.sorted() == ["broken"])

            try store.removeFileLists()
            let library = await ResourcePackResolver().open(updater: store.relaunch())
            #expect(library.packs.map(\.packageID) == ["3000"])
            #expect(library.failures.keys.sorted() == ["broken"])
            #expect(library.failures["broken"]?.code == .notFound)
            let pack = try #require(library.pack(packageID: "3000"))
            #expect(pack.resources == fromList.packs.first?.resources)
            let light = try #require(library.url(for: "light/1.jpg", type: .overlay))
            #expect(try String(contentsOf: light, encoding: .utf8) == "light")

            // A listed file put in the tree behind the store's back is not one of the
            // package's: the list of packages finds it on the file system, the index does not.
            let broken = try #require(try await store.locations().first { $0.id == "broken" })
            try FileManager.default.createDirectory(
                at: broken.directory.appendingPathComponent("light"),
                withIntermediateDirectories: true
            )
            try Data("late".utf8).write(to: broken.directory.appendingPathComponent("light/1.jpg"))
            #expect(ResourcePackResolver().open(try await store.locations()).failures.isEmpty)
            let again = await ResourcePackResolver().open(updater: store.relaunch())
            #expect(again.failures.keys.sorted() == ["broken"])
        }
    }

    @Test("The resource-pack library over a damaged index logs why and opens the packs from the file system")
    func resourcePacksWithDamagedIndex() async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            try await store.install(
                "3000",
                files: ["index.json": overlayIndex, "blend.jpg": "blend", "light/1.jpg": "light"]
            )
            try await store.damageIndex()
            let logs = LogLines()
            let library = await ResourcePackResolver().open(updater: store.relaunch(log: logs), rebuildingIndex: false)
            #expect(logs.lines.contains { $0.contains("resolving through the file lists") })
            let fromList = ResourcePackResolver().open(try await store.locations())
            #expect(library.packs.map(\.packageID) == ["3000"])
            #expect(library.packs.first?.resources == fromList.packs.first?.resources)
        }
    }
}
