import Foundation
import HotAssets
import HotCore
import Testing

@Suite("DirectoryAssetResolver over real trees")
struct DirectoryAssetResolverTests {
    static let files = [
        "config.json",
        "LICENSE",
        "sub/sample.png", "sub/sample@2x.png", "sub/sample@3x.png",
        "sub/only1x.png",
        "sub/two@2x.png",
        "photo.aaa", "photo.jpg", "photo.png", "photo.webp",
        "odd.bbb", "odd.aaa",
        "Pic.jpg", "Pic.PNG",
        "mixed@3x.jpg", "mixed@2x.png",
        "deep/a/b/c/file.txt",
        "图片/猫@2x.png",
        ".hidden",
    ]

    func resolver(
        _ root: URL,
        scales: ScalePreference = .standard,
        extensionOrder: [String]? = nil
    ) throws
        -> DirectoryAssetResolver
    {
        try DirectoryAssetResolver(
            directory: root,
            origin: .bundle,
            scales: scales,
            extensionOrder: extensionOrder ?? DirectoryAssetResolver.defaultExtensionOrder
        )
    }

    @Test("Names without and with extension prefer @3x, then @2x, then 1x")
    func defaultScaleOrder() async throws {
        try await withTemporaryDirectory { root in
            try makeTree(root, files: Self.files, tag: "b")
            let resolver = try resolver(root)
            #expect(tag(of: resolver.resolve("sub/sample")) == "b:sub/sample@3x.png")
            #expect(tag(of: resolver.resolve("sub/sample.png")) == "b:sub/sample@3x.png")
            #expect(tag(of: resolver.resolve("sub/only1x")) == "b:sub/only1x.png")
            #expect(tag(of: resolver.resolve("sub/only1x.png")) == "b:sub/only1x.png")
            #expect(tag(of: resolver.resolve("sub/two")) == "b:sub/two@2x.png")
            #expect(tag(of: resolver.resolve("sub/two.png")) == "b:sub/two@2x.png")
            // Scale comes before extension preference.
            #expect(tag(of: resolver.resolve("mixed")) == "b:mixed@3x.jpg")
            #expect(resolver.resolve("sub/sample")?.origin == .bundle)
        }
    }

    @Test("A custom order [2, 3, 1] and orders that leave scales out")
    func customScaleOrder() async throws {
        try await withTemporaryDirectory { root in
            try makeTree(root, files: Self.files, tag: "b")
            let twoFirst = try resolver(root, scales: ScalePreference([2, 3, 1]))
            #expect(tag(of: twoFirst.resolve("sub/sample")) == "b:sub/sample@2x.png")
            #expect(tag(of: twoFirst.resolve("sub/sample.png")) == "b:sub/sample@2x.png")
            #expect(tag(of: twoFirst.resolve("mixed")) == "b:mixed@2x.png")

            let oneFirst = try resolver(root, scales: ScalePreference([1, 2, 3]))
            #expect(tag(of: oneFirst.resolve("sub/sample")) == "b:sub/sample.png")
            #expect(tag(of: oneFirst.resolve("sub/two")) == "b:sub/two@2x.png")

            // Scale 2 not wanted: a name finds no @2x file, but the unsuffixed file is still
            // found for a name given with its extension, after the listed scales.
            let noTwo = try resolver(root, scales: ScalePreference([3]))
            #expect(tag(of: noTwo.resolve("sub/sample")) == "b:sub/sample@3x.png")
            #expect(tag(of: noTwo.resolve("sub/only1x.png")) == "b:sub/only1x.png")
            #expect(noTwo.resolve("sub/two") == nil)
            #expect(noTwo.resolve("sub/two.png") == nil)
            // An exact name is found whatever the preference.
            #expect(tag(of: noTwo.resolve("sub/two@2x.png")) == "b:sub/two@2x.png")
        }
    }

    @Test("ScalePreference keeps its order and maps scales to suffixes")
    func scalePreference() {
        #expect(ScalePreference().scales == [3, 2, 1])
        #expect(ScalePreference().suffixes == ["@3x", "@2x", ""])
        #expect(ScalePreference([2, 3, 1]).suffixes == ["@2x", "@3x", ""])
        #expect(ScalePreference([2, 0, -1, 2, 1]).scales == [2, 1])
        #expect(ScalePreference([]).scales == [1])
        #expect(ScalePreference.suffix(for: 1) == "")
        #expect(ScalePreference.suffix(for: 4) == "@4x")
        #expect(ScalePreference([2, 3, 1]).rank(of: 3) == 1)
        #expect(ScalePreference([2, 3]).rank(of: 1) == nil)
    }

    @Test("Exact relative paths match exactly")
    func exactNames() async throws {
        try await withTemporaryDirectory { root in
            try makeTree(root, files: Self.files, tag: "b")
            let resolver = try resolver(root)
            #expect(tag(of: resolver.resolve("sub/sample@2x.png")) == "b:sub/sample@2x.png")
            #expect(tag(of: resolver.resolve("sub/sample@3x.png")) == "b:sub/sample@3x.png")
            #expect(tag(of: resolver.resolve("config.json")) == "b:config.json")
            #expect(tag(of: resolver.resolve("config")) == "b:config.json")
            #expect(tag(of: resolver.resolve("LICENSE")) == "b:LICENSE")
            #expect(tag(of: resolver.resolve(".hidden")) == "b:.hidden")
            // A scale suffix without extension takes that scale with any extension.
            #expect(tag(of: resolver.resolve("sub/sample@2x")) == "b:sub/sample@2x.png")
            #expect(resolver.resolve("sub/sample@4x.png") == nil)
            #expect(resolver.resolve("sub/sample.jpg") == nil)
            #expect(resolver.resolve("Config.json") == nil)
        }
    }

    @Test("Without an extension: png, jpg, jpeg, webp, gif, pdf, then alphabetical; configurable")
    func extensionOrder() async throws {
        try await withTemporaryDirectory { root in
            try makeTree(root, files: Self.files, tag: "b")
            let resolver = try resolver(root)
            #expect(tag(of: resolver.resolve("photo")) == "b:photo.png")
            #expect(tag(of: resolver.resolve("odd")) == "b:odd.aaa")
            #expect(tag(of: resolver.resolve("Pic")) == "b:Pic.PNG")  // extensions compare case-insensitively
            #expect(tag(of: resolver.resolve("photo.jpg")) == "b:photo.jpg")
            #expect(tag(of: resolver.resolve("photo.aaa")) == "b:photo.aaa")

            let webpFirst = try self.resolver(root, extensionOrder: ["WEBP", "jpg"])
            #expect(tag(of: webpFirst.resolve("photo")) == "b:photo.webp")
            #expect(tag(of: webpFirst.resolve("Pic")) == "b:Pic.jpg")
            let nothingPreferred = try self.resolver(root, extensionOrder: [])
            #expect(tag(of: nothingPreferred.resolve("photo")) == "b:photo.aaa")
        }
    }

    @Test("Nested and unicode paths, and normalised names")
    func nestedAndNormalised() async throws {
        try await withTemporaryDirectory { root in
            try makeTree(root, files: Self.files, tag: "b")
            let resolver = try resolver(root)
            #expect(tag(of: resolver.resolve("deep/a/b/c/file.txt")) == "b:deep/a/b/c/file.txt")
            #expect(tag(of: resolver.resolve("deep/a/b/c/file")) == "b:deep/a/b/c/file.txt")
            #expect(tag(of: resolver.resolve("图片/猫")) == "b:图片/猫@2x.png")
            for name in ["/sub/sample", "./sub/sample", "sub//sample", "sub/./sample", "sub/sample/", "//./sub/sample"]
            {
                #expect(tag(of: resolver.resolve(name)) == "b:sub/sample@3x.png", "\(name)")
            }
            #expect(resolver.resolve("deep/a") == nil)  // a directory is not an asset
            #expect(resolver.resolve("") == nil)
            #expect(resolver.resolve("/") == nil)
            #expect(resolver.resolve("missing") == nil)
            #expect(resolver.fileCount == Self.files.count)
        }
    }

    @Test("Names with a .. component never resolve, even when they would stay inside")
    func dotDotRefused() async throws {
        try await withTemporaryDirectory { parent in
            let root = parent.appendingPathComponent("bundle")
            try makeTree(root, files: Self.files, tag: "b")
            try makeTree(parent, files: ["outside.txt"], tag: "o")
            let resolver = try resolver(root)
            for name in [
                "../outside.txt", "../outside", "sub/../config.json", "..", "../bundle/config.json",
                "sub/..", "/../outside.txt", "./../outside.txt", "deep/a/../../config.json",
            ] {
                #expect(resolver.resolve(name) == nil, "\(name)")
            }
            // Dots that are not a whole component are ordinary names.
            try makeTree(root, files: ["..data/x.txt", "a..b.txt"], tag: "b")
            let again = try self.resolver(root)
            #expect(tag(of: again.resolve("..data/x.txt")) == "b:..data/x.txt")
            #expect(tag(of: again.resolve("a..b")) == "b:a..b.txt")
        }
    }

    @Test("Symbolic links, FIFOs and directories are never returned, and links are not followed")
    func onlyRegularFiles() async throws {
        try await withTemporaryDirectory { parent in
            let root = parent.appendingPathComponent("bundle")
            try makeTree(root, files: ["sub/sample.png", "real.txt"], tag: "b")
            try makeTree(parent, files: ["elsewhere/secret.png"], tag: "o")
            let manager = FileManager.default
            try manager.createSymbolicLink(
                atPath: root.appendingPathComponent("link.png").path,
                withDestinationPath: "sub/sample.png"
            )
            try manager.createSymbolicLink(
                atPath: root.appendingPathComponent("linkdir").path,
                withDestinationPath: parent.appendingPathComponent("elsewhere").path
            )
            try manager.createSymbolicLink(
                atPath: root.appendingPathComponent("sub/sample@3x.png").path,
                withDestinationPath: "sample.png"
            )
            try await run(["mkfifo", root.appendingPathComponent("pipe.png").path])
            try manager.createDirectory(
                at: root.appendingPathComponent("folder.png"),
                withIntermediateDirectories: false
            )

            let resolver = try resolver(root)
            #expect(resolver.resolve("link.png") == nil)
            #expect(resolver.resolve("link") == nil)
            #expect(resolver.resolve("linkdir/secret.png") == nil)
            #expect(resolver.resolve("linkdir/secret") == nil)
            #expect(resolver.resolve("pipe.png") == nil)
            #expect(resolver.resolve("pipe") == nil)
            #expect(resolver.resolve("folder.png") == nil)
            #expect(resolver.resolve("folder") == nil)
            // The @3x symlink is skipped, so the regular 1x file is chosen.
            #expect(tag(of: resolver.resolve("sub/sample")) == "b:sub/sample.png")
            #expect(resolver.resolve("sub/sample@3x.png") == nil)
            #expect(resolver.fileCount == 2)
        }
    }

    @Test("A symbolic link as the root itself is accepted; a missing root throws .notFound")
    func rootDirectory() async throws {
        try await withTemporaryDirectory { parent in
            let root = parent.appendingPathComponent("real")
            try makeTree(root, files: ["a.png"], tag: "b")
            let link = parent.appendingPathComponent("current")
            try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: root.path)
            #expect(tag(of: try resolver(link).resolve("a")) == "b:a.png")

            let missing = parent.appendingPathComponent("missing")
            let error = try #require(throws: HotUpdateError.self) {
                try DirectoryAssetResolver(directory: missing, origin: .package(id: "images", version: "3"))
            }
            #expect(error.code == .notFound)
            #expect(error.packageID == "images")
            #expect(error.subject == missing.path)
            #expect(throws: HotUpdateError(.notFound, "")) { try resolver(root.appendingPathComponent("a.png")) }
        }
    }
}
