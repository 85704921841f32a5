// Web offline packages, as an app with H5 pages ships them: the app POSTs the modules it has
// to the offline-package server, installs what the server answers, and serves each page from
// its local copy (WebResponder, behind a scheme handler) when the module is active and
// installed, from the web otherwise.
//
//     WebOfflinePackages <check-url> [--root DIR] [--app-code CODE] [--app-version VERSION] [--open URL]...
//
// `WebOfflinePackages --help` says what each argument means.

import ArgumentParser
import Foundation
import HotUpdate
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

/// The example's command line.
@main
struct WebOfflinePackagesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "WebOfflinePackages",
        abstract: "Ask an offline-package server which web modules to install, then open pages locally or online.",
        discussion: """
            <check-url> is the server's check endpoint (http or https, answering a POST), or a file:// URL of \
            a recorded answer (check.json, as `make-repository` beside this example's source writes it).
            """
    )

    @Argument(help: ArgumentHelp("The check endpoint's URL (http, https or file).", valueName: "check-url"))
    var check: String

    @Option(
        help: ArgumentHelp(
            "The store's directory (default: WebOfflinePackages-store in the temporary directory).",
            valueName: "dir"
        )
    )
    var root: String?

    @Option(help: ArgumentHelp("The app code the request reports.", valueName: "code"))
    var appCode = "SomeApp"

    @Option(help: ArgumentHelp("The app version the request reports.", valueName: "version"))
    var appVersion = "1.2.0"

    @Option(
        name: .customLong("open"),
        help: ArgumentHelp(
            "A page to open; repeat for more (default: a few pages of the two modules).",
            valueName: "url"
        )
    )
    var pages: [String] = []

    func validate() throws {
        guard checkURL != nil else { throw ValidationError("'\(check)' is not a URL") }
        for page in pages where Self.url(page) == nil {
            throw ValidationError("--open '\(page)' is not a URL")
        }
    }

    /// `string` as a URL, when it has a scheme.
    static func url(_ string: String) -> URL? {
        URL(string: string).flatMap { $0.scheme == nil ? nil : $0 }
    }

    /// The check endpoint's URL, when it has a scheme.
    var checkURL: URL? { Self.url(check) }

    func run() async throws {
        do {
            try await runExample(Arguments(self))
        } catch {
            FileHandle.standardError.write(Data("WebOfflinePackages: error: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }
}

struct Arguments {
    var check: URL
    var root: URL
    var app: OfflinePackageManifestSource.App
    var pages: [URL]

    init(_ command: WebOfflinePackagesCommand) throws {
        guard let url = command.checkURL else { throw ExampleError(description: "'\(command.check)' is not a URL") }
        check = url
        root =
            (command.root.map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("WebOfflinePackages-store"))
            .standardizedFileURL
        app = OfflinePackageManifestSource.App(
            appCode: command.appCode,
            appVersion: command.appVersion,
            platform: "ios"
        )
        pages = try (command.pages.isEmpty ? defaultPages : command.pages).map { page in
            guard let url = WebOfflinePackagesCommand.url(page) else {
                throw ExampleError(description: "--open '\(page)' is not a URL")
            }
            return url
        }
    }
}

/// The path of `url` under `root`, for printing.
func relative(_ url: URL, to root: URL) -> String {
    let path = url.standardizedFileURL.path
    let prefix = root.path + "/"
    return path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path
}

func runExample(_ arguments: Arguments) async throws {
    let transport = SchemeRoutingTransport(http: SchemeRoutingTransport.platformHTTP())
    var logger = Logger(label: "WebOfflinePackages")
    logger.logLevel = .error
    // The standard parts under the store root, the one place it is named.
    let configuration = UpdaterConfiguration.standard(root: arguments.root, transport: transport, logger: logger)
    let root = configuration.root
    let updater = Updater(configuration: configuration)

    // 1. Tell the server what is installed; install what it answers; disable what it turns off.
    let source = OfflinePackageManifestSource(
        url: arguments.check,
        transport: transport,
        app: arguments.app,
        snapshot: { try await updater.currentSnapshot() },
        moduleIDs: Set(webModules.map(\.id))
    )
    let reported = OfflinePackageManifestSource.installedModules(
        in: try await updater.currentSnapshot(),
        only: Set(webModules.map(\.id))
    )
    print("check \(arguments.check.absoluteString)")
    print("  posted \(String(decoding: try source.requestBody(reporting: reported), as: UTF8.self))")
    let report = try await updater.sync(from: source)
    for outcome in report.packages {
        if let error = outcome.error {
            print(
                "  module \(outcome.id): \(outcome.change) failed, still on \(outcome.activeVersion ?? "the web"): \(error)"
            )
        } else {
            print("  module \(outcome.id): \(outcome.change), version \(outcome.activeVersion ?? "-")")
        }
    }

    // 2. Open pages as a web view with a scheme handler does (WebSchemeHandler on Apple
    //    platforms): a page of an installed, active module loads at app://host/path, with an
    //    origin of its own, and the responder answers each of its requests from the package.
    //    Other pages, and what the package lacks, load from the web.
    let snapshot = try await updater.currentSnapshot()
    let disabled = Set(snapshot.packages.values.filter { $0.state == .disabled }.map(\.id))
    let installed = try await updater.installedPackages()
    let resolver = WebModuleResolver(modules: webModules, installed: installed, inactiveModuleIDs: disabled)
    let responder = WebResponder(resolver: resolver)
    for page in arguments.pages {
        switch resolver.resolve(page) {
        case .local(let local):
            switch responder.respond(to: WebRequest(method: "GET", url: page)) {
            case .response(let response):
                let type = response.header("Content-Type") ?? "-"
                print(
                    "open \(page.absoluteString) -> \(local.url(scheme: "app").absoluteString) "
                        + "(\(response.status) \(type), \(relative(local.fileURL, to: root)))"
                )
            case .network(let url, let reason):
                print("open \(page.absoluteString) -> online \(url.absoluteString) (\(reason))")
            }
        case .online(let url, let reason):
            print("open \(page.absoluteString) -> online \(url.absoluteString) (\(reason))")
        }
    }

    print("modules:")
    for record in snapshot.packages.values.sorted(by: { $0.id < $1.id }) {
        print("  \(record.id) \(record.active?.version ?? "-") \(record.state)")
    }
}
