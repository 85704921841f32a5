import Foundation
import HotAssets
import HotCore
import Testing

@Suite("Web modules: online URL to local file")
struct WebModuleResolverTests {
    static let home = WebModule(id: "10010", onlineBase: URL(string: "https://m.example.com/home/")!)
    static let homeDetail = WebModule(
        id: "10011",
        onlineBase: URL(string: "https://M.Example.com:443/home/detail")!,
        packageFolder: "dist"
    )

    /// Installs module pages under `directory/packages/<id>/<version>`.
    func install(_ id: String, version: String, files: [String], in directory: URL) throws -> InstalledPackage {
        let root = directory.appendingPathComponent("packages/\(id)/\(version)", isDirectory: true)
        try makeTree(root, files: files, tag: "\(id)@\(version)")
        return InstalledPackage(id: id, version: version, directory: root)
    }

    func local(_ location: WebPageLocation, sourceLocation: SourceLocation = #_sourceLocation) -> LocalWebPage? {
        if case .local(let page) = location { return page }
        Issue.record("expected a local page, got \(location)", sourceLocation: sourceLocation)
        return nil
    }

    func content(_ page: LocalWebPage?) -> String? {
        guard let page else { return nil }
        return (try? Data(contentsOf: URL(fileURLWithPath: page.fileURL.path))).map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    @Test("a page maps to its file with the query and fragment kept, and the module folder as read-access root")
    func mapsPage() throws {
        try withTemporaryDirectorySync { directory in
            let package = try install(
                "10010",
                version: "1.0.4",
                files: ["index.html", "js/app.js", "a b.html"],
                in: directory
            )
            let resolver = WebModuleResolver(modules: [Self.home], installed: [package])

            let page = local(resolver.resolve(URL(string: "https://m.example.com/home/js/app.js?x=1#y")!))
            #expect(content(page) == "10010@1.0.4:js/app.js")
            #expect(page?.fileURL.isFileURL == true)
            #expect(page?.fileURL.query == "x=1")
            #expect(page?.fileURL.fragment == "y")
            #expect(page?.readAccessRoot.path == package.directory.resolvingSymlinksInPath().path)
            #expect(page?.moduleID == "10010")
            #expect(page?.version == "1.0.4")

            #expect(
                content(local(resolver.resolve(URL(string: "https://m.example.com/home/")!)))
                    == "10010@1.0.4:index.html"
            )
            #expect(
                content(local(resolver.resolve(URL(string: "https://m.example.com/home")!))) == "10010@1.0.4:index.html"
            )
            #expect(
                content(local(resolver.resolve(URL(string: "HTTPS://M.EXAMPLE.COM:443/home/a%20b.html")!)))
                    == "10010@1.0.4:a b.html"
            )
        }
    }

    @Test("the longest base wins, and a module may live in a folder of its package")
    func longestBase() throws {
        try withTemporaryDirectorySync { directory in
            let home = try install("10010", version: "1", files: ["detail/index.html"], in: directory)
            let detail = try install(
                "10011",
                version: "7",
                files: ["dist/index.html", "dist/item.html"],
                in: directory
            )
            let resolver = WebModuleResolver(modules: [Self.home, Self.homeDetail], installed: [home, detail])

            let page = local(resolver.resolve(URL(string: "https://m.example.com/home/detail/item.html")!))
            #expect(content(page) == "10011@7:dist/item.html")
            #expect(page?.readAccessRoot.lastPathComponent == "dist")
            #expect(
                content(local(resolver.resolve(URL(string: "https://m.example.com/home/detail/")!)))
                    == "10011@7:dist/index.html"
            )
        }
    }

    @Test("the online URL is kept when the page is not a module's, or the module is absent, inactive or lacks the file")
    func fallsBackOnline() throws {
        try withTemporaryDirectorySync { directory in
            let package = try install("10010", version: "1", files: ["index.html"], in: directory)
            let resolver = WebModuleResolver(modules: [Self.home, Self.homeDetail], installed: [package])
            let cases: [(String, OnlineFallbackReason)] = [
                ("https://m.example.com/homepage/index.html", .notAModulePage),
                ("http://m.example.com/home/index.html", .notAModulePage),
                ("https://m.example.com:8443/home/index.html", .notAModulePage),
                ("https://other.example.com/home/index.html", .notAModulePage),
                ("https://m.example.com/home/missing.html", .fileMissing),
                ("https://m.example.com/home/detail/index.html", .notInstalled),
                ("https://m.example.com/home/%2E%2E/%2E%2E/secret", .unsafePath),
                ("https://m.example.com/home/a%2F..%2F..%2Fsecret", .unsafePath),
            ]
            for (text, reason) in cases {
                let url = try #require(URL(string: text))
                #expect(resolver.resolve(url) == .online(url, reason: reason), "\(text)")
                #expect(resolver.resolve(url).url == url)
            }
            let inactive = WebModuleResolver(modules: [Self.home], installed: [package], inactiveModuleIDs: ["10010"])
            let url = try #require(URL(string: "https://m.example.com/home/index.html"))
            #expect(inactive.resolve(url) == .online(url, reason: .inactive))
        }
    }

    @Test("a link inside the module that leads out of it is not served")
    func linkOut() throws {
        try withTemporaryDirectorySync { directory in
            let package = try install("10010", version: "1", files: ["index.html"], in: directory)
            try Data("secret".utf8).write(to: directory.appendingPathComponent("secret.html"))
            try FileManager.default.createSymbolicLink(
                at: package.directory.appendingPathComponent("leak.html"),
                withDestinationURL: directory.appendingPathComponent("secret.html")
            )
            let resolver = WebModuleResolver(modules: [Self.home], installed: [package])
            let url = try #require(URL(string: "https://m.example.com/home/leak.html"))
            #expect(resolver.resolve(url) == .online(url, reason: .unsafePath))
        }
    }
}

/// A fresh directory for one synchronous test, removed when it ends.
func withTemporaryDirectorySync<T>(_ body: (URL) throws -> T) throws -> T {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("HotAssetsTests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try body(directory)
}
