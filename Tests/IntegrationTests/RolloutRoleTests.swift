import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import HotVerify
import Testing

/// The rollout role, over nginx on 127.0.0.1: the release keys delegate rollout steps to a
/// key that can change percentages and roll back to a release they listed, and the client
/// refuses every step that does more, keeping what it installed.
@Suite("The rollout role: what a rollout key can and cannot do")
struct RolloutRoleTests {
    /// A repository whose release manifest (version 1, signed by `release`) releases app 1
    /// then 2, lists 3 unreleased, and delegates rollout steps to `rollout`, valid an hour
    /// past its signing.
    struct Rig {
        let release: CryptoSigner
        let rollout: CryptoSigner
        let repository: SignedRepository
        let releaseBytes: Data
        let server: NginxServer

        var releaseSHA256: String {
            get throws {
                try CryptoVerifier().digest(of: SignedEnvelope.parse(releaseBytes).signed, using: .sha256).hex
            }
        }

        var url: URL { repository.url(on: server) }

        /// A client that trusts the release key and accepted the release manifest: app 2.
        func client() async throws -> SignedClient {
            let client = try SignedClient(trust: .signed(by: [release.publicKey]))
            try repository.write(releaseBytes)
            #expect(try await client.sync(url).failures.isEmpty)
            #expect(try await client.active() == ["app 2"])
            return client
        }

        /// Serves the release manifest with `part` signed by `signers`.
        @discardableResult
        func serve(_ part: RolloutPart, signedBy signers: [any Signer], release bytes: Data? = nil) throws -> Data {
            var envelope = try SignedEnvelope.parse(bytes ?? releaseBytes)
            let signed = try part.canonicalBytes()
            envelope.rollout = SignedEnvelope.Rollout(
                signed: signed,
                signatures: try SignedEnvelope.sign(signed, with: signers, verifier: CryptoVerifier()).signatures
            )
            return try repository.write(envelope.encoded())
        }

        /// A step of version `version` for app, expiring in half an hour.
        func part(current: String = "2", rollout: Int? = 0, version: Int = 2) throws -> RolloutPart {
            RolloutPart(
                release: try releaseSHA256,
                version: version,
                signedAt: Date(),
                expires: Date().addingTimeInterval(1_800),
                packages: [RolloutPart.Package(id: "app", current: current, rollout: rollout)]
            )
        }
    }

    static func makeRig(role: Bool = true) async throws -> Rig {
        let release = try CryptoSigner.generate()
        let rollout = try CryptoSigner.generate()
        let repository = try SignedRepository(keys: [release])
        for version in ["1", "2"] { try repository.pack(releaseFiles(version), id: "app", version: version) }
        try repository.pack(releaseFiles("3"), id: "app", version: "3", release: false)
        if role {
            let id = try CryptoVerifier().keyID(of: rollout.publicKey)
            repository.body.rolloutRole = RolloutRole(keys: [id: .init(rollout.publicKey)], maxLifetime: 3_600)
        }
        repository.body.signedAt = Date()
        let bytes = try repository.sign(with: [release], expires: Date().addingTimeInterval(1_200))
        let server = try await NginxServer.start(root: repository.directory)
        return Rig(release: release, rollout: rollout, repository: repository, releaseBytes: bytes, server: server)
    }

    @Test("a rollout key lowers the percentage and rolls back; the release keys then release again")
    func allowedSteps() async throws {
        let rig = try await Self.makeRig()
        let client = try await rig.client()
        // 0%: every client gets the release before the current one.
        try rig.serve(try rig.part(rollout: 0), signedBy: [rig.rollout])
        #expect(try await client.sync(rig.url).failures.isEmpty)
        #expect(try await client.active() == ["app 1"])
        #expect(try TrustState.load(root: client.root).channels[""]?.version == 2)
        // 100%: back to 2, to everyone.
        try rig.serve(try rig.part(rollout: 100, version: 3), signedBy: [rig.rollout])
        #expect(try await client.sync(rig.url).failures.isEmpty)
        #expect(try await client.active() == ["app 2"])
        // A rollback to 1, which the release manifest released.
        try rig.serve(try rig.part(current: "1", rollout: nil, version: 4), signedBy: [rig.rollout])
        #expect(try await client.sync(rig.url).failures.isEmpty)
        #expect(try await client.active() == ["app 1"])
        // A new client, with no trust state, takes the served step too.
        let fresh = try SignedClient(trust: .signed(by: [rig.release.publicKey]))
        #expect(try await fresh.sync(rig.url).failures.isEmpty)
        #expect(try await fresh.active() == ["app 1"])
        // The release keys release 3 in a manifest above the steps: the role is theirs to use.
        rig.repository.body.editPackage("app") { $0.releases.append("3") }
        try rig.repository.sign(with: [rig.release], version: 5)
        #expect(try await client.sync(rig.url).failures.isEmpty)
        #expect(try await client.active() == ["app 3"])
        await rig.server.stop()
    }

    enum Overreach: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case unlistedPackage, unreleasedVersion, expiryPastBound, otherRelease, versionNotAbove
        case percentageOutOfRange, packageTwice, noRoleDeclared
        case attackerKey, releaseKeyAsRollout, rolloutKeySignsRelease
        case replayRelease, replayOlderStep, sameVersionOtherStep
        var testDescription: String { rawValue }

        var expected: HotUpdateError.Code {
            switch self {
            case .attackerKey, .releaseKeyAsRollout, .rolloutKeySignsRelease: .signatureInvalid
            case .replayRelease, .replayOlderStep, .sameVersionOtherStep: .manifestRollback
            default: .rolloutRoleExceeded
            }
        }

        /// Whether only the rollout step is refused: the release manifest, which the release
        /// keys signed, then applies alone and the sync succeeds, reporting the refusal.
        /// Otherwise the whole manifest is refused.
        var refusesStepOnly: Bool {
            switch self {
            case .rolloutKeySignsRelease, .replayRelease, .replayOlderStep, .sameVersionOtherStep: false
            default: true
            }
        }
    }

    @Test(
        "a step that does more than the role allows is refused, and the client keeps what it has",
        arguments: Overreach.allCases
    )
    func refused(_ overreach: Overreach) async throws {
        let rig = try await Self.makeRig(role: overreach != .noRoleDeclared)
        let server = rig.server
        defer { server.stopNow() }
        let client = try await rig.client()
        var trustedVersion = 1
        var active = ["app 2"]
        switch overreach {
        case .unlistedPackage:
            var part = try rig.part()
            part.packages.append(RolloutPart.Package(id: "other", current: "1", rollout: nil))
            try rig.serve(part, signedBy: [rig.rollout])
        case .unreleasedVersion:
            try rig.serve(try rig.part(current: "3", rollout: nil), signedBy: [rig.rollout])
        case .expiryPastBound:
            var part = try rig.part()
            part.expires = Date().addingTimeInterval(7_200)
            try rig.serve(part, signedBy: [rig.rollout])
        case .otherRelease:
            var part = try rig.part()
            part.release = String(repeating: "0", count: 64)
            try rig.serve(part, signedBy: [rig.rollout])
        case .versionNotAbove:
            try rig.serve(try rig.part(version: 1), signedBy: [rig.rollout])
        case .percentageOutOfRange:
            try rig.serve(try rig.part(rollout: 101), signedBy: [rig.rollout])
        case .packageTwice:
            var part = try rig.part(rollout: 0)
            part.packages.append(RolloutPart.Package(id: "app", current: "2", rollout: 100))
            try rig.serve(part, signedBy: [rig.rollout])
        case .noRoleDeclared:
            try rig.serve(try rig.part(), signedBy: [rig.rollout])
        case .attackerKey:
            try rig.serve(try rig.part(), signedBy: [try CryptoSigner.generate()])
        case .releaseKeyAsRollout:
            try rig.serve(try rig.part(), signedBy: [rig.release])
        case .rolloutKeySignsRelease:
            // The rollout key cannot sign the release part: it adds a package, or anything.
            try rig.repository.pack(["evil.js": Data("evil".utf8)], id: "evil", version: "1")
            try rig.repository.sign(with: [rig.rollout])
        case .replayRelease, .replayOlderStep, .sameVersionOtherStep:
            try rig.serve(try rig.part(rollout: 0, version: 2), signedBy: [rig.rollout])
            try rig.serve(try rig.part(current: "1", rollout: nil, version: 3), signedBy: [rig.rollout])
            #expect(try await client.sync(rig.url).failures.isEmpty)
            (trustedVersion, active) = (3, ["app 1"])
            #expect(try await client.active() == active)
            switch overreach {
            case .replayRelease: try rig.repository.write(rig.releaseBytes)
            case .replayOlderStep: try rig.serve(try rig.part(rollout: 0, version: 2), signedBy: [rig.rollout])
            default: try rig.serve(try rig.part(current: "2", rollout: nil, version: 3), signedBy: [rig.rollout])
            }
        }
        if overreach.refusesStepOnly {
            let events = EventLog()
            var client = client
            client.telemetry = events
            let report = try await client.sync(rig.url)
            #expect(report.failures.isEmpty)
            #expect(
                events.events.filter { $0.kind == .rolloutRefused }.map(\.errorCode)
                    == [overreach.expected.description]
            )
            #expect(report.refusedRollout?.code == overreach.expected, "\(String(describing: report.refusedRollout))")
            // Reported again at the next sync: a refused step is never settled on.
            #expect(try await client.sync(rig.url).refusedRollout?.code == overreach.expected)
        } else {
            let thrown = await #expect(throws: HotUpdateError.self) { try await client.sync(rig.url) }
            #expect(thrown?.code == overreach.expected, "\(thrown?.message ?? "")")
        }
        #expect(try await client.active() == active)
        #expect(try TrustState.load(root: client.root).channels[""]?.version == trustedVersion)
        // And after a restart, still.
        #expect(try await client.updater().installedPackages().map { "\($0.id) \($0.version)" } == active)
    }
}

/// The telemetry events an updater sent.
final class EventLog: TelemetryReporter, Sendable {
    private let recorded = Locked<[TelemetryEvent]>([])
    func record(_ event: TelemetryEvent) { recorded.withLock { $0.append(event) } }
    var events: [TelemetryEvent] { recorded.value }
}

extension RolloutRoleTests {
    /// 2^53 − 1, the largest number the strict reader accepts.
    static let largestVersion = 9_007_199_254_740_991

    @Test("a rollout key cannot freeze the channel: a part's version is at most the role's lead above its release")
    func versionLeadBounded() async throws {
        let rig = try await Self.makeRig()
        let server = rig.server
        defer { Task { await server.stop() } }
        let client = try await rig.client()
        // The release manifest is version 1 and the role's lead is 1000 (the default).
        for version in [Self.largestVersion, 1 + 1_000 + 1] {
            try rig.serve(try rig.part(rollout: 0, version: version), signedBy: [rig.rollout])
            // The step is refused; the release manifest applies alone.
            let report = try await client.sync(rig.url)
            #expect(report.refusedRollout?.code == .rolloutRoleExceeded, "\(version)")
            #expect(report.manifestVersion == 1)
            #expect(try TrustState.load(root: client.root).channels[""]?.version == 1)
            #expect(try await client.active() == ["app 2"])
        }
        // A step at the lead is taken, and the release keys' next manifest is above it.
        try rig.serve(try rig.part(rollout: 0, version: 1 + 1_000), signedBy: [rig.rollout])
        // The same size as the refused step's file, maybe in the same second: another
        // modification time gives nginx's validator (time and size) another value, so the
        // client's conditional request is not answered with the bytes it kept.
        try FileManager.default.setAttributes(
            [.modificationDate: Date().addingTimeInterval(60)],
            ofItemAtPath: rig.repository.manifestFile.path
        )
        let taken = try await client.sync(rig.url)
        #expect(taken.failures.isEmpty)
        #expect(taken.refusedRollout == nil, "\(String(describing: taken.refusedRollout))")
        #expect(try await client.active() == ["app 1"])
        rig.repository.body.editPackage("app") { $0.releases.append("3") }
        try rig.repository.sign(with: [rig.release], expires: Date().addingTimeInterval(1_200), version: 1_002)
        #expect(try await client.sync(rig.url).failures.isEmpty)
        #expect(try await client.active() == ["app 3"])
    }

    @Test("a rollout key cannot replay an older release: a package the release keys disabled stays disabled")
    func olderReleaseRefused() async throws {
        let rig = try await Self.makeRig()
        let server = rig.server
        defer { Task { await server.stop() } }
        let client = try await rig.client()
        // Release manifest version 2 disables app; the client follows.
        rig.repository.body.editPackage("app") { $0.disabled = true }
        try rig.repository.sign(with: [rig.release], expires: Date().addingTimeInterval(1_200), version: 2)
        #expect(try await client.sync(rig.url).failures.isEmpty)
        #expect(try await client.active() == [])
        // Release manifest version 1, unexpired, in a fresh part above every version the client
        // trusts and within the role's lead.
        try rig.serve(try rig.part(rollout: nil, version: 3), signedBy: [rig.rollout])
        let thrown = await #expect(throws: HotUpdateError.self) { try await client.sync(rig.url) }
        #expect(thrown?.code == .manifestRollback, "\(thrown?.message ?? "")")
        #expect(thrown?.message.contains("release manifest version 2 already trusted") == true)
        #expect(try await client.active() == [])
        #expect(try TrustState.load(root: client.root).channels[""]?.version == 2)
        #expect(try await client.updater().installedPackages().isEmpty)
    }

    @Test("a rollout key the release keys replaced cannot move clients through an older release that declares it")
    func replacedRoleRefused() async throws {
        let rig = try await Self.makeRig()
        let server = rig.server
        defer { Task { await server.stop() } }
        let client = try await rig.client()
        // Release manifest version 2 releases 3 and gives the role another key.
        let replacement = try CryptoSigner.generate()
        let id = try CryptoVerifier().keyID(of: replacement.publicKey)
        rig.repository.body.rolloutRole = RolloutRole(keys: [id: .init(replacement.publicKey)], maxLifetime: 3_600)
        rig.repository.body.editPackage("app") { $0.releases.append("3") }
        try rig.repository.sign(with: [rig.release], expires: Date().addingTimeInterval(1_200), version: 2)
        #expect(try await client.sync(rig.url).failures.isEmpty)
        #expect(try await client.active() == ["app 3"])
        // The old key wraps release manifest version 1, which still declares it: back to 1.
        try rig.serve(try rig.part(current: "1", rollout: nil, version: 3), signedBy: [rig.rollout])
        let thrown = await #expect(throws: HotUpdateError.self) { try await client.sync(rig.url) }
        #expect(thrown?.code == .manifestRollback, "\(thrown?.message ?? "")")
        #expect(thrown?.message.contains("release manifest version 2 already trusted") == true)
        #expect(try await client.active() == ["app 3"])
        #expect(try TrustState.load(root: client.root).channels[""]?.version == 2)
    }

    enum PushedClock: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case acceptedPart, refusedPart
        var testDescription: String { rawValue }
    }

    @Test(
        "a rollout part's signing time raises no time floor: the release keys' next manifest is not refused as expired",
        arguments: PushedClock.allCases
    )
    func partSigningTimeRaisesNoFloor(_ how: PushedClock) async throws {
        let rig = try await Self.makeRig()
        let server = rig.server
        defer { Task { await server.stop() } }
        let client = try await rig.client()
        // The release manifest was signed at `signed` and lets parts expire up to an hour
        // after; a part claims to be signed 50 minutes after it.
        let signed = try #require(rig.repository.body.signedAt)
        var ahead = try rig.part(rollout: 0, version: 3)
        ahead.signedAt = signed.addingTimeInterval(3_000)
        ahead.expires = signed.addingTimeInterval(3_600)
        switch how {
        case .acceptedPart:
            try rig.serve(ahead, signedBy: [rig.rollout])
            #expect(try await client.sync(rig.url).failures.isEmpty)
            #expect(try await client.active() == ["app 1"])
        case .refusedPart:
            try rig.serve(try rig.part(rollout: 0, version: 3), signedBy: [rig.rollout])
            #expect(try await client.sync(rig.url).failures.isEmpty)
            ahead.version = 2
            try rig.serve(ahead, signedBy: [rig.rollout])
            let thrown = await #expect(throws: HotUpdateError.self) { try await client.sync(rig.url) }
            #expect(thrown?.code == .manifestRollback, "\(thrown?.message ?? "")")
        }
        let floor = try #require(try TrustState.load(root: client.root).timeFloor)
        #expect(floor < ahead.signedAt)
        // The release keys sign a manifest that expires 30 minutes after their first one,
        // before the part's signing time: it is accepted.
        rig.repository.body.signedAt = Date()
        rig.repository.body.editPackage("app") { $0.releases.append("3") }
        try rig.repository.sign(with: [rig.release], expires: signed.addingTimeInterval(1_800), version: 10)
        #expect(try await client.sync(rig.url).failures.isEmpty)
        #expect(try await client.active() == ["app 3"])
    }
}

/// The rollout role with the real `hot` commands, served by nginx on 127.0.0.1.
@Suite("hot rollout: steps signed by the rollout role")
struct RolloutCommandTests {
    @discardableResult
    static func hot(_ arguments: [String]) async throws -> CommandLineTests.Result {
        try await PublisherWorkflowTests.hot(arguments)
    }

    @Test(
        "hot sign --rollout-key delegates; hot rollout steps, refuses what it may not, and the next hot sign keeps the step"
    )
    func workflow() async throws {
        let work = try makeTemporaryDirectory("rollout-role")
        let repo = work.appendingPathComponent("repo").path
        let root = work.appendingPathComponent("store").path
        let (release, rollout) = (work.appendingPathComponent("release"), work.appendingPathComponent("rollout"))
        for key in [release, rollout] {
            try await Self.hot(["keygen", "--private", key.path + ".pem", "--public", key.path + ".pub"])
        }
        for version in ["1", "2"] {
            let source = work.appendingPathComponent("v\(version)")
            try writeTree(releaseFiles(version), under: source)
            try await Self.hot(["pack", source.path, "--id", "app", "--version", version, "--repo", repo])
        }
        let server = try await NginxServer.start(root: URL(fileURLWithPath: repo))
        defer { server.stopNow() }
        let manifest = server.baseURL.appendingPathComponent("manifest.json").absoluteString
        func active() async throws -> String? {
            try await Self.hot(["sync", "--manifest", manifest, "--root", root, "--trust", release.path + ".pub"])
            let status = try JSONDecoder().decode(
                CommandLineTests.StatusDocument.self,
                from: Data(try await Self.hot(["status", "--root", root, "--json"]).stdout.utf8)
            )
            return status.packages.first?.version
        }

        // Without a role, a rollout key has nothing to sign.
        try await Self.hot(["sign", "--repo", repo, "--key", release.path + ".pem", "--expires", "1h"])
        let none = try await CommandLineTests.run([
            "rollout", "app", "--percent", "0", "--key", rollout.path + ".pem", "--repo", repo,
        ])
        #expect(none.status != 0)
        #expect(none.stderr.contains("declares no rollout role"), "\(none.stderr)")
        let role = ["--rollout-key", rollout.path + ".pub", "--rollout-lifetime", "2h"]
        try await Self.hot(["sign", "--repo", repo, "--key", release.path + ".pem", "--expires", "1h"] + role)
        #expect(try await active() == "2")

        let step = ["--key", rollout.path + ".pem", "--repo", repo]
        try await Self.hot(["rollout", "app", "--percent", "0"] + step)
        #expect(try await active() == "1")
        #expect(try await Self.hot(["verify", "--repo", repo, "--trust", release.path + ".pub"]).stdout.contains("ok"))
        try await Self.hot(["rollout", "app", "--percent", "100"] + step)
        #expect(try await active() == "2")
        try await Self.hot(["rollout", "app", "--back"] + step)
        #expect(try await active() == "1")

        // What the role may not do, refused before anything is written.
        let before = try Data(contentsOf: URL(fileURLWithPath: repo + "/manifest.json"))
        for (arguments, complaint) in [
            (
                ["rollout", "app", "--percent", "50", "--key", release.path + ".pem", "--repo", repo],
                "belong to the rollout role"
            ),
            (["rollout", "app", "--percent", "50", "--expires", "3h"] + step, "past the rollout role's bound"),
            (["rollout", "app", "--back"] + step, "no earlier release"),
            (["rollout", "app", "--back", "--to", "3"] + step, "names (1), not 3"),
            (["rollout", "other", "--percent", "50"] + step, "no release in this channel"),
        ] {
            let refused = try await CommandLineTests.run(arguments)
            #expect(refused.status != 0, "\(arguments)")
            #expect(refused.stderr.contains(complaint), "\(arguments): \(refused.stderr)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: repo + "/manifest.json")) == before)
        // The release key signing what it may not do for clients: the rollout key cannot sign
        // a release manifest.
        let stolen = try await CommandLineTests.run(["sign", "--repo", repo, "--key", rollout.path + ".pem"])
        #expect(stolen.status != 0, "\(stolen.stdout)")

        // The release keys' next edit starts from the step: app 1 stays current.
        try await Self.hot(["enable", "app", "--repo", repo])
        try await Self.hot(["sign", "--repo", repo, "--key", release.path + ".pem", "--expires", "1h"])
        #expect(try await active() == "1")
        let served = try SignedEnvelope.parse(Data(contentsOf: URL(fileURLWithPath: repo + "/manifest.json")))
        #expect(served.rollout == nil)
        #expect(try SignedManifestBody.decode(served.signed).rolloutRole != nil)
        // Above every version a step of the last release could carry: the release after the
        // edit (version 5, the last step's) plus the role's lead of 1000.
        #expect(try SignedManifestBody.decode(served.signed).version == 1_006)
    }

    @Test(
        "a forged step beyond the role's bound: hot sync prints the refusal with its code, exits 0, and keeps the release's versions"
    )
    func forgedStepReported() async throws {
        let (work, repo, release, rollout) = try await Self.makeRepository("rollout-forged")
        let root = work.appendingPathComponent("store").path
        let role = ["--rollout-key", rollout + ".pub", "--rollout-lifetime", "2h"]
        try await Self.hot(["sign", "--repo", repo, "--key", release + ".pem", "--expires", "1h"] + role)
        let server = try await NginxServer.start(root: URL(fileURLWithPath: repo))
        defer { server.stopNow() }
        let manifest = server.baseURL.appendingPathComponent("manifest.json").absoluteString
        let sync = ["sync", "--manifest", manifest, "--root", root, "--trust", release + ".pub"]
        let first = try await Self.hot(sync)
        #expect(first.stdout.hasPrefix("app\t") && first.stdout.hasSuffix("\tok\t2\n"), "\(first.stdout)")

        // A step to 0% (every client back to app 1) that lives 3 hours, past the role's 2,
        // signed with the rollout key itself.
        let releaseBytes = try Data(contentsOf: URL(fileURLWithPath: repo + "/manifest.json"))
        try Self.serveStep(
            wrapping: releaseBytes,
            in: repo,
            keyPEM: rollout + ".pem",
            version: try SignedManifestBody.decode(SignedEnvelope.parse(releaseBytes).signed).version + 1,
            current: "2",
            rollout: 0,
            lifetime: 3 * 3_600
        )

        for _ in 0..<2 {
            let result = try await CommandLineTests.run(sync)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout == "app\tunchanged\tok\t2\n", "\(result.stdout)")
            #expect(
                result.stderr.contains(
                    "hot: warning: the rollout step served with the manifest was refused (rolloutRoleExceeded): "
                ),
                "\(result.stderr)"
            )
            #expect(result.stderr.contains("the release manifest's versions apply"), "\(result.stderr)")
        }
        let status = try await Self.hot(["status", "--root", root])
        #expect(status.stdout.hasPrefix("app\t2\tinstalled"), "\(status.stdout)")
    }

    /// Writes to `repo`'s manifest.json the release manifest `releaseBytes` with a rollout part
    /// for app signed by hand with the key in `keyPEM`, living `lifetime` seconds, and removes
    /// the timestamp `hot sign` left (no timestamp role: clients read manifest.json itself).
    static func serveStep(
        wrapping releaseBytes: Data,
        in repo: String,
        keyPEM: String,
        version: Int,
        current: String,
        rollout: Int?,
        lifetime: TimeInterval
    ) throws {
        var envelope = try SignedEnvelope.parse(releaseBytes)
        let part = RolloutPart(
            release: try CryptoVerifier().digest(of: envelope.signed, using: .sha256).hex,
            version: version,
            signedAt: Date(),
            expires: Date().addingTimeInterval(lifetime),
            packages: [RolloutPart.Package(id: "app", current: current, rollout: rollout)]
        )
        let signed = try part.canonicalBytes()
        let signer = try CryptoSigner(privateKeyPEM: String(contentsOfFile: keyPEM, encoding: .utf8))
        envelope.rollout = SignedEnvelope.Rollout(
            signed: signed,
            signatures: try SignedEnvelope.sign(signed, with: [signer], verifier: CryptoVerifier()).signatures
        )
        try envelope.encoded().write(to: URL(fileURLWithPath: repo + "/manifest.json"))
        try? FileManager.default.removeItem(atPath: repo + "/timestamp.json")
    }

    /// A repository with app 1 and 2 packed, and `release` and `rollout` key pairs.
    static func makeRepository(
        _ name: String
    ) async throws -> (work: URL, repo: String, release: String, rollout: String) {
        let work = try makeTemporaryDirectory(name)
        let repo = work.appendingPathComponent("repo").path
        let (release, rollout) = (
            work.appendingPathComponent("release").path, work.appendingPathComponent("rollout").path
        )
        for key in [release, rollout] {
            try await Self.hot(["keygen", "--private", key + ".pem", "--public", key + ".pub"])
        }
        for version in ["1", "2"] {
            let source = work.appendingPathComponent("v\(version)")
            try writeTree(releaseFiles(version), under: source)
            try await Self.hot(["pack", source.path, "--id", "app", "--version", version, "--repo", repo])
        }
        return (work, repo, release, rollout)
    }

    @Test("hot sign writes no number beyond 2^53 − 1: versions, the role's lifetime and its version lead")
    func signedNumbersInRange() async throws {
        let (_, repo, release, rollout) = try await Self.makeRepository("rollout-range")
        let manifest = URL(fileURLWithPath: repo + "/manifest.json")
        try await Self.hot(["sign", "--repo", repo, "--key", release + ".pem", "--expires", "1h"])
        let sign = ["sign", "--repo", repo, "--key", release + ".pem", "--expires", "1h"]
        for (options, complaint) in [
            (["--rollout-key", rollout + ".pub", "--rollout-lifetime", "1e300d"], "2^53 − 1 seconds"),
            (["--rollout-key", rollout + ".pub", "--rollout-version-lead", "9007199254740992"], "from 1 to 2^53 − 1"),
            (["--rollout-key", rollout + ".pub", "--rollout-version-lead", "0"], "from 1 to 2^53 − 1"),
        ] {
            let refused = try await CommandLineTests.run(sign + options)
            #expect(refused.status != 0, "\(options)")
            #expect(refused.stderr.contains(complaint), "\(options): \(refused.stderr)")
        }
        // A manifest at 2^53 − 1, the last version clients read: the next one cannot be signed.
        var body = try SignedManifestBody.decode(SignedEnvelope.parse(Data(contentsOf: manifest)).signed)
        body.version = RolloutRoleTests.largestVersion
        try SignedEnvelope(signed: body.canonicalBytes(), signatures: []).encoded().write(to: manifest)
        let before = try Data(contentsOf: manifest)
        let refused = try await CommandLineTests.run(sign)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("beyond 2^53 − 1, which clients refuse"), "\(refused.stderr)")
        #expect(try Data(contentsOf: manifest) == before)
        // With a rollout role, the next release must also clear the role's lead.
        body.version = RolloutRoleTests.largestVersion - 500
        try SignedEnvelope(signed: body.canonicalBytes(), signatures: []).encoded().write(to: manifest)
        try await Self.hot(sign + ["--rollout-key", rollout + ".pub"])
        let withRole = try await CommandLineTests.run(sign)
        #expect(withRole.status != 0)
        #expect(withRole.stderr.contains("beyond 2^53 − 1, which clients refuse"), "\(withRole.stderr)")
    }

    @Test(
        "hot rollout stops at the role's version lead; the next hot sign clears it, and no step of the older release moves a client"
    )
    func versionLeadWorkflow() async throws {
        let (work, repo, release, rollout) = try await Self.makeRepository("rollout-lead")
        let root = work.appendingPathComponent("store").path
        let manifestFile = URL(fileURLWithPath: repo + "/manifest.json")
        let server = try await NginxServer.start(root: URL(fileURLWithPath: repo))
        defer { Task { await server.stop() } }
        let manifest = server.baseURL.appendingPathComponent("manifest.json").absoluteString
        let sync = ["sync", "--manifest", manifest, "--root", root, "--trust", release + ".pub"]
        func status() async throws -> String? {
            let document = try JSONDecoder().decode(
                CommandLineTests.StatusDocument.self,
                from: Data(try await Self.hot(["status", "--root", root, "--json"]).stdout.utf8)
            )
            return document.packages.first.map { "\($0.version ?? "-") \($0.state)" }
        }
        let sign = ["sign", "--repo", repo, "--key", release + ".pem", "--expires", "1h"]
        try await Self.hot(sign + ["--rollout-key", rollout + ".pub", "--rollout-version-lead", "2"])
        let firstRelease = try Data(contentsOf: manifestFile)
        let firstBody = try SignedManifestBody.decode(SignedEnvelope.parse(firstRelease).signed)
        try await Self.hot(sync)
        #expect(try await status() == "2 installed")

        // Two steps fit in the lead; the third is refused before anything is written.
        let step = ["--key", rollout + ".pem", "--repo", repo]
        try await Self.hot(["rollout", "app", "--percent", "0"] + step)
        try await Self.hot(["rollout", "app", "--percent", "100"] + step)
        let before = try Data(contentsOf: manifestFile)
        let third = try await CommandLineTests.run(["rollout", "app", "--percent", "50"] + step)
        #expect(third.status != 0)
        #expect(third.stderr.contains("sign the release again"), "\(third.stderr)")
        #expect(try Data(contentsOf: manifestFile) == before)

        // A step past the lead, signed by hand with the rollout key, is refused by hot verify
        // and by clients.
        func wrap(_ releaseBytes: Data, version: Int, current: String) throws {
            try Self.serveStep(
                wrapping: releaseBytes,
                in: repo,
                keyPEM: rollout + ".pem",
                version: version,
                current: current,
                rollout: nil,
                lifetime: 1_800
            )
        }
        try wrap(firstRelease, version: firstBody.version + 3, current: "1")
        let verified = try await CommandLineTests.run(["verify", "--repo", repo, "--trust", release + ".pub"])
        #expect(verified.status != 0)
        #expect(verified.stdout.contains("versions its keys allow"), "\(verified.stdout)")
        // Clients refuse the step, say so, and keep to the release manifest's versions.
        let refused = try await CommandLineTests.run(sync)
        #expect(refused.status == 0, "\(refused.stderr)")
        #expect(refused.stderr.contains("was refused (rolloutRoleExceeded)"), "\(refused.stderr)")
        #expect(try await status() == "2 installed")

        // The release keys disable app: the next release is above every step of the first.
        try before.write(to: manifestFile)
        try await Self.hot(["disable", "app", "--repo", repo])
        try await Self.hot(sign)
        let secondBody = try SignedManifestBody.decode(SignedEnvelope.parse(Data(contentsOf: manifestFile)).signed)
        #expect(secondBody.version > firstBody.version + 2)
        try await Self.hot(sync)
        #expect(try await status() == "2 disabled")
        // The first release, unexpired, wrapped in the highest step its role allows, or in
        // one above the release the client trusts, cannot bring app back.
        for version in [firstBody.version + 2, secondBody.version + 1] {
            try wrap(firstRelease, version: version, current: "2")
            let replayed = try await CommandLineTests.run(sync)
            #expect(replayed.status != 0, "\(version): \(replayed.stdout)")
            #expect(try await status() == "2 disabled")
        }
    }
}
