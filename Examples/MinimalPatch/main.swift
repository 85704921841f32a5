// The minimal patch update: at launch, ask what is current, download the patch if it
// changed, check it, unpack it, and resolve images cache-first with the bundled copy as
// fallback.
//
//     MinimalPatch <manifest-url> [--root DIR] [--patch-info] [--transport curl|urlsession|file]
//
// <manifest-url> is a native manifest.json (as `hot pack` writes), or with --patch-info the
// older single `{"url": …, "md5": …}` patch info.

import Foundation
import HotArchive
import HotAssets
import HotCore
import HotStore
import HotTransport
import HotVerify
import Logging

struct ExampleError: Error, CustomStringConvertible {
    let description: String
}

func parseArguments() throws -> (manifest: URL, root: URL, patchInfo: Bool, transport: String?) {
    var arguments = Array(CommandLine.arguments.dropFirst())
    var root = FileManager.default.temporaryDirectory.appendingPathComponent("MinimalPatch-store")
    var patchInfo = false
    var transport: String?
    var positional: [String] = []
    while !arguments.isEmpty {
        let argument = arguments.removeFirst()
        switch argument {
        case "--root":
            guard !arguments.isEmpty else { throw ExampleError(description: "--root needs a directory") }
            root = URL(fileURLWithPath: arguments.removeFirst(), isDirectory: true)
        case "--patch-info":
            patchInfo = true
        case "--transport":
            guard !arguments.isEmpty else { throw ExampleError(description: "--transport needs a name") }
            transport = arguments.removeFirst()
        default:
            positional.append(argument)
        }
    }
    guard positional.count == 1, let url = URL(string: positional[0]), url.scheme != nil else {
        throw ExampleError(
            description:
                "usage: MinimalPatch <manifest-url> [--root DIR] [--patch-info] [--transport curl|urlsession|file]")
    }
    return (url, root, patchInfo, transport)
}

func makeTransport(_ name: String?, for url: URL) throws -> any Transport {
    switch name ?? (url.isFileURL ? "file" : "curl") {
    case "file": return FileTransport()
    case "urlsession": return URLSessionTransport()
    case "curl":
        #if canImport(CHotCurl)
            return CurlTransport()
        #else
            return URLSessionTransport()
        #endif
    default: throw ExampleError(description: "unknown transport \(name ?? "")")
    }
}

func run() async throws {
    let arguments = try parseArguments()
    guard let bundle = Bundle.module.url(forResource: "Bundle", withExtension: nil) else {
        throw ExampleError(description: "the example's sample bundle is missing from its resources")
    }
    let transport = try makeTransport(arguments.transport, for: arguments.manifest)
    var logger = Logger(label: "MinimalPatch")
    logger.logLevel = .warning
    let updater = Updater(
        configuration: UpdaterConfiguration(
            root: arguments.root, transport: transport, unarchiver: ZipUnarchiver(), verifier: CryptoVerifier(),
            store: JSONMetadataStore(root: arguments.root), logger: logger))

    // 1. At launch: what is current? Download, check and install what changed.
    let source: any ManifestSource =
        arguments.patchInfo
        ? PatchInfoManifestSource(url: arguments.manifest, transport: transport)
        : StaticManifestSource(url: arguments.manifest, transport: transport)
    print("checking \(arguments.manifest.absoluteString)")
    let report = try await updater.sync(from: source)
    for outcome in report.packages {
        if let error = outcome.error {
            print("  \(outcome.id): \(outcome.change) failed, still on \(outcome.activeVersion ?? "the bundle"): \(error)")
        } else {
            print("  \(outcome.id): \(outcome.change), active \(outcome.activeVersion ?? "none") (\(outcome.bytesDownloaded) bytes)")
        }
    }

    // 2. Whenever the app draws: the installed patch first, the bundle second.
    let installed = try await updater.installedPackages().map {
        InstalledPackageLocation(id: $0.id, version: $0.version, directory: $0.directory)
    }
    let resolver = try AssetResolverChain.make(packages: installed, bundle: bundle, scales: ScalePreference([3, 2, 1]))
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

do {
    try await run()
} catch {
    FileHandle.standardError.write(Data("MinimalPatch: error: \(error)\n".utf8))
    exit(1)
}
