// Script patches from an older patch server's RSA-signed patch list: at launch every
// installed patch is handed to the app's script engine; after each sync the new and updated
// ones are; a patch the engine refuses is marked failed and the others run all the same; a
// developer's patch can be installed from a folder without a server.
//
//     ScriptPatches <patch-list-url> --key SERVER_PUBLIC_KEY.pem [--root DIR] [--debug-patch FOLDER]
//
// `ScriptPatches --help` says what each argument means.

import ArgumentParser
import Foundation
import HotUpdate
import Logging

struct ExampleError: Error, CustomStringConvertible {
    let description: String
}

/// The example's command line.
@main
struct ScriptPatchesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ScriptPatches",
        abstract: "Sync script patches from a signed patch list and hand each new one to the app's script engine.",
        discussion: """
            <patch-list-url> is an http(s):// or file:// URL of patches.json, as `make-patch-list` (beside \
            this example's source) publishes it.
            """
    )

    @Argument(help: ArgumentHelp("The patch list's URL (http, https or file).", valueName: "patch-list-url"))
    var patchList: String

    @Option(
        help: ArgumentHelp(
            "The patch server's RSA public key (PEM) the list must be signed by; repeat for more.",
            valueName: "server-public-key.pem"
        )
    )
    var key: [String] = []

    @Option(
        help: ArgumentHelp(
            "The store's directory (default: ScriptPatches-store in the temporary directory).",
            valueName: "dir"
        )
    )
    var root: String?

    @Option(
        help: ArgumentHelp("Also install a developer's patch from this folder, without a server.", valueName: "folder")
    )
    var debugPatch: String?

    func validate() throws {
        guard patchListURL != nil else { throw ValidationError("'\(patchList)' is not a URL") }
        guard !key.isEmpty else { throw ValidationError("the patch list needs --key SERVER_PUBLIC_KEY.pem") }
    }

    /// The patch list's URL, when it has a scheme.
    var patchListURL: URL? {
        URL(string: patchList).flatMap { $0.scheme == nil ? nil : $0 }
    }

    func run() async throws {
        do {
            try await runExample(Arguments(self))
        } catch {
            FileHandle.standardError.write(Data("ScriptPatches: error: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }
}

struct Arguments {
    var patchList: URL
    var root: URL
    var keys: [PublicKey]
    var debugPatch: URL?

    init(_ command: ScriptPatchesCommand) throws {
        guard let url = command.patchListURL else {
            throw ExampleError(description: "'\(command.patchList)' is not a URL")
        }
        patchList = url
        root =
            command.root.map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("ScriptPatches-store")
        keys = try command.key.map {
            PublicKey(scheme: .rsaPKCS1Raw, pem: try String(contentsOfFile: $0, encoding: .utf8))
        }
        debugPatch = command.debugPatch.map { URL(fileURLWithPath: $0, isDirectory: true) }
    }
}

/// The app's script engine, reduced to what the example needs: it reads a patch's
/// `main.js`, refuses a script whose brackets do not balance (as a real engine refuses a
/// syntax error), and prints the classes the script would patch.
struct ScriptEngine: PatchActivator {
    func activate(_ patch: ScriptPatch) async throws {
        let file = patch.directory.appendingPathComponent("main.js")
        guard let script = try? String(contentsOf: file, encoding: .utf8) else {
            throw ExampleError(description: "the patch has no readable main.js")
        }
        try Self.checkBrackets(script)
        let classes = script.split(separator: "\n").compactMap { line -> String? in
            guard let start = line.range(of: "defineClass(\"") else { return nil }
            return String(line[start.upperBound...].prefix { $0 != "\"" })
        }
        let origin = patch.isLocal ? "local folder" : "v\(patch.version.prefix(8))"
        print("  evaluate \(patch.id) (\(origin)): main.js patches \(classes.joined(separator: ", "))")
    }

    static func checkBrackets(_ script: String) throws {
        var open: [(Character, Int)] = []
        let pairs: [Character: Character] = [")": "(", "]": "[", "}": "{"]
        for (number, line) in script.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            for character in line {
                if "([{".contains(character) {
                    open.append((character, number + 1))
                } else if let opening = pairs[character] {
                    guard let last = open.popLast(), last.0 == opening else {
                        throw ExampleError(description: "syntax error at line \(number + 1): unexpected '\(character)'")
                    }
                }
            }
        }
        if let (character, line) = open.last {
            throw ExampleError(description: "syntax error: '\(character)' opened at line \(line) is never closed")
        }
    }
}

func printActivations(_ activations: [ScriptPatch.Activation]) {
    for activation in activations {
        if let error = activation.error {
            print("  activate \(activation.id): failed: \(error)")
        } else {
            print("  activate \(activation.id): ok")
        }
    }
}

func printStates(_ updater: Updater) async throws {
    print("states:")
    let snapshot = try await updater.currentSnapshot()
    for record in snapshot.packages.values.sorted(by: { $0.id < $1.id }) {
        let version = record.active.map { String($0.version.prefix(12)) } ?? "-"
        print("  \(record.id) \(version) \(record.state)")
    }
}

func runExample(_ arguments: Arguments) async throws {
    let transport = SchemeRoutingTransport(http: SchemeRoutingTransport.platformHTTP())
    var logger = Logger(label: "ScriptPatches")
    logger.logLevel = .warning
    // Script patches live in a store of their own: a patch list is complete and removes
    // whatever it does not name.
    let patches = Updater(configuration: .standard(root: arguments.root, transport: transport, logger: logger))
    let engine = ScriptEngine()

    // 1. At launch, before the network: every installed patch, in the list's order.
    print("launch: activating installed patches")
    printActivations(await patches.patches.activateInstalled(with: engine))

    // 2. Sync with the signed patch list; only new and updated patches are activated.
    print("checking \(arguments.patchList.absoluteString)")
    let source = SignedPatchListManifestSource(
        url: arguments.patchList,
        transport: transport,
        verifier: CryptoVerifier(),
        trustedKeys: arguments.keys
    )
    let (report, activations) = try await patches.patches.sync(from: source, activator: engine)
    for outcome in report.packages {
        if let error = outcome.error {
            print("  \(outcome.id): \(outcome.change) failed: \(error)")
        } else {
            print("  \(outcome.id): \(outcome.change) (\(outcome.bytesDownloaded) bytes)")
        }
    }
    if activations.isEmpty { print("  nothing new to activate") }
    printActivations(activations)

    // 3. A developer's patch from a folder, no server, then a relaunch activating everything
    //    installed (the next sync with a complete patch list removes the debug patch).
    if let folder = arguments.debugPatch {
        let version = "local-\(Int(Date().timeIntervalSince1970))"
        let installed = try await patches.patches.installLocal(from: folder, id: "debug", version: version)
        print("debug patch: installed \(installed.id) \(installed.version) from \(folder.lastPathComponent)")
        print("relaunch: activating installed patches")
        printActivations(await patches.patches.activateInstalled(with: engine))
    }

    try await printStates(patches)
}
