import ArgumentParser
import Foundation
import HotCore
import HotManifest
import HotTransport
import HotVerify

/// `hot sync --manifest URL --root DIR`
struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Bring a store up to date with a manifest.",
        discussion: """
            Downloads every package the store lacks, several at once, checks its size and digest \
            before unpacking it, stores each file once in the store's objects, and records the \
            version atomically. A package that fails leaves the version installed before it \
            active. Progress goes to stderr: a status line on a terminal, one line per state \
            change otherwise. Prints one line per package on stdout; exits 1 if any failed. \
            An on-demand package is fetched only once `hot install` asked for it \
            (notRequested until then); with --metered, a package above its delivery mode's \
            limit is left waiting for an unmetered network (not a failure).

            Besides the signed native manifest, three older server formats are read: \
            patchinfo (one {"url", "md5"} patch), patchlist (a script-patch list whose MD5s \
            the server signs with RSA; give the server's public key with --rsa-key) and \
            offline (the H5 offline-package check: the installed modules are POSTed to the \
            URL with --app-code, --app-version and --platform; modules the server answers \
            inactive are disabled, keeping their files).
            """
    )

    /// The manifest formats `hot sync` reads.
    enum Format: String, ExpressibleByArgument, CaseIterable {
        case native
        case patchinfo
        case patchlist
        case offline
    }

    @Option(help: "The manifest's URL (http, https or file) or path.")
    var manifest: String

    @OptionGroup var storeOptions: StoreOptions

    @Option(help: "The transport; chosen from the URL when omitted.")
    var transport: TransportKind?

    @OptionGroup(title: "TLS") var tlsOptions: TLSOptions

    @Option(help: "The unarchiver.")
    var unarchiver: UnarchiverKind = .zip

    @Option(
        help:
            "The manifest format: native (manifest.json), patchinfo ({url, md5}), patchlist (RSA-signed patch list) or offline (H5 offline-package check)."
    )
    var format: Format = .native

    @Option(help: "The package id a patchinfo manifest installs under.")
    var patchID = "patch"

    @Option(help: "How many packages are downloaded and unpacked at once.")
    var concurrency = 4

    @Option(
        help:
            "The most bytes one package may take, downloaded and unpacked; a package declaring more is refused."
    )
    var maxPackageBytes: Int64 = UpdaterConfiguration.defaultMaxPackageBytes

    @Flag(help: "Show no progress on stderr.")
    var quiet = false

    @Option(help: "The patch server's RSA public key (PEM) for a patchlist (repeatable, for a key change).")
    var rsaKey: [String] = []

    @Option(help: "The app's code an offline-package check reports (appCode).")
    var appCode: String?

    @Option(help: "The platform an offline-package check reports (platform).")
    var platform = "ios"

    @Option(
        help:
            "The app version: checked against a native manifest's min/max app version policy, reported by an offline-package check (appVer)."
    )
    var appVersion: String?

    @Option(
        help:
            "A base URL of the repository (repeatable, preferred first): a request under one is tried under each in turn when it fails, answers 404 or 5xx, or stalls."
    )
    var mirror: [String] = []

    @Option(help: "Check every installed file's presence and size at most once per this many seconds (0: every sync).")
    var checkInterval: Int = 86_400

    @Option(
        help:
            "Write each phase's time to this file as JSON: the manifest, then each package's download, unpack, adopt, commit."
    )
    var timings: String?

    @OptionGroup(title: "Manifest") var manifestOptions: ManifestOptions

    @OptionGroup(title: "Network") var network: NetworkOptions

    func validate() throws {
        if format == .native, manifestOptions.trust.isEmpty, !manifestOptions.allowUnsigned {
            throw ValidationError(
                "a native manifest needs --trust PUBLIC_KEY (or --allow-unsigned for a development repository)"
            )
        }
        if format == .patchlist, rsaKey.isEmpty {
            throw ValidationError("a patchlist needs --rsa-key SERVER_PUBLIC_KEY (the key its MD5s are signed with)")
        }
        if format == .offline, appCode == nil || appVersion == nil {
            throw ValidationError("an offline-package check needs --app-code and --app-version")
        }
        guard concurrency >= 1 else { throw ValidationError("--concurrency must be 1 or more") }
        guard checkInterval >= 0 else { throw ValidationError("--check-interval must not be negative") }
        guard maxPackageBytes >= 0 else { throw ValidationError("--max-package-bytes must not be negative") }
    }

    func run() async throws {
        try await runReportingErrors {
            let manifestURL = try parseLocation(manifest)
            var transport = try (transport ?? TransportKind.defaultKind(for: manifestURL)).make(
                trust: tlsOptions.trust()
            )
            if !mirror.isEmpty {
                transport = MirroredTransport(mirrors: try mirror.map(parseLocation), transport: transport)
            }
            let timeouts = manifestOptions.manifestTimeouts
            let updater = storeOptions.makeUpdater(
                transport: transport,
                unarchiver: try unarchiver.make(),
                timeouts: manifestOptions.downloadTimeouts,
                maxConcurrentPackages: concurrency,
                maxPackageBytes: maxPackageBytes,
                quickCheckInterval: TimeInterval(checkInterval),
                network: network
            )
            let source: any ManifestSource
            switch format {
            case .native:
                source = try manifestOptions.signedSource(
                    url: manifestURL,
                    transport: transport,
                    store: storeOptions,
                    appVersion: appVersion
                )
            case .patchinfo:
                source = PatchInfoManifestSource(url: manifestURL, transport: transport, packageID: patchID)
            case .patchlist:
                source = SignedPatchListManifestSource(
                    url: manifestURL,
                    transport: transport,
                    verifier: CryptoVerifier(),
                    trustedKeys: try readPublicKeys(rsaKey).map { PublicKey(scheme: .rsaPKCS1Raw, pem: $0.pem) },
                    timeouts: timeouts
                )
            case .offline:
                source = OfflinePackageManifestSource(
                    url: manifestURL,
                    transport: transport,
                    app: .init(appCode: appCode ?? "", appVersion: appVersion ?? "", platform: platform),
                    snapshot: { try await updater.currentSnapshot() },
                    timeouts: timeouts
                )
            }
            let display = SyncProgressDisplay()
            let events = updater.events()
            let shown = quiet ? nil : Task { await display.run(events) }
            let report: SyncReport
            do {
                report = try await updater.sync(from: source)
            } catch {
                shown?.cancel()
                _ = await shown?.value
                display.finish()
                throw error
            }
            shown?.cancel()
            _ = await shown?.value
            display.finish()
            Self.printOutcomes(report.packages)
            if let refused = report.refusedRollout {
                printNote(
                    "hot: warning: the rollout step served with the manifest was refused (\(refused.code)): \(refused.message); the release manifest's versions apply"
                )
            }
            if let timings { try writeTimings(report, to: timings) }
            if report.packages.contains(where: { !$0.succeeded }) { throw ExitCode(1) }
        }
    }

    /// Prints a line per package, and each failure or refused delta on standard error. One
    /// write for every line, built as bytes from outcomes read in place: a check that finds ten
    /// thousand packages unchanged prints them in one go, with no string or copy per package.
    static func printOutcomes(_ packages: [SyncReport.PackageOutcome]) {
        var lines: [UInt8] = []
        lines.reserveCapacity(packages.count * 32)
        packages.withUnsafeBufferPointer { outcomes in
            for index in outcomes.indices {
                let version = outcomes[index].activeVersion ?? "-"
                if outcomes[index].error == nil, outcomes[index].delta == nil, !outcomes[index].isWaitingForNetwork {
                    var (id, change, version) = (outcomes[index].id, outcomes[index].change.description, version)
                    id.withUTF8 { lines.append(contentsOf: $0) }
                    lines.append(0x09)
                    change.withUTF8 { lines.append(contentsOf: $0) }
                    lines.append(contentsOf: [0x09, 0x6F, 0x6B, 0x09])  // "\tok\t"
                    version.withUTF8 { lines.append(contentsOf: $0) }
                    lines.append(0x0A)
                    continue
                }
                let outcome = outcomes[index]
                if outcome.isWaitingForNetwork {
                    lines += "\(outcome.id)\t\(outcome.change)\twaiting\t\(version)\tfor an unmetered network\n".utf8
                } else if let error = outcome.error {
                    lines += "\(outcome.id)\t\(outcome.change)\tfailed\t\(version)\n".utf8
                    printError(error.description)
                } else if let delta = outcome.delta {
                    // A fifth column when a delta was tried: used, or refused and why.
                    if let fallback = delta.fallback {
                        lines +=
                            "\(outcome.id)\t\(outcome.change)\tok\t\(version)\tdelta from \(delta.baseVersion) refused, full package\n"
                            .utf8
                        printNote(
                            "\(outcome.id): the delta from \(delta.baseVersion) was refused: \(fallback.description)"
                        )
                    } else {
                        lines +=
                            "\(outcome.id)\t\(outcome.change)\tok\t\(version)\tdelta from \(delta.baseVersion), \(delta.bytes) bytes\n"
                            .utf8
                    }
                }
            }
        }
        lines.withUnsafeMutableBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            FileHandle.standardOutput.write(Data(bytesNoCopy: base, count: bytes.count, deallocator: .none))
        }
    }

    /// Writes the phases of `report` as JSON: `{"manifestSeconds": …, "packages": [{"id": …,
    /// "downloadSeconds": …, "unpackSeconds": …, "adoptSeconds": …, "commitSeconds": …}]}`.
    private func writeTimings(_ report: SyncReport, to path: String) throws {
        struct Timed: Encodable {
            var id: String
            var phases: InstallPhases
            func encode(to encoder: any Encoder) throws {
                try phases.encode(to: encoder)
                var container = encoder.container(keyedBy: Key.self)
                try container.encode(id, forKey: .id)
            }
            enum Key: String, CodingKey { case id }
        }
        struct Document: Encodable {
            var manifestSeconds: Double?
            var packages: [Timed]
        }
        let document = Document(
            manifestSeconds: report.manifestSeconds,
            packages: report.packages.compactMap { outcome in outcome.phases.map { Timed(id: outcome.id, phases: $0) } }
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try encoder.encode(document).write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}
