import Foundation
import HotCore
import HotManifest
import HotPublish
import HotServerKit
import HotTestServers
import HotVerify
import Testing

/// `hot-server` on a repository published to S3-compatible storage (moto on 127.0.0.1): the
/// manifests are pulled, changed, signed and published back, and clients reading the bucket
/// follow.
@Suite("hot-server on a bucket")
struct BucketTests {
    static let credentials = [
        "AWS_ACCESS_KEY_ID=hot-test", "AWS_SECRET_ACCESS_KEY=\(MotoServer.secretAccessKey)", "AWS_REGION=eu-west-1",
    ]

    /// Runs `tool` with the bucket's credentials and expects success.
    @discardableResult
    static func run(_ tool: String, _ arguments: [String]) async throws -> Subprocess.Output {
        let output = try await Subprocess.run("env", credentials + [try executable(tool)] + arguments)
        #expect(output.status == 0, "\(tool) \(arguments.joined(separator: " ")): \(output.stderr)")
        return output
    }

    @Test(
        "rollout advance --repo s3://…, with a rollout role key: it pulls, halts the failing v2, publishes the step; a client of the bucket runs v1"
    )
    func rolloutOnABucket() async throws {
        let moto = try await MotoServer.start()
        defer { moto.stopNow() }
        try await moto.createBucket("releases")
        let app = try await PublishedApp.make()
        try await app.publish(version: "1")
        try await app.publish(version: "2")
        let endpoint = ["--endpoint", moto.baseURL.absoluteString]
        try await Self.run("hot", ["publish", app.repo.path, "s3://releases/app", "--acl", "public-read"] + endpoint)
        let manifestURL = moto.baseURL.appendingPathComponent("releases/app/manifest.json")
        func servedEnvelope() async throws -> SignedEnvelope {
            try SignedEnvelope.parse(
                try await Subprocess.check("curl", ["-sf", manifestURL.absoluteString]).standardOutput
            )
        }
        func served() async throws -> SignedManifestBody {
            try await servedEnvelope().effectiveBody(verifier: CryptoVerifier())
        }
        #expect(try await served().package("app")?.current == "2")

        // Twelve devices report v2 rolled back at launch.
        let database = "sqlite:" + app.directory.appendingPathComponent("telemetry.db").path
        let collector = try await ServerProcess.start(["collect", "--db", database])
        let now = ISO8601DateFormatter().string(from: Date())
        // Devices the collector knew before v2 started (they ran v1): only they count.
        let devices = (0..<12).map { _ in UUID().uuidString.lowercased() }
        for kind in ["confirm", "rollback"] {
            for device in devices {
                let body = Data(
                    #"{"batch":"\#(UUID().uuidString.lowercased())","client":"\#(device)","sentAt":"\#(now)","events":[{"kind":"\#(kind)","date":"\#(now)","packageID":"app","version":"\#(kind == "confirm" ? "1" : "2")"}]}"#
                        .utf8
                )
                #expect(try await post(body, to: collector.url.appendingPathComponent("collect")) == 204)
            }
        }
        collector.stop()

        // The rollout machine holds the bucket's address and a rollout key, no repository.
        let work = try scratch("bucket-work")
        let advance = try await Self.run(
            "hot-server",
            [
                "rollout", "advance", "--repo", "s3://releases/app", "--work", work.path, "--acl", "public-read",
                "--db", database, "--rollout-role", "--key", app.rolloutKey.path,
            ] + endpoint
        )
        #expect(advance.stdout.contains("app 2: halt and roll back"), "\(advance.stdout)")
        let body = try await served()
        #expect(body.package("app")?.current == "1")
        #expect(try await servedEnvelope().rollout != nil)
        // The working copy holds manifests only; the package files stayed in the bucket.
        #expect(!FileManager.default.fileExists(atPath: work.appendingPathComponent("packages").path))

        // A device reading the bucket runs v1.
        let device = Device(
            store: try scratch("bucket-device"),
            manifest: manifestURL,
            trust: app.publicKey,
            telemetry: URL(string: "http://127.0.0.1:9/collect")!
        )
        #expect(try await device.launch().running == "bundle")
        let second = try await device.launch()
        #expect(second.ending == .exited(0) && second.running == "1", "\(second.output)")

        // The release keys, through the same bucket, release 2 again to everyone.
        let repository = try PublisherRepository(
            directory: try scratch("bucket-release"),
            keys: [app.privateKey.path],
            remote: S3Remote(location: "s3://releases/app", endpoint: moto.baseURL, acl: "public-read")
        )
        // The repository publishes from this process, which reads the credentials here.
        setenv("AWS_ACCESS_KEY_ID", "hot-test", 1)
        setenv("AWS_SECRET_ACCESS_KEY", MotoServer.secretAccessKey, 1)
        setenv("AWS_REGION", "eu-west-1", 1)
        try await repository.apply(.release(version: "2", rollout: nil), package: "app", channel: "")
        #expect(try await served().package("app")?.current == "2")
        #expect(try await servedEnvelope().rollout == nil)
        #expect(try await repository.packages().first?.current == "2")
    }
}
