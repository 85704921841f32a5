// The minimal patch update: at launch, ask what is current, download the patch if it
// changed, check it, unpack it, and resolve images cache-first with the bundled copy as
// fallback.
//
//     MinimalPatch <manifest-url> --trust PUBLIC_KEY [--root DIR] [--transport curl|urlsession|file]
//     MinimalPatch <manifest-url> --allow-unsigned …   (a development repository)
//     MinimalPatch <patch-info-url> --patch-info …
//
// <manifest-url> is a repository's manifest.json, signed with `hot sign` by the key whose
// public half is given with --trust; with --patch-info it is the older single
// `{"url": …, "md5": …}` patch info.

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

struct Arguments {
    var manifest: URL
    var root: URL
    var patchInfo: Bool
    var transport: String?
    var trust: [PublicKey]
    var allowUnsigned: Bool
}

func parseArguments() throws -> Arguments {
    var arguments = Array(CommandLine.arguments.dropFirst())
    var root = FileManager.default.temporaryDirectory.appendingPathComponent("MinimalPatch-store")
    var patchInfo = false
    var trust: [PublicKey] = []
    var allowUnsigned = false
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
        case "--trust":
            guard !arguments.isEmpty else { throw ExampleError(description: "--trust needs a public key file") }
            trust.append(try CryptoVerifier.publicKey(pem: String(contentsOfFile: arguments.removeFirst(), encoding: .utf8)))
        case "--allow-unsigned":
            allowUnsigned = true
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
                "usage: MinimalPatch <manifest-url> (--trust KEY.pub | --allow-unsigned | --patch-info) [--root DIR] [--transport curl|urlsession|file]"
        )
    }
    guard patchInfo || allowUnsigned || !trust.isEmpty else {
        throw ExampleError(description: "a signed manifest needs --trust KEY.pub (or --allow-unsigned for a development repository)")
    }
    return Arguments(
        manifest: url, root: root, patchInfo: patchInfo, transport: transport, trust: trust,
        allowUnsigned: allowUnsigned)
}

func makeTransport(_ name: String?, for url: URL) throws -> any Transport {
    switch name ?? (url.isFileURL ? "file" : "curl") {
    case "file": return FileTransport()
    case "urlsession": return URLSessionTransport()
    case "curl": return SchemeRoutingTransport.platformHTTP()
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
        : SignedManifestSource(
            url: arguments.manifest, transport: transport, verifier: CryptoVerifier(),
            trust: arguments.allowUnsigned ? .unsignedDevelopment(keys: arguments.trust) : .signed(by: arguments.trust),
            storeRoot: arguments.root, context: ClientContext(appVersion: "1.0"), logger: logger)
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
    //    Built from the store's file lists: no directory walk.
    let resolver = try await AssetResolverChain.make(
        updater: updater, bundle: bundle, scales: ScalePreference([3, 2, 1]))
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
