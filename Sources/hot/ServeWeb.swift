import ArgumentParser
import Foundation
import HotAssets
import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `hot serve-web --root DIR --module ID=URL... [--port N]`
struct ServeWeb: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve-web",
        abstract: "Serve installed web modules over HTTP on 127.0.0.1, as the app's web view is served.",
        discussion: """
            A preview for the people who build the pages: each module's installed package is \
            served through the same responder an app's scheme handler uses (WebResponder: \
            content types, ETag and 304, ranges, HEAD, index files, no listing), at its online \
            path on http://127.0.0.1:PORT. With --module 10010=https://m.example.com/home/, \
            http://127.0.0.1:PORT/home/ serves what the app serves for \
            https://m.example.com/home/. A request the package cannot answer (no module covers \
            it, the module is not installed or is turned off, the file is not in the package) \
            gets 404 with the reason in X-Hot-Fallback: the app would load it from the network. \
            Prints the address on its first line, then serves until it is stopped. The modules \
            are read when it starts: restart it after a sync.
            """
    )

    @OptionGroup var storeOptions: StoreOptions

    @Option(
        name: .customLong("module"),
        help: ArgumentHelp("A web module: its package id and online address.", valueName: "id=url")
    )
    var modules: [String] = []

    @Option(
        help: ArgumentHelp(
            "A module the server turned off: served as the app would, from the network.",
            valueName: "id"
        )
    )
    var inactive: [String] = []

    @Option(help: "The folder inside each package that holds the pages.")
    var packageFolder = ""

    @Option(help: "The TCP port on 127.0.0.1; 0 picks a free one.")
    var port = 8080

    @Flag(help: "Print each request on stderr.")
    var log = false

    func validate() throws {
        guard !modules.isEmpty else { throw ValidationError("give at least one --module id=url") }
        guard (0...65_535).contains(port) else { throw ValidationError("--port takes 0 to 65535") }
    }

    func run() async throws {
        try await runReportingErrors {
            let webModules = try modules.map(Self.parseModule)
            let bases = Dictionary(grouping: webModules) { Self.segments($0.onlineBase.path).joined(separator: "/") }
            if let (path, clash) = bases.first(where: { $0.value.count > 1 }) {
                throw ValidationError(
                    "modules \(clash.map(\.id).joined(separator: ", ")) share the path /\(path): serve them one at a time"
                )
            }
            try storeOptions.requireStore()
            let updater = storeOptions.makeUpdater()
            let resolver = await WebModuleResolver.make(
                modules: webModules,
                updater: updater,
                inactiveModuleIDs: Set(inactive),
                rebuildingIndex: false
            )
            let logLine: (@Sendable (String) -> Void)?
            if log {
                logLine = { line in printNote(line) }
            } else {
                logLine = nil
            }
            let server = try WebPreviewServer(responder: WebResponder(resolver: resolver), port: port, log: logLine)
            var lines = ""
            for module in resolver.modules {
                let path = module.onlineBase.path.hasSuffix("/") ? module.onlineBase.path : module.onlineBase.path + "/"
                let version = resolver.installed[module.id].map { "version \($0.version)" } ?? "not installed"
                lines += "serving \(module.id) (\(version)) at http://127.0.0.1:\(server.port)\(path)"
                lines += " for \(module.onlineBase.absoluteString)\n"
            }
            // Written at once, unbuffered: whoever started the server reads the address now.
            FileHandle.standardOutput.write(Data(lines.utf8))
            server.run()
        }
    }

    /// `id=https://host/path/` as a module.
    static func parseModule(_ text: String) throws -> WebModule {
        guard let equals = text.firstIndex(of: "="), equals != text.startIndex,
            let url = URL(string: String(text[text.index(after: equals)...])),
            let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http", url.host != nil
        else {
            throw ValidationError("--module takes id=url, such as 10010=https://m.example.com/home/ (got '\(text)')")
        }
        return WebModule(id: String(text[..<equals]), onlineBase: url)
    }

    static func segments(_ path: String) -> [Substring] { path.split(separator: "/") }
}
