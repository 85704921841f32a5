import Foundation
import HotAssets
import HotCore
import HotTestServers
import HotTesting
import Testing

/// Resource packs zipped by `zip` and unpacked by `unzip`, as the seed's packs are made:
/// the files at the root with an `index.json`.
@Suite("Resource packs")
struct ResourcePackTests {
    /// Zips `files` and unpacks the archive into `<directory>/<id>`; returns the package.
    func unpackedPack(_ files: [String: Data], id: String, in directory: URL) async throws -> InstalledPackage {
        let source = directory.appendingPathComponent("source-\(id)")
        for (path, data) in files {
            let url = source.appendingPathComponent(path)
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(),
                withIntermediateDirectories: true
            )
            try data.write(to: url)
        }
        let archive = directory.appendingPathComponent("\(id).zip")
        try await Subprocess.check("zip", ["-q", "-r", "-X", "-y", archive.path, "."], in: source)
        let package = directory.appendingPathComponent("packages/\(id)/1", isDirectory: true)
        try FileManager.default.createDirectory(at: package, withIntermediateDirectories: true)
        try await Subprocess.check("unzip", ["-q", archive.path, "-d", package.path])
        return InstalledPackage(id: id, version: "1", directory: package)
    }

    static let overlayIndex = #"""
        {"id": "3000", "type": "overlay",
         "overlay": ["blend.jpg", "blend_light1.jpg", "blend_light2.jpg"],
         "font": ["fonts/Title.ttf"], "sticker": ["star.png"], "note": "not a list"}
        """#

    static let overlayFiles: [String: Data] = [
        "index.json": Data(overlayIndex.utf8),
        "blend.jpg": Data("blend".utf8), "blend_light1.jpg": Data("light1".utf8),
        "blend_light2.jpg": Data("light2".utf8),
        "fonts/Title.ttf": Data("font".utf8), "star.png": Data("star".utf8),
    ]

    @Test("every handled type maps each name to the file in the installed package")
    func opensPack() async throws {
        try await withTemporaryDirectory { directory in
            let package = try await unpackedPack(Self.overlayFiles, id: "3000", in: directory)
            let pack = try ResourcePackResolver().open(package)
            #expect(pack.index.id == "3000")
            #expect(pack.index.type == "overlay")
            #expect(Set(pack.resources.keys) == [.overlay, .font])
            #expect(pack.resources[.overlay]?.keys.sorted() == ["blend.jpg", "blend_light1.jpg", "blend_light2.jpg"])
            for (name, url) in pack.resources[.overlay] ?? [:] {
                #expect(try Data(contentsOf: url) == Self.overlayFiles[name])
                #expect(url.path.hasPrefix(package.directory.resolvingSymlinksInPath().path + "/"))
            }
            let font = try #require(pack.url(for: "fonts/Title.ttf", type: .font))
            #expect(try Data(contentsOf: font) == Data("font".utf8))
            // "sticker" is listed but not handled by default.
            #expect(pack.url(for: "star.png", type: "sticker") == nil)
        }
    }

    @Test("the handled types are configurable")
    func configurableTypes() async throws {
        try await withTemporaryDirectory { directory in
            let package = try await unpackedPack(Self.overlayFiles, id: "3000", in: directory)
            let pack = try ResourcePackResolver(types: ["sticker"]).open(package)
            #expect(Set(pack.resources.keys) == ["sticker"])
            #expect(
                try pack.url(for: "star.png", type: "sticker").map { try Data(contentsOf: $0) } == Data("star".utf8)
            )
            #expect(pack.url(for: "blend.jpg", type: .overlay) == nil)
        }
    }

    /// A pack whose index lists `name` as an overlay.
    func packListing(
        _ name: String,
        in directory: URL,
        extra: [String: Data] = [:]
    ) async throws
        -> InstalledPackage
    {
        let index = try JSONSerialization.data(withJSONObject: ["id": "9", "type": "overlay", "overlay": [name]])
        return try await unpackedPack(
            ["index.json": index, "blend.jpg": Data("blend".utf8)].merging(extra) { $1 },
            id: "9",
            in: directory
        )
    }

    @Test(
        "unsafe names in index.json refuse the pack with unsafeEntry",
        arguments: [
            "../outside.jpg", "/etc/hostname", "a/../../outside.jpg", "./blend.jpg", "a//b.jpg", "", "a\\b.jpg",
        ]
    )
    func unsafeNames(name: String) async throws {
        try await withTemporaryDirectory { directory in
            try FileManager.default.createDirectory(
                at: directory.appendingPathComponent("packages"),
                withIntermediateDirectories: true
            )
            try Data("outside".utf8).write(to: directory.appendingPathComponent("packages/outside.jpg"))
            let package = try await packListing(name, in: directory)
            let error = #expect(throws: HotUpdateError.self) { try ResourcePackResolver().open(package) }
            #expect(error?.code == .unsafeEntry)
            #expect(error?.packageID == "9")
        }
    }

    @Test("a symbolic link leading out of the package is refused")
    func linkOut() async throws {
        try await withTemporaryDirectory { directory in
            let package = try await packListing("link.jpg", in: directory)
            try Data("outside".utf8).write(to: directory.appendingPathComponent("outside.jpg"))
            try FileManager.default.createSymbolicLink(
                at: package.directory.appendingPathComponent("link.jpg"),
                withDestinationURL: directory.appendingPathComponent("outside.jpg")
            )
            let error = #expect(throws: HotUpdateError.self) { try ResourcePackResolver().open(package) }
            #expect(error?.code == .unsafeEntry)
        }
    }

    @Test("a listed file that is missing, or a directory, refuses the pack with notFound naming it")
    func missingFile() async throws {
        try await withTemporaryDirectory { directory in
            let package = try await packListing("blend_light9.jpg", in: directory)
            let error = #expect(throws: HotUpdateError.self) { try ResourcePackResolver().open(package) }
            #expect(error?.code == .notFound)
            #expect(error?.subject == "blend_light9.jpg")

            try FileManager.default.createDirectory(
                at: package.directory.appendingPathComponent("blend_light9.jpg"),
                withIntermediateDirectories: true
            )
            #expect(throws: HotUpdateError.self) { try ResourcePackResolver().open(package) }
        }
    }

    @Test(
        "malformed index.json is refused with manifestInvalid",
        arguments: [
            "not json", "[1, 2]", #"{"type": "overlay"}"#, #"{"id": "1"}"#, #"{"id": true, "type": "overlay"}"#,
            #"{"id": "1", "type": "overlay", "overlay": ["a.jpg", 3]}"#,
        ]
    )
    func malformedIndex(json: String) {
        let error = #expect(throws: HotUpdateError.self) { try ResourcePackIndex.decode(Data(json.utf8)) }
        #expect(error?.code == .manifestInvalid)
    }

    @Test("a numeric id is read as text")
    func numericID() throws {
        let index = try ResourcePackIndex.decode(Data(#"{"id": 3000, "type": "font", "font": ["a.ttf"]}"#.utf8))
        #expect(index.id == "3000")
        #expect(index.names == [.font: ["a.ttf"]])
    }

    @Test("a library opens the resource packs among many packages, prefers the first, and reports broken packs")
    func library() async throws {
        try await withTemporaryDirectory { directory in
            let newer = try await unpackedPack(
                [
                    "index.json": Data(#"{"id": "b", "type": "image", "image": ["logo.png"]}"#.utf8),
                    "logo.png": Data("newer".utf8),
                ],
                id: "newer",
                in: directory
            )
            let older = try await unpackedPack(
                [
                    "index.json": Data(#"{"id": "a", "type": "image", "image": ["logo.png", "bg.png"]}"#.utf8),
                    "logo.png": Data("older".utf8), "bg.png": Data("bg".utf8),
                ],
                id: "older",
                in: directory
            )
            let plain = try await unpackedPack(["readme.txt": Data("no index".utf8)], id: "plain", in: directory)
            let broken = try await unpackedPack(
                ["index.json": Data(#"{"id": "c", "type": "image", "image": ["gone.png"]}"#.utf8)],
                id: "broken",
                in: directory
            )

            let library = ResourcePackResolver().open([newer, plain, broken, older])
            #expect(library.packs.map(\.packageID) == ["newer", "older"])
            #expect(library.failures.keys.sorted() == ["broken"])
            #expect(library.failures["broken"]?.code == .notFound)
            #expect(
                try library.url(for: "logo.png", type: .image).map { try Data(contentsOf: $0) } == Data("newer".utf8)
            )
            #expect(try library.url(for: "bg.png", type: .image).map { try Data(contentsOf: $0) } == Data("bg".utf8))
            #expect(library.resources(of: .image).keys.sorted() == ["bg.png", "logo.png"])
            #expect(
                try library.resources(of: .image)["logo.png"].map { try Data(contentsOf: $0) } == Data("newer".utf8)
            )
            #expect(library.pack(indexID: "a")?.packageID == "older")
            #expect(library.pack(packageID: "plain") == nil)
        }
    }
}
