import ArgumentParser
import Foundation
import HotCore
import HotPublish
import HotServerKit
import HotTransport
import Hummingbird
import Logging

/// `hot-server`: the publisher's server.
@main
struct HotServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hot-server",
        abstract: "Collect telemetry, report the health of each version, serve the release console, advance rollouts.",
        subcommands: [Collect.self, Report.self, ConsoleCommand.self, Rollout.self, TimestampCommand.self]
    )
}

/// Options every subcommand that reads the database shares.
struct DatabaseOptions: ParsableArguments {
    @Option(help: ArgumentHelp("sqlite:PATH or postgres://user[:password]@host[:port]/database.", valueName: "url"))
    var db: String

    func open() async throws -> any TelemetryDatabase {
        var logger = Logger(label: "hot-server.db")
        logger.logLevel = .error
        return try await openTelemetryDatabase(db, logger: logger)
    }
}

/// Options of the commands that change the repository.
struct RepositoryOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The repository: a directory as `hot` writes it, or s3://BUCKET/PREFIX where it is published.",
            valueName: "dir|s3://…"
        )
    )
    var repo: String

    @Option(
        help: ArgumentHelp(
            "With s3://: the working copy of its manifests (a new temporary one by default).",
            valueName: "dir"
        )
    )
    var work: String?

    @Option(help: "With s3://: the S3-compatible endpoint (hot publish --endpoint).")
    var endpoint: String?

    @Option(help: "With s3://: the region (hot publish --region).")
    var region: String?

    @Option(help: "With s3://: path or virtual addressing (hot publish --addressing).")
    var addressing: String?

    @Option(help: "With s3://: the CA bundle an https endpoint is checked with (hot publish --ca-file).")
    var caFile: String?

    @Option(help: "With s3://: the canned ACL of each manifest published (hot publish --acl).")
    var acl: String?

    @Option(
        name: .customLong("key"),
        help: ArgumentHelp(
            "A private key each change is signed with: a PEM file or a pkcs11: URI (repeatable).",
            valueName: "key"
        )
    )
    var keys: [String] = []

    @Option(
        help:
            "How long each signed manifest is valid (hot sign --expires, 30d by default); with `timestamp`, each timestamp (hot timestamp --expires, a day by default)."
    )
    var expires: String?

    @Flag(help: "The --key files are rollout role keys: steps are signed with hot rollout.")
    var rolloutRole = false

    @Option(
        name: .customLong("timestamp-key"),
        help: ArgumentHelp(
            "A timestamp role's private key (repeatable): each change also signs its channel's timestamp, so clients see it at once.",
            valueName: "key.pem"
        )
    )
    var timestampKeys: [String] = []

    func open(role: PublisherRepository.Role? = nil) throws -> PublisherRepository {
        var directory = URL(fileURLWithPath: repo, isDirectory: true)
        var remote: S3Remote?
        if repo.hasPrefix("s3://") {
            let endpointURL = try endpoint.map { text -> URL in
                guard let url = URL(string: text), url.scheme == "http" || url.scheme == "https" else {
                    throw ValidationError("--endpoint \(text) is not an http or https URL")
                }
                return url
            }
            if let addressing, !["path", "virtual"].contains(addressing) {
                throw ValidationError("--addressing takes path or virtual, not '\(addressing)'")
            }
            remote = S3Remote(
                location: repo,
                endpoint: endpointURL,
                region: region,
                addressing: addressing,
                trust: caFile.map {
                    TLSTrust(
                        authorities: .only(bundle: URL(fileURLWithPath: $0).standardizedFileURL.path),
                        pins: Set<SPKIPin>()
                    )
                } ?? .system,
                acl: acl
            )
            directory =
                work.map { URL(fileURLWithPath: $0, isDirectory: true) }
                ?? FileManager.default.temporaryDirectory.appendingPathComponent("hot-server-\(UUID().uuidString)")
        } else if work != nil || endpoint != nil || region != nil || addressing != nil || caFile != nil || acl != nil {
            throw ValidationError(
                "--work, --endpoint, --region, --addressing, --ca-file and --acl go with --repo s3://…"
            )
        }
        return try PublisherRepository(
            directory: directory,
            keys: keys,
            expires: expires ?? "30d",
            role: role ?? (rolloutRole ? .rollout : .release),
            remote: remote,
            timestampKeys: timestampKeys
        )
    }
}

/// The collector's bounds, shared by `collect` and `console`.
struct CollectorOptions: ParsableArguments {
    @Option(help: "Batches a second each client may send from one network, sustained.")
    var rate = 2.0

    @Option(help: "Batches a client may send at once from one network.")
    var burst = 20.0

    @Option(help: "Batches stored at once; past it the collector answers 503.")
    var maxInFlight = 64

    @Option(
        help: ArgumentHelp(
            "The key every post must carry (X-Hot-Api-Key: KEY or Authorization: Bearer KEY); none by default.",
            valueName: "key"
        )
    )
    var apiKey: String?

    @Option(help: "New client ids enrolled per source network (IPv4 /24, IPv6 /48) per --enrolment-window.")
    var enrolmentsPerNetwork = 100

    @Option(help: ArgumentHelp("The window of --enrolments-per-network.", valueName: "seconds"))
    var enrolmentWindow = 3600.0

    @Option(help: ArgumentHelp("Bytes of batches one source network may store a UTC day.", valueName: "bytes"))
    var networkBudget: Int64 = 256 * 1024 * 1024

    @Option(help: "Connections open at once; past it new ones are closed.")
    var maxConnections = 1024

    @Option(help: "Connections open at once from one source network.")
    var maxConnectionsPerNetwork = 128

    @Option(help: ArgumentHelp("How long a connection may wait for a request.", valueName: "seconds"))
    var idleTimeout = 30.0

    @Option(help: ArgumentHelp("How long a request may go without a byte of its body.", valueName: "seconds"))
    var readTimeout = 10.0

    @Option(help: ArgumentHelp("How long a request has, from its head to its last byte.", valueName: "seconds"))
    var requestDeadline = 30.0

    func validate() throws {
        guard rate > 0, burst >= 1, maxInFlight > 0, enrolmentsPerNetwork >= 0, enrolmentWindow > 0,
            networkBudget > 0, maxConnections > 0, maxConnectionsPerNetwork > 0, idleTimeout > 0, readTimeout > 0,
            requestDeadline > 0
        else {
            throw ValidationError("the collector's rates, limits and timeouts must be positive")
        }
        if let apiKey, apiKey.count < 16 {
            throw ValidationError("--api-key must be 16 characters at least")
        }
    }

    func collector(_ database: any TelemetryDatabase) -> Collector {
        var intake = IntakePolicy()
        intake.enrolmentsPerNetwork = enrolmentsPerNetwork
        intake.enrolmentWindow = enrolmentWindow
        intake.bytesPerNetworkPerDay = networkBudget
        return Collector(
            database: database,
            limiter: ClientRateLimiter(rate: rate, burst: burst),
            maxInFlight: maxInFlight,
            intake: intake,
            apiKey: apiKey
        )
    }

    var connections: ConnectionLimits {
        var limits = ConnectionLimits()
        limits.maxConnections = maxConnections
        limits.maxConnectionsPerNetwork = maxConnectionsPerNetwork
        limits.idleTimeout = idleTimeout
        limits.readTimeout = readTimeout
        limits.requestDeadline = requestDeadline
        return limits
    }
}

func quietLogger(_ label: String) -> Logger {
    var logger = Logger(label: label)
    logger.logLevel = .warning
    return logger
}

/// Prints errors as one line and exits 1.
func reporting(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as ValidationError {
        throw error
    } catch let error as ExitCode {
        throw error
    } catch {
        FileHandle.standardError.write(Data("hot-server: error: \(error)\n".utf8))
        throw ExitCode(1)
    }
}

struct Collect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Receive the batches HTTPTelemetryReporter posts (POST /collect) and store them.",
        discussion: """
            Each batch is checked (size, strict JSON, schema, event kinds and fields, client id); \
            a bad batch is answered 4xx with the reason and nothing of it is stored; a bad event \
            is left out and listed in a 200 answer, the others stored. Device dates are kept \
            beside the collector's receipt time. A batch sent twice is stored once (by its id). \
            Each client may send --rate batches a second from one network (bursts of --burst); \
            each network (IPv4 /24, IPv6 /48) stores --network-budget bytes a day and enrols \
            --enrolments-per-network new client ids per --enrolment-window; only ids enrolled \
            before a release started count for its rollout. Connections are capped and timed \
            out; past --max-in-flight batches being stored, requests are answered 503 at once.
            """
    )

    @Option(help: ArgumentHelp("Where to listen; port 0 picks one (printed).", valueName: "host:port"))
    var listen = "127.0.0.1:8787"

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var collector: CollectorOptions

    func run() async throws {
        try await reporting {
            let db = try await database.open()
            let router = Router()
            collector.collector(db).addRoutes(to: router)
            try await serve(
                router: router,
                listen: listen,
                logger: quietLogger("hot-server"),
                connections: collector.connections
            )
            await db.close()
        }
    }
}

struct Report: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The health per channel, package and version.",
        discussion: """
            Devices that checked, downloaded (full or delta, with bytes), installed, confirmed a \
            launch, rolled back and blocked; errors by code; the trial failure rate, rollbacks / \
            (confirmed + rolled back), with its 95% Wilson interval; adoption over time (--json).
            """
    )

    @OptionGroup var database: DatabaseOptions

    @Flag(
        help: "Print JSON: {\"versions\": [{\"package\", \"version\", \"channel\", \"devices\", …}], \"checks\": […]}."
    )
    var json = false

    func run() async throws {
        try await reporting {
            let db = try await database.open()
            let report = try await HealthReport.load(from: db)
            await db.close()
            if json {
                FileHandle.standardOutput.write(try report.json() + Data("\n".utf8))
            } else {
                print(report.text())
            }
        }
    }
}

struct ConsoleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "console",
        abstract: "Serve the release console (and the collector) in the browser.",
        discussion: """
            The page shows each package, version and channel with its rollout and state, an \
            adoption curve and the failure rate with its interval, drawn as SVG on the server. \
            Actions (release, roll back, disable, enable, set the rollout) are signed with the \
            --key files and published to --repo through `hot`; each is recorded and shown. They \
            need the token printed at start (open /login?token=TOKEN) or --token-file's; a \
            session ends --session-lifetime after login or --session-idle after its last use. \
            It binds 127.0.0.1 by default, and answers only requests whose Host names the \
            listen address (and localhost for a loopback one) or an --allowed-host: others \
            get 421, so a page of another name resolving to it (DNS rebinding) reaches nothing.
            """
    )

    @Option(help: ArgumentHelp("Where to listen; port 0 picks one (printed).", valueName: "host:port"))
    var listen = "127.0.0.1:8788"

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var repository: RepositoryOptions
    @OptionGroup var collector: CollectorOptions

    @Option(
        help: ArgumentHelp(
            "A file holding the token actions need; a random one, printed, by default.",
            valueName: "path"
        )
    )
    var tokenFile: String?

    @Option(
        help: ArgumentHelp("Run `rollout advance` every this many seconds; never by default.", valueName: "seconds")
    )
    var advanceEvery: Double?

    @Option(
        help: ArgumentHelp(
            "A host name requests may carry in Host besides the listen address (repeatable); others get 421.",
            valueName: "name"
        )
    )
    var allowedHost: [String] = []

    @Option(help: ArgumentHelp("How long a session lasts after login.", valueName: "seconds"))
    var sessionLifetime = ConsoleSessions.defaultLifetime

    @Option(help: ArgumentHelp("How long a session lasts after its last use.", valueName: "seconds"))
    var sessionIdle = ConsoleSessions.defaultIdleLifetime

    func validate() throws {
        guard sessionLifetime >= 1, sessionIdle >= 1 else {
            throw ValidationError("--session-lifetime and --session-idle take at least one second")
        }
        for host in allowedHost where AllowedHosts(listenHost: "0.0.0.0", extra: [host]).names.isEmpty {
            throw ValidationError("--allowed-host takes a host name, not '\(host)'")
        }
    }

    func run() async throws {
        try await reporting {
            let repo = try repository.open()
            let db = try await database.open()
            let token: String
            if let tokenFile {
                token = try String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(
                    in: .whitespacesAndNewlines
                )
                guard token.count >= 16 else {
                    throw ValidationError("the token in \(tokenFile) is shorter than 16 characters")
                }
            } else {
                token = ReleaseConsole.randomToken()
                FileHandle.standardOutput.write(Data("token \(token)\n".utf8))
            }
            let listenHost = listen.split(separator: ":", omittingEmptySubsequences: false).dropLast()
                .joined(separator: ":")
            let console = ReleaseConsole(
                repository: repo,
                database: db,
                token: token,
                allowedHosts: AllowedHosts(listenHost: listenHost, extra: allowedHost),
                sessions: ConsoleSessions(lifetime: sessionLifetime, idleLifetime: sessionIdle)
            )
            let router = Router()
            collector.collector(db).addRoutes(to: router)
            console.addRoutes(to: router)
            var scheduler: Task<Void, Never>?
            if let advanceEvery, advanceEvery > 0 {
                scheduler = Task {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(advanceEvery))
                        _ = try? await RolloutAdvance(repository: repo, database: db, policy: RolloutPolicy()).run()
                    }
                }
            }
            try await serve(
                router: router,
                listen: listen,
                logger: quietLogger("hot-server"),
                connections: collector.connections
            )
            scheduler?.cancel()
            await db.close()
        }
    }
}

struct Rollout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Health-gated rollouts.",
        subcommands: [Advance.self]
    )

    struct Advance: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Advance, hold or halt each package's current release once (for cron or CI).",
            discussion: """
                A release moves through --steps (1,5,25,50,100). Only trials of established \
                devices count: client ids the collector enrolled before the release started. It \
                advances when the upper bound of their failure rate's 95% interval is under \
                --threshold, after --min-trials trial launches and --min-step-seconds at its step; \
                it is rolled back when the lower bound is over --threshold, or over the previous \
                version's rate by --margin; otherwise it holds. It holds, and says so, while new \
                client ids outnumber established ones (a burst). A halt never disables a package: \
                with no earlier release it holds. Each change signs and publishes the manifest \
                and is recorded. \
                With --rollout-role the keys are rollout role keys (hot sign --rollout-key): each \
                step is signed with hot rollout, and can set percentages and roll back only.
                """
        )

        @OptionGroup var database: DatabaseOptions
        @OptionGroup var repository: RepositoryOptions

        @Option(help: "The rollout percentages, in order.")
        var steps = "1,5,25,50,100"
        @Option(help: "Trial launches a step needs before a decision.")
        var minTrials = 10
        @Option(help: "Seconds a step is held at least.")
        var minStepSeconds = 3600.0
        @Option(help: "The highest acceptable failure rate (0-1).")
        var threshold = 0.05
        @Option(help: "How far over the previous version's rate the lower bound may be (0-1).")
        var margin = 0.02

        func run() async throws {
            try await reporting {
                var policy = RolloutPolicy()
                let parsed = steps.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
                guard !parsed.isEmpty, parsed.allSatisfy({ (1...100).contains($0) }), parsed == parsed.sorted() else {
                    throw ValidationError("--steps takes increasing percentages, such as 1,5,25,50,100")
                }
                policy.steps = parsed
                policy.minTrials = max(1, minTrials)
                policy.minStepTime = max(0, minStepSeconds)
                policy.threshold = threshold
                policy.margin = margin
                let repo = try repository.open()
                let db = try await database.open()
                let outcomes = try await RolloutAdvance(repository: repo, database: db, policy: policy).run()
                await db.close()
                for outcome in outcomes {
                    let channel = outcome.channel.isEmpty ? "" : " (\(outcome.channel))"
                    print(
                        "\(outcome.package) \(outcome.version)\(channel): \(outcome.decision)"
                            + (outcome.error.map { "; failed: \($0)" } ?? "")
                    )
                }
                if outcomes.contains(where: { $0.error != nil }) { throw ExitCode(1) }
            }
        }
    }
}

/// `hot-server timestamp`: the timestamp role's machine.
struct TimestampCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "timestamp",
        abstract: "Sign each channel's timestamp with the timestamp role's keys, once or every --every seconds.",
        discussion: """
            Clients fetch timestamp.json first and refuse one past its expiry, so a channel \
            whose release keys delegate the timestamp (hot sign --timestamp-key PUBLIC_KEY) needs \
            it signed again well within --expires (a day by default, never past the role's \
            bound). Each round signs the timestamp of every channel whose manifest is signed \
            (hot timestamp), naming the manifest as it is then, and publishes to --repo s3://… \
            when there is one. A channel that fails is reported, and the others are signed; with \
            --every the next round comes sooner after a failure (a minute at most). The --key \
            files are timestamp role keys: they sign no change, and nothing else is needed on \
            this machine. Without --every one round runs, and a failure exits 1.
            """
    )

    @OptionGroup var repository: RepositoryOptions

    @Option(help: ArgumentHelp("Sign again every this many seconds, until stopped.", valueName: "seconds"))
    var every: Double?

    func validate() throws {
        guard !repository.rolloutRole, repository.timestampKeys.isEmpty else {
            throw ValidationError(
                "timestamp signs with the timestamp role's --key files; --rollout-role and --timestamp-key are for changes"
            )
        }
        if let every {
            guard every > 0 else { throw ValidationError("--every takes a positive number of seconds") }
            let lifetime: Double
            do {
                lifetime = try TimestampSchedule.lifetime(of: repository.expires)
            } catch let error as HotUpdateError {
                throw ValidationError(error.message)
            }
            guard every < lifetime else {
                throw ValidationError(
                    "--every \(Int(every)) s re-signs timestamps that last \(Int(lifetime)) s only after they expire: give a shorter --every or a longer --expires"
                )
            }
        }
    }

    func run() async throws {
        try await reporting {
            let repo = try repository.open(role: .timestamp)
            guard let every else {
                if try await round(repo) { return }
                throw ExitCode(1)
            }
            while true {
                let succeeded = (try? await round(repo)) ?? false
                try await Task.sleep(for: .seconds(succeeded ? every : min(every, TimestampSchedule.retry)))
            }
        }
    }

    /// Signs every channel's timestamp once and prints one line each; whether all were signed.
    private func round(_ repo: PublisherRepository) async throws -> Bool {
        let now = ISO8601DateFormatter().string(from: Date())
        let outcomes: [PublisherRepository.TimestampOutcome]
        do {
            outcomes = try await repo.signTimestamps(expires: repository.expires)
        } catch {
            FileHandle.standardError.write(Data("\(now) failed: \(error)\n".utf8))
            throw error
        }
        if outcomes.isEmpty {
            FileHandle.standardError.write(Data("\(now) no signed manifest in the repository\n".utf8))
        }
        for outcome in outcomes {
            let channel = outcome.channel.isEmpty ? "(root)" : outcome.channel
            if let signed = outcome.signed {
                // Written at once, line by line: a log read while the schedule runs.
                FileHandle.standardOutput.write(Data("\(now) \(channel): \(signed)\n".utf8))
            } else {
                FileHandle.standardError.write(Data("\(now) \(channel): failed: \(outcome.error ?? "")\n".utf8))
            }
        }
        return !outcomes.isEmpty && outcomes.allSatisfy { $0.signed != nil }
    }
}
