import Foundation
import HotCore
import HotManifest
import HotTestServers
import HotTesting
import HotVerify
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The telemetry queue under the store root, against a real death: `Examples/LaunchGuard`
/// killed with SIGKILL while it syncs, its collector unreachable, and the next launch sending
/// what it recorded.
@Suite("Telemetry queue across a SIGKILL")
struct TelemetryQueueKillTests {
    /// The events kept under `root`'s `telemetry/`: queued lines and batches whose sender died.
    static func kept(root: URL) throws -> [TelemetryEvent] {
        let directory = root.appendingPathComponent("telemetry")
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        var events: [TelemetryEvent] = []
        let queue = (try? String(contentsOf: directory.appendingPathComponent("queue.jsonl"), encoding: .utf8)) ?? ""
        for line in queue.split(separator: "\n") {
            events.append(try decoder.decode(TelemetryEvent.self, from: Data(line.utf8)))
        }
        struct Batch: Decodable { var events: [TelemetryEvent] }
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        where name.hasPrefix("batch-") && name.hasSuffix(".json") {
            events += try decoder.decode(Batch.self, from: Data(contentsOf: directory.appendingPathComponent(name)))
                .events
        }
        return events
    }

    @Test("a launch killed mid-sync with its collector down loses no event: the next launch sends them")
    func killedLaunchLosesNothing() async throws {
        let key = try CryptoSigner.generate()
        let keys = try makeTemporaryDirectory("queue-keys")
        let publicKey = keys.appendingPathComponent("release.pub")
        try key.publicKey.pem.write(to: publicKey, atomically: true, encoding: .utf8)
        let repository = try SignedRepository(keys: [key])
        try repository.pack(["main.js": Data("print(1)".utf8)], id: "app", version: "1")
        try repository.sign(with: [key])
        // Packages beyond their first 64 KB come at 200 KB/s: a sync of version 2 lasts
        // seconds, long enough to be killed in.
        let nginx = try await NginxServer.start(
            root: repository.directory,
            options: .init(locations: [.rateLimited(prefix: "/packages/", bytesPerSecond: 200_000, afterBytes: 65_536)])
        )
        let collector = try await TelemetryCollector.start()
        // A collector that never answers: nothing listens on port 1.
        let down = URL(string: "http://127.0.0.1:1/collect")!
        let root = try makeTemporaryDirectory("queue-store").appendingPathComponent("store")
        let logs = try makeTemporaryDirectory("queue-logs")
        func launch(_ name: String, telemetry: URL) throws -> HotRun {
            try HotRun(
                [
                    "--manifest", repository.url(on: nginx).absoluteString, "--root", root.path, "--trust",
                    publicKey.path, "--telemetry", telemetry.absoluteString,
                ],
                log: logs.appendingPathComponent(name),
                executable: "LaunchGuard"
            )
        }
        // The bundle, then version 1 tried and confirmed, reported as they go.
        for name in ["first", "second"] {
            let run = try launch(name, telemetry: collector.collectURL)
            #expect(await run.wait() == .exited(0), "\(run.output)")
        }
        let sentBefore = try collector.batches().flatMap(\.events).count
        #expect(try Self.kept(root: root).isEmpty)

        // Version 2, a megabyte: the third launch runs 1 and starts downloading 2 while its
        // collector is down, and is killed during the download.
        let entry = try repository.pack(
            ["main.js": Data("print(2)".utf8), "asset.bin": noise(1_000_000, seed: 28)],
            id: "app",
            version: "2"
        )
        try repository.sign(with: [key])
        let third = try launch("third", telemetry: down)
        let partial = root.appendingPathComponent("partial/\(entry.sha256)").path
        let killed = await third.kill(when: { fileSize(partial) >= 100_000 }, timeout: .seconds(120))
        #expect(killed, "the third launch ended before it was killed: \(third.output)")
        #expect(await third.wait() == .signalled(SIGKILL))
        let kept = try Self.kept(root: root)
        print("telemetry queue kill: the killed launch kept \(kept.map(\.kind.rawValue))")
        // It recorded the check of the manifest that offers 2, at least, and sent nothing.
        #expect(kept.contains { $0.kind == .check }, "\(kept.map(\.kind))")
        #expect(try collector.batches().flatMap(\.events).count == sentBefore)

        // The fourth launch, its collector up, sends what the killed one kept, then its own.
        let fourth = try launch("fourth", telemetry: collector.collectURL)
        #expect(await fourth.wait() == .exited(0), "\(fourth.output)")
        let received = try collector.batches().flatMap(\.events)
        for event in kept {
            #expect(
                received.contains { $0.kind == event.kind && $0.date == event.date && $0.version == event.version },
                "\(event.kind) \(event.version ?? "-") recorded by the killed launch never arrived"
            )
        }
        #expect(try Self.kept(root: root).isEmpty)
        await collector.stop()
        await nginx.stop()
    }
}
