import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import HotVerify
import Testing

/// The floors under a client's trust: the latest time it has seen (expiry), and the lowest
/// manifest version the app starts from, over nginx with real keys.
@Suite("Trust floors: time and version")
struct TimeFloorTests {
    static func setup() async throws -> (CryptoSigner, SignedRepository, NginxServer, SignedClient) {
        let key = try CryptoSigner.generate()
        let repository = try SignedRepository(keys: [key])
        try repository.pack(releaseFiles("1"), id: "app", version: "1")
        let server = try await NginxServer.start(root: repository.directory)
        let client = try SignedClient(trust: .signed(by: [key.publicKey]))
        return (key, repository, server, client)
    }

    /// `date` to whole seconds, as manifests carry it.
    static func seconds(_ date: Date) -> Date { Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down)) }

    @Test("a clock far ahead raises the floor at most a day past the signing time; a fresh manifest is accepted after")
    func clockLeadIsBounded() async throws {
        let (key, repository, server, clientAhead) = try await Self.setup()
        defer { server.stopNow() }
        let signedAt = Self.seconds(Date())
        repository.body.signedAt = signedAt
        try repository.sign(with: [key], expires: signedAt.addingTimeInterval(30 * 86_400))
        var client = clientAhead
        client.now = { Date().addingTimeInterval(10 * 86_400) }
        #expect(try await client.sync(repository.url(on: server)).failures.isEmpty)
        let floor = try TrustState.load(root: client.root).timeFloor
        #expect(floor == signedAt.addingTimeInterval(86_400))

        // The clock corrected; a manifest signed now to expire in 2 days lies past the floor.
        client.now = { Date() }
        try repository.pack(releaseFiles("2"), id: "app", version: "2")
        repository.body.signedAt = Self.seconds(Date())
        try repository.sign(with: [key], expires: Date().addingTimeInterval(2 * 86_400))
        #expect(try await client.sync(repository.url(on: server)).failures.isEmpty)
        #expect(try await client.active() == ["app 2"])
    }

    @Test("a manifest signed later than the device's clock raises the floor to its signing time")
    func signingTimeRaisesTheFloor() async throws {
        let (key, repository, server, behind) = try await Self.setup()
        defer { server.stopNow() }
        var client = behind
        client.now = { Date().addingTimeInterval(-5 * 86_400) }  // the device's clock 5 days behind
        let signedAt = Self.seconds(Date())
        repository.body.signedAt = signedAt
        try repository.sign(with: [key], expires: signedAt.addingTimeInterval(3_600))
        #expect(try await client.sync(repository.url(on: server)).failures.isEmpty)
        #expect(try TrustState.load(root: client.root).timeFloor == signedAt)

        // A manifest that expired before that signing time is refused, whatever the clock says.
        try repository.pack(releaseFiles("2"), id: "app", version: "2")
        repository.body.signedAt = signedAt.addingTimeInterval(-2 * 86_400)
        try repository.sign(with: [key], expires: signedAt.addingTimeInterval(-86_400))
        let error = await #expect(throws: HotUpdateError.self) { try await client.sync(repository.url(on: server)) }
        #expect(error?.code == .manifestExpired)
        #expect(error?.message.contains("already seen") == true, "\(String(describing: error))")
        #expect(try await client.active() == ["app 1"])
    }

    @Test("a manifest whose signing time is after its expiry is refused as invalid")
    func signedAfterExpiry() async throws {
        let (key, repository, server, client) = try await Self.setup()
        defer { server.stopNow() }
        repository.body.signedAt = Date().addingTimeInterval(2 * 86_400)
        try repository.sign(with: [key], expires: Date().addingTimeInterval(86_400))
        await #expect(throws: HotUpdateError(.manifestInvalid, "")) {
            try await client.sync(repository.url(on: server))
        }
        #expect(try await client.active().isEmpty)
    }

    @Test("the app's time floor refuses a manifest that expired before it, with no trust state")
    func appTimeFloor() async throws {
        let (key, repository, server, fresh) = try await Self.setup()
        defer { server.stopNow() }
        try repository.sign(with: [key], expires: Date().addingTimeInterval(86_400))
        var client = fresh
        client.trust.timeFloor = Date().addingTimeInterval(2 * 86_400)  // the app was built later
        await #expect(throws: HotUpdateError(.manifestExpired, "")) {
            try await client.sync(repository.url(on: server))
        }
        client.trust.timeFloor = Date().addingTimeInterval(-86_400)
        #expect(try await client.sync(repository.url(on: server)).failures.isEmpty)
    }

    @Test("a lost trust.json accepts a replayed older manifest, unless the app gives a version floor")
    func lostTrustStateAndVersionFloor() async throws {
        let (key, repository, server, fresh) = try await Self.setup()
        defer { server.stopNow() }
        let url = repository.url(on: server)
        let old = try repository.sign(with: [key], version: 6)
        try repository.pack(releaseFiles("2"), id: "app", version: "2")
        try repository.sign(with: [key], version: 7)
        var client = fresh
        #expect(try await client.sync(url).failures.isEmpty)
        #expect(try await client.active() == ["app 2"])

        // With the trust state, the replay of version 6 is refused.
        try repository.write(old)
        await #expect(throws: HotUpdateError(.manifestRollback, "")) { try await client.sync(url) }

        // trust.json lost: what is documented happens, the replay is accepted…
        let trustFile = client.root.appendingPathComponent(TrustState.fileName)
        try FileManager.default.removeItem(at: trustFile)
        #expect(try await client.sync(url).failures.isEmpty)
        #expect(try await client.active() == ["app 1"])

        // …unless the app gives the version it keeps elsewhere as a floor.
        try FileManager.default.removeItem(at: trustFile)
        client.trust.versionFloor = 7
        let error = await #expect(throws: HotUpdateError.self) { try await client.sync(url) }
        #expect(error?.code == .manifestRollback)
        #expect(error?.message.contains("the app starts from") == true, "\(String(describing: error))")
    }
}
