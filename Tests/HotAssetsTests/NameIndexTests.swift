import Foundation
import HotAssets
import HotCore
import HotTesting
import Logging
import Testing

/// Names that exercise every rule: scales, extensions, exact names, normalisation, `..`.
private let names = [
    "config.json", "config", "LICENSE", "sub/sample", "sub/sample.png", "sub/sample@2x.png", "sub/sample@3x",
    "sub/sample@2x", "sub/only1x", "sub/only1x.png", "sub/two", "sub/two.png", "photo", "photo.jpg", "odd", "Pic",
    "Pic.jpg", "Pic.PNG", "mixed", "mixed.png", "mixed.jpg", "deep/a/b/c/file", "deep/a/b/c/file.txt", "/sub/sample",
    "./sub/sample", "sub//sample", "sub/./sample", "sub/sample/", "../config.json", "..", "", "/", "missing",
    "img/icon", "img/icon.png", "img/icon@3x.png", "img/icon@2x", "only-older", "only-older.json", "img/sub/deep",
]

extension EngineStore {
    /// Installs `paths` as version `version` of `id`, each file's content naming all three.
    func install(_ id: String, _ version: String, _ paths: [String]) async throws {
        try await install(
            id,
            version: version,
            files: Dictionary(uniqueKeysWithValues: paths.map { ($0, "\(id)-\(version):\($0)") })
        )
    }

    /// The chain built from the file lists, without the index, to compare with.
    func slowChain(bundle: URL?) async throws -> AssetResolverChain {
        var packages: [InstalledPackage] = []
        for package in try await updater.installedPackages() where package.state == .installed {
            packages.append(
                InstalledPackage(
                    id: package.id,
                    version: package.version,
                    directory: package.directory,
                    files: try await updater.fileList(of: package).files.map(\.path)
                )
            )
        }
        return try AssetResolverChain.make(packages: packages, bundle: bundle)
    }
}

@Suite("The store's name index")
struct NameIndexTests {
    @Test("The chain from the index answers every name as the chain from the file lists, after each change")
    func indexMatchesFileLists() async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            try await store.install(
                "older",
                "1",
                DirectoryAssetResolverTests.files + ["only-older.json", "img/icon@3x.png"]
            )
            try await store.install("newer", "1", ["img/icon@2x.png", "img/sub/deep.png", "sub/two.png", "Pic.gif"])
            let bundle = parent.appendingPathComponent("bundle")
            try makeTree(bundle, files: ["img/icon.png", "only-bundle.txt"], tag: "bundle")

            func compare(_ step: String) async throws {
                #expect(FileManager.default.fileExists(atPath: try await store.indexFile().path), "\(step)")
                let fast = try await AssetResolverChain.make(updater: store.relaunch(), bundle: bundle)
                let slow = try await store.slowChain(bundle: bundle)
                for name in names + ["only-bundle", "img/icon"] {
                    #expect(fast.resolve(name) == slow.resolve(name), "\(name) after \(step)")
                }
            }
            try await compare("two installs")
            #expect(
                tag(
                    of: try await AssetResolverChain.make(updater: store.relaunch(), bundle: bundle).resolve("img/icon")
                ) == "newer-1:img/icon@2x.png"
            )

            try await store.install("older", "2", ["img/icon@3x.png", "config.txt"])  // an update: newest now
            try await compare("an update")
            try await store.updater.rollback(packageID: "older")
            try await compare("a rollback")
            _ = try await store.updater.remove(packageID: "newer")
            try await compare("a removal")
            let generation = try await store.updater.currentSnapshot().generation
            let kept = Set(FileSystem.contents(of: store.root.appendingPathComponent("index")))
            #expect(kept.isSubset(of: ["names-\(generation)", "names-\(generation - 1)"]))
        }
    }

    @Test(
        "An answer from the index reads the kept URL and origin, equals and hashes as a made one, outlives its chain, and changes alone; an optional asset is two words"
    )
    func keptAnswers() async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            try await store.install("older", "1", ["sub/sample@2x.png", "config.json"])
            var chain: AssetResolverChain? = try await AssetResolverChain.make(updater: store.relaunch(), bundle: nil)
            // The first answer for a file is made and kept, the second reads the kept one.
            let first = try #require(chain?.resolve("sub/sample"))
            let second = try #require(chain?.resolve("sub/sample.png"))
            let other = try #require(chain?.resolve("config.json"))
            chain = nil
            // The chain is gone: the assets keep what they read alive.
            #expect(tag(of: second) == "older-1:sub/sample@2x.png")
            #expect(second.url.path.hasSuffix("/sub/sample@2x.png"))
            #expect(second.origin == .package(id: "older", version: "1"))
            let made = ResolvedAsset(url: second.url, origin: second.origin)
            #expect(first == second && second == made && made == second && first != other)
            #expect(Set([first, second, made]).count == 1 && Set([first, other]).count == 2)
            #expect(second.description == made.description)
            #expect(second.description.contains("sub/sample@2x.png") && second.description.contains("older"))
            // Changing a copy changes the copy alone.
            var changed = second
            changed.origin = .bundle
            #expect(changed.origin == .bundle && changed.url == second.url)
            #expect(second.origin == .package(id: "older", version: "1") && changed != second)
            changed.url = other.url
            #expect(changed.url == other.url && changed.origin == .bundle && second.url != other.url)
            var remade = made
            remade.url = other.url
            #expect(made.url == second.url && remade.url == other.url && remade.origin == made.origin)
        }
    }

    @Test("A damaged or missing index is logged, names resolve through the file lists, and it is rebuilt")
    func damagedIndex() async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            try await store.install("older", "1", DirectoryAssetResolverTests.files)
            let file = try await store.indexFile()
            let good = try Data(contentsOf: file)
            var damaged = good
            damaged[damaged.count - 3] ^= 0x5a
            for (label, content) in [
                ("a flipped byte", damaged as Data?), ("a truncated file", good.prefix(100)), ("no file", nil),
            ] {
                if let content { try content.write(to: file) } else { try FileManager.default.removeItem(at: file) }
                let logs = LogLines()
                let updater = store.relaunch(log: logs)
                let chain = try await AssetResolverChain.make(updater: updater, bundle: nil, rebuildingIndex: false)
                let slow = try await store.slowChain(bundle: nil)
                for name in names { #expect(chain.resolve(name) == slow.resolve(name), "\(name) with \(label)") }
                #expect(logs.lines.contains { $0.contains("resolving through the file lists") }, "\(label)")
                #expect(try await updater.rebuildNameIndex(), "\(label)")
                #expect(try Data(contentsOf: file) == good, "\(label)")
                #expect(try await updater.rebuildNameIndex() == false, "\(label)")
            }
        }
    }

    @Test(
        "A block damaged inside the index is found by the lookup that reads it: names then resolve from the package trees, as before, and the index is rebuilt"
    )
    func damagedBlock() async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            try await store.install("older", "1", DirectoryAssetResolverTests.files)
            // Enough files for an index of many blocks (16 KiB each): a scaled image, a
            // plain one and a JSON file in each of 20 folders.
            var many: [String] = []
            for file in 0..<1_500 {
                switch file % 3 {
                case 0: many.append("img/\(file % 20)/icon\(file)@2x.png")
                case 1: many.append("img/\(file % 20)/icon\(file).png")
                default: many.append("data/\(file % 20)/record\(file).json")
                }
            }
            try await store.install("newer", "1", many)
            let asked =
                names
                + many.flatMap { path -> [String] in
                    let stem = path.split(separator: "@").first.map(String.init) ?? path
                    return [path, stem.replacingOccurrences(of: ".png", with: ""), stem + ".png"]
                }
            let file = try await store.indexFile()
            let good = try Data(contentsOf: file)
            let generation = try await store.updater.currentSnapshot().generation
            let layout = StoreLayout(root: store.root)
            // A third and two thirds into the name slots, and three quarters into the string
            // pool, among the keys: blocks opening does not read, and lookups do.
            let sections = nameIndexSections(good)
            let block = 16 * 1024
            let places = [
                ("a third into the name slots", sections.nameSlots.lowerBound + sections.nameSlots.count / 3),
                ("two thirds into the name slots", sections.nameSlots.lowerBound + sections.nameSlots.count * 2 / 3),
                ("three quarters into the keys", sections.pool.lowerBound + sections.pool.count * 3 / 4),
            ]
            // Three blocks apart from each other and from the pool's first block (the package
            // strings, which opening reads).
            let blocks = Set(([sections.pool.lowerBound] + places.map(\.1)).map { ($0 - 64) / block })
            #expect(blocks.count == 4, "\(sections)")
            for (place, offset) in places {
                let label = "a byte flipped \(place)"
                var damaged = good
                damaged[offset] ^= 0x5a
                try damaged.write(to: file)

                // Opening reads the header, the block table and the packages, not the rest.
                let opened = try NameIndex(layout: layout, generation: generation)
                #expect(opened.isDamaged == false, "\(label)")
                #expect(throws: HotUpdateError.self, "\(label)") { try opened.verifyAll() }
                #expect(opened.isDamaged, "\(label)")

                let logs = LogLines()
                let updater = store.relaunch(log: logs)
                let chain = try await AssetResolverChain.make(updater: updater, bundle: nil, rebuildingIndex: false)
                #expect(!logs.lines.contains { $0.contains("resolving through the file lists") }, "\(label)")
                let slow = try await store.slowChain(bundle: nil)
                for name in asked { #expect(chain.resolve(name) == slow.resolve(name), "\(name) with \(label)") }
                #expect(
                    logs.lines.filter { $0.contains("resolving through the package trees") && $0.contains("block") }
                        .count == 1,
                    "\(label): \(logs.lines)"
                )
                // The store now reads the index as damaged, and rebuilds it.
                let again = try await AssetResolverChain.make(updater: updater, bundle: nil, rebuildingIndex: false)
                #expect(logs.lines.contains { $0.contains("resolving through the file lists") }, "\(label)")
                for name in asked.prefix(50) { #expect(again.resolve(name) == slow.resolve(name), "\(name)") }
                #expect(try await updater.rebuildNameIndex(), "\(label)")
                #expect(try Data(contentsOf: file) == good, "\(label)")
            }
        }
    }

    @Test(
        "An index of the older format is refused with a logged reason, names resolve through the file lists, and it is rebuilt"
    )
    func olderFormat() async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            try await store.install("older", "1", DirectoryAssetResolverTests.files)
            let file = try await store.indexFile()
            let good = try Data(contentsOf: file)
            // The same bytes claiming format 3, with a header checksum that matches.
            var older = good
            older.withUnsafeMutableBytes { raw in
                raw.storeBytes(of: UInt32(3).littleEndian, toByteOffset: 8, as: UInt32.self)
                let sum = NameIndexFormat.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<56]))
                raw.storeBytes(of: sum.littleEndian, toByteOffset: 56, as: UInt64.self)
            }
            try older.write(to: file)
            let logs = LogLines()
            let updater = store.relaunch(log: logs)
            let chain = try await AssetResolverChain.make(updater: updater, bundle: nil, rebuildingIndex: false)
            let slow = try await store.slowChain(bundle: nil)
            for name in names { #expect(chain.resolve(name) == slow.resolve(name), "\(name)") }
            #expect(
                logs.lines.contains { $0.contains("resolving through the file lists") && $0.contains("format (3)") }
            )
            #expect(try await updater.rebuildNameIndex())
            #expect(try Data(contentsOf: file) == good)
        }
    }

    @Test("Names of every length from 1 to 40 bytes are found, and names one byte off or too long for a slot are not")
    func everyLength() async throws {
        try await withTemporaryDirectory { parent in
            let store = EngineStore(parent: parent)
            let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789-_")
            let stems = (1...40).map { length in String((0..<length).map { alphabet[$0 % alphabet.count] }) }
            try await store.install("lengths", "1", stems.map { "k/" + $0 })
            let chain = try await AssetResolverChain.make(updater: store.relaunch(), bundle: nil)
            let slow = try await store.slowChain(bundle: nil)
            var asked = 0
            for stem in stems {
                let name = "k/" + stem
                #expect(chain.resolve(name) != nil, "\(name)")
                for near in [name + "z", String(name.dropLast()) + "#", "j" + name.dropFirst()] {
                    #expect(chain.resolve(near) == slow.resolve(near), "\(near)")
                    asked += 1
                }
            }
            #expect(asked == 3 * 40)
            // Longer than a name slot can hold: none, without a read past the slots.
            let long = "k/" + String(repeating: "a", count: NameIndexFormat.maxKeyLength)
            #expect(chain.resolve(long) == nil && slow.resolve(long) == nil)
        }
    }
}
