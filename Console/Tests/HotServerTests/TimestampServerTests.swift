import Foundation
import HotCore
import HotManifest
import HotServerKit
import HotTestServers
import HotTesting
import HotVerify
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hot-server timestamp`, the timestamp role's machine, on a repository made by `hot pack` and
/// `hot sign --timestamp-key`, with a client (`hot sync`) reading it.
@Suite("hot-server timestamp")
struct TimestampServerTests {
    /// A repository whose release key delegates the timestamp to a key of its own.
    struct Repository {
        let app: PublishedApp
        let timestampKey: URL
        var timestampPublic: String { timestampKey.deletingPathExtension().path + ".pub" }
        var timestampFile: URL { app.repo.appendingPathComponent(TimestampPart.fileName) }

        static func make() async throws -> Repository {
            let app = try await PublishedApp.make()
            let key = app.directory.appendingPathComponent("timestamp.pem")
            try await hot(["keygen", "--private", key.path, "--public", key.deletingPathExtension().path + ".pub"])
            return Repository(app: app, timestampKey: key)
        }

        /// Packs `version` of `app`, releases it, and signs with the release key, declaring
        /// the timestamp role: the timestamp is left to the role's machine.
        func release(_ version: String) async throws {
            let tree = app.directory.appendingPathComponent("app-\(version)")
            try FileManager.default.createDirectory(at: tree, withIntermediateDirectories: true)
            try Data("print(\(version))".utf8).write(to: tree.appendingPathComponent("main.js"))
            try await hot(["pack", tree.path, "--id", "app", "--version", version, "--repo", app.repo.path])
            try await hot([
                "sign", "--repo", app.repo.path, "--key", app.privateKey.path, "--expires", "30d",
                "--timestamp-key", timestampPublic,
            ])
        }

        /// `hot-server timestamp --every 1` with the role's key and `options`, its output going
        /// to the log returned; the caller stops it.
        func startSchedule(_ options: [String]) throws -> (ChildProcess, URL) {
            let log = app.directory.appendingPathComponent("timestamp.log")
            let server = try LoneServer.start(
                ["timestamp", "--repo", app.repo.path, "--key", timestampKey.path, "--every", "1"] + options,
                standardOutput: .file(log.path, append: false),
                standardError: .standardOutput
            )
            return (server, log)
        }

        /// The served timestamp's bytes and part, or nil while there is none.
        func served() throws -> (bytes: Data, part: TimestampPart)? {
            guard let bytes = try? Data(contentsOf: timestampFile) else { return nil }
            return (bytes, try TimestampPart.decode(try SignedEnvelope.parse(bytes).signed))
        }

        /// `hot sync` of a client of the repository: its exit status, the version of `app` it
        /// reports, and what it printed on stderr.
        func sync(_ store: URL) async throws -> (status: Int32, version: String, stderr: String) {
            let output = try await Subprocess.run(
                try executable("hot"),
                [
                    "sync", "--manifest", app.repo.appendingPathComponent("manifest.json").absoluteString, "--root",
                    store.path, "--trust", app.publicKey.path,
                ]
            )
            // `app<TAB>change<TAB>outcome<TAB>version`
            var version = ""
            for line in output.stdout.split(separator: "\n") {
                let fields = line.split(separator: "\t").map(String.init)
                if fields.count == 4, fields[0] == "app" { version = fields[3] }
            }
            return (output.status, version, output.stderr)
        }
    }

    /// Waits (two minutes at most) until the served timestamp differs from `previous` and
    /// satisfies `condition`.
    static func nextTimestamp(
        of repository: Repository,
        after previous: Data?,
        where condition: (TimestampPart) -> Bool = { _ in true }
    ) async throws -> (bytes: Data, part: TimestampPart) {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            if let served = try repository.served(), served.bytes != previous, condition(served.part) {
                return served
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record(
            "no new timestamp within two minutes (the last: \(String(describing: try repository.served()?.part)))"
        )
        throw HotUpdateError(.timedOut, "no new timestamp")
    }

    @Test(
        "--every signs the timestamp again and again with the role's key; a release reaches clients with the next round"
    )
    func schedule() async throws {
        let repository = try await Repository.make()
        try await repository.release("1")
        // The role is declared and nobody has signed a timestamp: clients refuse the manifest.
        #expect(try repository.served() == nil)
        let store = try scratch("store")
        let refused = try await repository.sync(store)
        #expect(refused.status != 0 && refused.version.isEmpty)
        #expect(refused.stderr.contains("timestamp"), "\(refused.stderr)")

        let (server, log) = try repository.startSchedule(["--expires", "1h"])
        defer {
            server.kill()
            server.waitUntilExit()
        }

        // Two rounds, each a new signature naming manifest version 1, an hour long.
        let first = try await Self.nextTimestamp(of: repository, after: nil)
        let second = try await Self.nextTimestamp(of: repository, after: first.bytes)
        for part in [first.part, second.part] {
            #expect(part.manifest.version == 1)
            #expect(abs(part.expires.timeIntervalSince(part.signedAt) - 3_600) <= 1)
        }
        #expect(second.part.signedAt >= first.part.signedAt)
        try await hot(["verify", "--repo", repository.app.repo.path, "--trust", repository.app.publicKey.path])
        #expect(try await repository.sync(store).version == "1")

        // Version 2, signed by the release key: the timestamp names version 1 until the next
        // round, then version 2, and the client follows.
        try await repository.release("2")
        let named = try await Self.nextTimestamp(of: repository, after: second.bytes) { $0.manifest.version == 2 }
        #expect(named.part.manifest.version == 2)
        #expect(try await repository.sync(store).version == "2")

        // SIGTERM stops the schedule.
        server.signal(SIGTERM)
        #expect(await server.exit() == .signalled(SIGTERM))
        let printed = try String(contentsOf: log, encoding: .utf8)
        #expect(printed.contains("(root): signed timestamp.json naming manifest version 1"), "\(printed)")
        #expect(printed.contains("(root): signed timestamp.json naming manifest version 2"), "\(printed)")
    }

    @Test("a round that fails is reported and the schedule goes on: an unsigned manifest, then a signed one")
    func failedRoundRetries() async throws {
        let repository = try await Repository.make()
        try await repository.release("1")
        // An edit leaves the manifest unsigned: no timestamp can name it.
        try await hot(["disable", "--repo", repository.app.repo.path, "--", "app"])
        let (server, log) = try repository.startSchedule([])
        defer {
            server.kill()
            server.waitUntilExit()
        }
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline,
            !((try? String(contentsOf: log, encoding: .utf8)) ?? "").contains("(root): failed:")
        {
            try await Task.sleep(for: .milliseconds(100))
        }
        let failure = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        #expect(failure.contains("(root): failed: sign manifest.json with its release keys first"), "\(failure)")
        #expect(failure.contains("hot sign"), "the failure says what to do: \(failure)")
        #expect(server.isRunning)
        #expect(try repository.served() == nil)

        // Signed now: a later round signs the timestamp, with the default lifetime of a day.
        try await hot([
            "sign", "--repo", repository.app.repo.path, "--key", repository.app.privateKey.path, "--expires", "30d",
        ])
        let signed = try await Self.nextTimestamp(of: repository, after: nil)
        #expect(abs(signed.part.expires.timeIntervalSince(signed.part.signedAt) - 86_400) <= 1)
        #expect(server.isRunning)
    }

    @Test(
        "one round: a key the release keys did not delegate signs nothing and exits 1; options that cannot work are refused"
    )
    func refusals() async throws {
        let repository = try await Repository.make()
        try await repository.release("1")
        let base = ["timestamp", "--repo", repository.app.repo.path]

        // The release key is not the timestamp role's.
        let wrongKey = try await LoneServer.run(base + ["--key", repository.app.privateKey.path])
        #expect(wrongKey.status == 1)
        #expect(wrongKey.stderr.contains("(root): failed:"), "\(wrongKey.stderr)")
        #expect(wrongKey.stderr.contains("valid signatures by the release manifest's timestamp role's keys"))
        #expect(try repository.served() == nil)

        // The role's key, once: signed, exit 0.
        let once = try await LoneServer.run(base + ["--key", repository.timestampKey.path])
        #expect(once.status == 0, "\(once.stderr)")
        #expect(once.stdout.contains("(root): signed timestamp.json naming manifest version 1"))
        let signed = try #require(try repository.served())

        let refused: [([String], String)] = [
            (["--every", "3600", "--expires", "1h"], "only after they expire"),
            (["--every", "60", "--expires", "2027-01-31T00:00:00Z"], "signs timestamps for a length"),
            (["--every", "0"], "--every takes a positive number"),
            (["--rollout-role"], "--rollout-role and --timestamp-key are for changes"),
        ]
        for (options, reason) in refused {
            let output = try await LoneServer.run(base + ["--key", repository.timestampKey.path] + options)
            #expect(output.status != 0, "\(options)")
            #expect(output.stderr.contains(reason), "\(options): \(output.stderr)")
        }
        // Nothing was signed by the refused runs.
        #expect(try repository.served()?.bytes == signed.bytes)
    }

    @Test(
        "with --timestamp-key, a change the console or the rollout command makes signs its channel's timestamp too; timestamp keys alone sign no change"
    )
    func changesSignTheTimestamp() async throws {
        let repository = try await Repository.make()
        try await repository.release("1")
        try await repository.release("2")
        let publisher = try PublisherRepository(
            directory: repository.app.repo,
            keys: [repository.app.privateKey.path],
            timestampKeys: [repository.timestampKey.path]
        )
        try await publisher.apply(.rollback(to: nil), package: "app", channel: "")
        let served = try #require(try repository.served())
        let manifest = try Data(contentsOf: repository.app.repo.appendingPathComponent("manifest.json"))
        #expect(try served.part.names(manifest, verifier: CryptoVerifier()))
        let store = try scratch("store")
        #expect(try await repository.sync(store).version == "1")

        let timestampMachine = try PublisherRepository(
            directory: repository.app.repo,
            keys: [repository.timestampKey.path],
            role: .timestamp
        )
        await #expect(throws: HotUpdateError.self) {
            try await timestampMachine.apply(.release(version: "2", rollout: nil), package: "app", channel: "")
        }
        #expect(try repository.served()?.bytes == served.bytes)
        let outcomes = try await timestampMachine.signTimestamps(expires: "2h")
        #expect(outcomes.map(\.channel) == [""] && outcomes.allSatisfy { $0.signed != nil }, "\(outcomes)")
        #expect(try repository.served()?.bytes != served.bytes)
    }
}
