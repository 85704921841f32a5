// The minimal patch update: at launch, ask what is current, download the patch if it
// changed, check it, unpack it, and resolve images cache-first with the bundled copy as
// fallback.
//
//     MinimalPatch <manifest-url> --trust PUBLIC_KEY [--root DIR] [--transport curl|urlsession|file]
//     MinimalPatch <manifest-url> --allow-unsigned …   (a development repository)
//     MinimalPatch <patch-info-url> --patch-info …
//
// `MinimalPatch --help` says what each argument means.

import ArgumentParser
import Foundation
import HotUpdate
import Logging

struct ExampleError: Error, CustomStringConvertible {
    let description: String
}

/// The transports the example can use.
enum TransportName: String, CaseIterable, ExpressibleByArgument {
    case curl, urlsession, file
}

/// The example's command line.
@main
struct MinimalPatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "MinimalPatch",
        abstract:
            "Sync a patch from a repository's manifest, then resolve images cache-first with the bundle as fallback.",
        discussion: """
            <manifest-url> is a repository's manifest.json, signed with `hot sign` by the key whose public half \
            is given with --trust; with --patch-info it is the older single {"url": …, "md5": …} patch info.
            """
    )

    @Argument(help: ArgumentHelp("The manifest's URL (http, https or file).", valueName: "manifest-url"))
    var manifest: String

    @Option(
        help: ArgumentHelp(
            "A public key (PEM) the manifest's signature must come from; repeat for more.",
            valueName: "key.pub"
        )
    )
    var trust: [String] = []

    @Flag(help: "Accept an unsigned manifest (a development repository).")
    var allowUnsigned = false

    @Flag(help: "The URL is an older single patch info, not a manifest.")
    var patchInfo = false

    @Option(
        help: ArgumentHelp(
            "The store's directory (default: MinimalPatch-store in the temporary directory).",
            valueName: "dir"
        )
    )
    var root: String?

    @Option(help: "The transport (default: file for file:// URLs, curl otherwise).")
    var transport: TransportName?

    func validate() throws {
        guard manifestURL != nil else { throw ValidationError("'\(manifest)' is not a URL") }
        guard patchInfo || allowUnsigned || !trust.isEmpty else {
            throw ValidationError(
                "a signed manifest needs --trust KEY.pub (or --allow-unsigned for a development repository)"
            )
        }
    }

    /// The manifest's URL, when it has a scheme.
    var manifestURL: URL? {
        URL(string: manifest).flatMap { $0.scheme == nil ? nil : $0 }
    }

    func run() async throws {
        do {
            try await runExample(self)
        } catch {
            FileHandle.standardError.write(Data("MinimalPatch: error: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }
}

struct Arguments {
    var manifest: URL
    var root: URL
    var patchInfo: Bool
    var transport: TransportName?
    var trust: [PublicKey]
    var allowUnsigned: Bool

    init(_ command: MinimalPatchCommand) throws {
        guard let url = command.manifestURL else {
            throw ExampleError(description: "'\(command.manifest)' is not a URL")
        }
        manifest = url
        root =
            command.root.map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("MinimalPatch-store")
        patchInfo = command.patchInfo
        transport = command.transport
        trust = try command.trust.map { try CryptoVerifier.publicKey(pem: String(contentsOfFile: $0, encoding: .utf8)) }
        allowUnsigned = command.allowUnsigned
    }
}

func makeTransport(_ name: TransportName?, for url: URL) -> any Transport {
    switch name ?? (url.isFileURL ? .file : .curl) {
    case .file: return FileTransport()
    case .urlsession: return URLSessionTransport()
    case .curl: return SchemeRoutingTransport.platformHTTP()
    }
}

func runExample(_ command: MinimalPatchCommand) async throws {
    let arguments = try Arguments(command)
    guard let bundle = Bundle.module.url(forResource: "Bundle", withExtension: nil) else {
        throw ExampleError(description: "the example's sample bundle is missing from its resources")
    }
    let transport = makeTransport(arguments.transport, for: arguments.manifest)
    var logger = Logger(label: "MinimalPatch")
    logger.logLevel = .warning
    // The standard parts under the store root, the one place it is named.
    let configuration = UpdaterConfiguration.standard(root: arguments.root, transport: transport, logger: logger)

    // 1. At launch: what is current? Download, check and install what changed.
    let hot =
        arguments.patchInfo
        ? AppUpdater(
            configuration: configuration,
            source: PatchInfoManifestSource(url: arguments.manifest, transport: transport)
        )
        : AppUpdater(
            configuration: configuration,
            manifest: arguments.manifest,
            trust: arguments.allowUnsigned ? .unsignedDevelopment(keys: arguments.trust) : .signed(by: arguments.trust),
            context: ClientContext(appVersion: "1.0")
        )
    print("checking \(arguments.manifest.absoluteString)")
    let report = try await hot.sync()
    for outcome in report.packages {
        if let error = outcome.error {
            print(
                "  \(outcome.id): \(outcome.change) failed, still on \(outcome.activeVersion ?? "the bundle"): \(error)"
            )
        } else {
            print(
                "  \(outcome.id): \(outcome.change), active \(outcome.activeVersion ?? "none") (\(outcome.bytesDownloaded) bytes)"
            )
        }
    }

    // 2. Whenever the app draws: the installed patch first, the bundle second.
    //    Built from the store's file lists: no directory walk.
    let resolver = try await hot.resolver(bundle: bundle, scales: ScalePreference([3, 2, 1]))
    for name in ["sub/sample", "logo.png", "config.json"] {
        guard let asset = resolver.resolve(name) else {
            print("  \(name): not found")
            continue
        }
        let origin: String
        switch asset.origin {
        case .package(let id, let version): origin = "package \(id) v\(version)"
        case .bundle: origin = "bundle"
        }
        print("  \(name) -> \(asset.url.lastPathComponent) from \(origin)")
    }
    if let config = resolver.resolve("config.json"),
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: config.url)) as? [String: Any]
    {
        print("  theme in use: \(object["theme"] ?? "?")")
    }
}
