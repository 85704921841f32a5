// One launch of an app whose code is the package `app`, guarded by a launch trial: a version
// that crashes before confirming its launch is rolled back and blocked by the next launch.
//
//     LaunchGuard --manifest URL --root DIR --trust PUBLIC_KEY [--stop-before-confirm] [--telemetry URL]
//
// Each run: begin the launch, print `running VERSION` (or `running bundle`), abort when the
// version's tree holds a file named `crash` (hang when it holds `hang`), else confirm the launch, sync (a new version
// takes effect at the next launch) and print one line per package. With --telemetry, the
// engine's events go to that collector; they are kept under the store root until sent, so
// those of a launch that crashes are sent by the next one, and each run flushes before it exits.

import ArgumentParser
import Foundation
import HotUpdate
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The example's command line.
@main
struct LaunchGuardCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "LaunchGuard",
        abstract: "One launch of an app whose code is the guarded package `app`.",
        discussion: """
            Prints `running VERSION` for the version of `app` the launch loads (`running bundle` \
            when none is installed). A version whose tree holds a file named `crash` aborts the \
            process before the launch is confirmed: the next run rolls it back, blocks it and \
            runs the version before it. Otherwise the launch is confirmed and the store synced \
            from the manifest; a new version takes effect at the next run.
            """
    )

    @Option(help: ArgumentHelp("The signed manifest's URL (http, https or file).", valueName: "url"))
    var manifest: String

    @Option(help: ArgumentHelp("The store's directory.", valueName: "dir"))
    var root: String

    @Option(help: ArgumentHelp("A public key (PEM) the manifest's signature must come from.", valueName: "key.pub"))
    var trust: [String]

    @Flag(
        help:
            "Stop (SIGSTOP) after printing the version it runs and before confirming, as a debugger or a suspended app would, until continued."
    )
    var stopBeforeConfirm = false

    @Option(
        help: ArgumentHelp(
            "What this launch runs while another live launch tries a new version: joinTrial (that version) or confirmedVersion (the last confirmed one).",
            valueName: "policy"
        )
    )
    var concurrentLaunch = "joinTrial"

    @Option(
        help: ArgumentHelp(
            "Seconds a launch has to confirm its trial (measured by a monotonic clock, whatever the wall clock does); none by default.",
            valueName: "seconds"
        )
    )
    var trialTimeout: Double?

    @Option(
        help: ArgumentHelp(
            "A telemetry collector's URL (hot-server collect) to report checks, downloads, installs, confirmations and rollbacks to.",
            valueName: "url"
        )
    )
    var telemetry: String?

    @Option(help: ArgumentHelp("The channel this app follows (the repository's channels/NAME).", valueName: "name"))
    var channel: String?

    func run() async throws {
        do {
            try await launch()
        } catch {
            FileHandle.standardError.write(Data("LaunchGuard: error: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }

    /// Writes a line to standard output at once: a process about to abort keeps nothing buffered.
    func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    func launch() async throws {
        guard let manifestURL = URL(string: manifest), manifestURL.scheme != nil else {
            throw ValidationError("'\(manifest)' is not a URL")
        }
        if let trialTimeout, !(trialTimeout > 0) { throw ValidationError("--trial-timeout must be positive") }
        guard [LaunchPolicy.ConcurrentLaunch.joinTrial, .confirmedVersion].map(\.rawValue).contains(concurrentLaunch)
        else {
            throw ValidationError("--concurrent-launch is joinTrial or confirmedVersion, not '\(concurrentLaunch)'")
        }
        let rootURL = URL(fileURLWithPath: root, isDirectory: true)
        let keys = try trust.map { try CryptoVerifier.publicKey(pem: String(contentsOfFile: $0, encoding: .utf8)) }
        let transport: any Transport = manifestURL.isFileURL ? FileTransport() : SchemeRoutingTransport.platformHTTP()
        let appVersion = "1.0"
        var reporter: HTTPTelemetryReporter?
        if let telemetry {
            guard let url = URL(string: telemetry), ["http", "https"].contains(url.scheme ?? "") else {
                throw ValidationError("--telemetry takes an http or https URL, not '\(telemetry)'")
            }
            reporter = try HTTPTelemetryReporter(
                url: url,
                transport: SchemeRoutingTransport.platformHTTP(),
                root: rootURL,
                options: .init(channel: channel, appVersion: appVersion)
            )
        }
        // Whatever happens next, what was reported is sent before the process exits (a
        // crash sends nothing; the next launch does).
        do {
            try await run(
                manifestURL: manifestURL,
                rootURL: rootURL,
                keys: keys,
                transport: transport,
                reporter: reporter
            )
        } catch {
            await reporter?.flush()
            throw error
        }
        await reporter?.flush()
    }

    func run(
        manifestURL: URL,
        rootURL: URL,
        keys: [PublicKey],
        transport: any Transport,
        reporter: HTTPTelemetryReporter?
    ) async throws {
        let appVersion = "1.0"
        var logger = Logger(label: "LaunchGuard")
        logger.logLevel = .critical
        // The standard parts under the store root, with a trial for the package `app`.
        var configuration = UpdaterConfiguration.standard(
            root: rootURL,
            transport: transport,
            launch: LaunchPolicy(
                guarded: ["app"],
                trialTimeout: trialTimeout,
                concurrentLaunch: LaunchPolicy.ConcurrentLaunch(rawValue: concurrentLaunch)
            ),
            logger: logger
        )
        configuration.telemetry = reporter
        let updater = Updater(configuration: configuration)

        // 1. Begin the launch before loading any code: an unconfirmed trial of an earlier
        //    launch is rolled back and blocked here; a version waiting is made active.
        let launch = try await updater.launch.begin()
        for rolled in launch.rolledBack {
            say("rolled back \(rolled.id) \(rolled.version) to \(rolled.restoredVersion ?? "the bundle"): blocked")
        }
        let app = launch.package("app")
        say("running \(app?.version ?? "bundle")")
        // Another process held the store past the launch's deadline (a second): this launch
        // runs what was last committed, and the trial waits for the next launch. Nothing to
        // confirm, and a check would wait for the same holder.
        if let deferred = launch.deferred {
            say("trial deferred: \(deferred.reason)")
            return
        }

        // 2. Load the app. This one "crashes" when its tree says so, before confirming.
        if let directory = app?.directory,
            FileManager.default.fileExists(atPath: directory.appendingPathComponent("crash").path)
        {
            abort()
        }
        // …or freezes, when it holds `hang`, until something (a watchdog) kills it.
        if let directory = app?.directory,
            FileManager.default.fileExists(atPath: directory.appendingPathComponent("hang").path)
        {
            while true { try await Task.sleep(for: .seconds(3600)) }
        }

        if stopBeforeConfirm { _ = raise(SIGSTOP) }

        // 3. It runs: confirm this launch, and only this one.
        try await updater.launch.confirm(launch.token)

        // 4. Check for updates; what is installed now waits for the next launch.
        let source = SignedManifestSource(
            url: manifestURL,
            transport: transport,
            verifier: CryptoVerifier(),
            trust: .signed(by: keys),
            storeRoot: configuration.root,
            // The rollout bucket comes from the per-install random id.
            context: ClientContext(
                appVersion: appVersion,
                clientID: try TelemetryEvent.ClientID.load(root: configuration.root),
                channel: channel
            ),
            logger: logger
        )
        let report = try await updater.sync(from: source)
        let waiting = Dictionary(
            try await updater.launch.waitingVersions().map { ($0.id, $0.version) },
            uniquingKeysWith: { first, _ in first }
        )
        for outcome in report.packages {
            var line = "\(outcome.id): \(outcome.change), active \(outcome.activeVersion ?? "bundle")"
            if let version = waiting[outcome.id] { line += ", \(version) waits for the next launch" }
            if let error = outcome.error { line += ", failed: \(error)" }
            say(line)
        }
    }
}
