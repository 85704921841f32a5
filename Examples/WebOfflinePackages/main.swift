// Web offline packages, as an app with H5 pages ships them: the app POSTs the modules it has
// to the offline-package server, installs what the server answers, and opens each page from
// its local copy (file URL and read-access root) when the module is active and installed,
// from the web otherwise.
//
//     WebOfflinePackages <check-url> [--root DIR] [--app-code CODE] [--app-version VERSION] [--open URL]...
//
// <check-url> is the server's check endpoint (http or https, answering a POST), or a
// file:// URL of a recorded answer (check.json, as `make-repository` beside this file
// writes it).

import Foundation
import HotArchive
import HotAssets
import HotCore
import HotManifest
import HotStore
import HotTransport
import HotVerify
import Logging

struct ExampleError: Error, CustomStringConvertible {
    let description: String
}

/// The app's web modules: which online pages each offline package replaces.
let webModules: [WebModule] = [
    ("10010", "https://m.example.com/home/"), ("10020", "https://m.example.com/promo/"),
].compactMap { id, base in URL(string: base).map { WebModule(id: id, onlineBase: $0) } }

/// The pages opened when no --open is given.
let defaultPages = [
    "https://m.example.com/home/index.html?tab=2#top", "https://m.example.com/home/js/app.js",
    "https://m.example.com/promo/", "https://m.example.com/promo/../home/index.html",
    "https://www.example.com/about.html",
]

struct Arguments {
    var check: URL
    var root: URL
    var app: OfflinePackageManifestSource.App
    var pages: [URL]
}

func parseArguments() throws -> Arguments {
    var arguments = Array(CommandLine.arguments.dropFirst())
    var root = FileManager.default.temporaryDirectory.appendingPathComponent("WebOfflinePackages-store")
    var app = OfflinePackageManifestSource.App(appCode: "SomeApp", appVersion: "1.2.0", platform: "ios")
    var pages: [String] = []
    var positional: [String] = []
    func value(for option: String) throws -> String {
        guard !arguments.isEmpty else { throw ExampleError(description: "\(option) needs a value") }
        return arguments.removeFirst()
    }
    while !arguments.isEmpty {
        let argument = arguments.removeFirst()
        switch argument {
        case "--root": root = URL(fileURLWithPath: try value(for: argument), isDirectory: true)
        case "--app-code": app.appCode = try value(for: argument)
        case "--app-version": app.appVersion = try value(for: argument)
        case "--open": pages.append(try value(for: argument))
        default: positional.append(argument)
        }
    }
    guard positional.count == 1, let url = URL(string: positional[0]), url.scheme != nil else {
        throw ExampleError(
            description:
                "usage: WebOfflinePackages <check-url> [--root DIR] [--app-code CODE] [--app-version VERSION] [--open URL]..."
        )
    }
    let urls = try (pages.isEmpty ? defaultPages : pages).map { page in
        guard let url = URL(string: page), url.scheme != nil else {
            throw ExampleError(description: "--open '\(page)' is not a URL")
        }
        return url
    }
    return Arguments(check: url, root: root.standardizedFileURL, app: app, pages: urls)
}

/// The path of `url` under `root`, for printing.
func relative(_ url: URL, to root: URL) -> String {
    let path = url.standardizedFileURL.path
    let prefix = root.path + "/"
    return path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path
}

func run() async throws {
    let arguments = try parseArguments()
    let transport = SchemeRoutingTransport(http: SchemeRoutingTransport.platformHTTP())
    var logger = Logger(label: "WebOfflinePackages")
    logger.logLevel = .error
    let root = arguments.root
    let updater = Updater(
        configuration: UpdaterConfiguration(
            root: root, transport: transport, unarchiver: ZipUnarchiver(), verifier: CryptoVerifier(),
            store: JSONMetadataStore(root: root), logger: logger))

    // 1. Tell the server what is installed; install what it answers; disable what it turns off.
    let source = OfflinePackageManifestSource(
        url: arguments.check, transport: transport, app: arguments.app,
        snapshot: { try await updater.currentSnapshot() }, moduleIDs: Set(webModules.map(\.id)))
    let reported = OfflinePackageManifestSource.installedModules(
        in: try await updater.currentSnapshot(), only: Set(webModules.map(\.id)))
    print("check \(arguments.check.absoluteString)")
    print("  posted \(String(decoding: try source.requestBody(reporting: reported), as: UTF8.self))")
    let report = try await updater.sync(from: source)
    for outcome in report.packages {
        if let error = outcome.error {
            print("  module \(outcome.id): \(outcome.change) failed, still on \(outcome.activeVersion ?? "the web"): \(error)")
        } else {
            print("  module \(outcome.id): \(outcome.change), version \(outcome.activeVersion ?? "-")")
        }
    }

    // 2. Open pages: the local copy when the module is active and installed, else the web.
    let snapshot = try await updater.currentSnapshot()
    let disabled = Set(snapshot.packages.values.filter { $0.state == .disabled }.map(\.id))
    let installed = try await updater.installedPackages().map {
        InstalledPackageLocation(id: $0.id, version: $0.version, directory: $0.directory)
    }
    let resolver = WebModuleResolver(modules: webModules, installed: installed, inactiveModuleIDs: disabled)
    for page in arguments.pages {
        switch resolver.resolve(page) {
        case .local(let local):
            var file = relative(local.fileURL, to: root)
            if let query = local.fileURL.query { file += "?\(query)" }
            if let fragment = local.fileURL.fragment { file += "#\(fragment)" }
            print("open \(page.absoluteString) -> local \(file) (read access \(relative(local.readAccessRoot, to: root)))")
        case .online(let url, let reason):
            print("open \(page.absoluteString) -> online \(url.absoluteString) (\(reason))")
        }
    }

    print("modules:")
    for record in snapshot.packages.values.sorted(by: { $0.id < $1.id }) {
        print("  \(record.id) \(record.active?.version ?? "-") \(record.state)")
    }
}

do {
    try await run()
} catch {
    FileHandle.standardError.write(Data("WebOfflinePackages: error: \(error)\n".utf8))
    exit(1)
}
