import Foundation
import HotCore
import HotManifest
import HotPublish
import HotTestServers
import HotVerify
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// The guide's function (HotPublish.docc/PublishingFromYourService.md), as it is written
// there: the test below checks that the article holds these lines, then runs them against
// moto.
// guide:begin
/// Packs `folder` as version `version` of package `id`, releases it to `percent` percent of
/// clients (all of them for nil), signs the repository in `directory` with `key` (a PEM file or
/// a `pkcs11:` URI) and publishes it to `remote`.
func publishRelease(
    folder: URL,
    id: String,
    version: String,
    percent: Int?,
    directory: URL,
    key: String,
    remote: S3Remote
) async throws -> String {
    let signer = try ReleaseKey.signer(key)
    return try await Repository(directory: directory).exclusively { repository in
        let packed = try await repository.pack(folder, id: id, version: version, options: .init(release: false))
        let released = try repository.release(id, version: version, rollout: percent)
        let signed = try repository.sign(with: [signer], expires: try Repository.expiry("30d"))
        let published = try await repository.publish(to: remote)
        return "\(packed.summary); \(released.summary); \(signed.summary); "
            + "\(published.uploaded) package file(s) uploaded"
    }
}
// guide:end

@Suite("Publishing from your own service: the guide's code against S3")
struct PublishingFromYourServiceTests {
    static let source = URL(fileURLWithPath: #filePath)
    static let article = source.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/HotPublish/HotPublish.docc/PublishingFromYourService.md")

    @Test("the article's function is the one this test runs, line for line")
    func articleHoldsTheCode() throws {
        let text = try String(contentsOf: Self.source, encoding: .utf8)
        let begin = try #require(text.range(of: "// guide:begin\n"))
        let end = try #require(text.range(of: "// guide:end\n"))
        let code = String(text[begin.upperBound..<end.lowerBound])
        #expect(code.contains("func publishRelease("))
        #expect(try String(contentsOf: Self.article, encoding: .utf8).contains(code))
    }

    @Test(
        "pack, release to 10%, sign with a token key, publish: the bucket serves a signed manifest naming the package"
    )
    func publishesToMoto() async throws {
        let moto = try await MotoServer.start()
        try await moto.createBucket("releases")
        setenv("AWS_ACCESS_KEY_ID", "hot-test", 1)
        setenv("AWS_SECRET_ACCESS_KEY", MotoServer.secretAccessKey, 1)
        setenv("AWS_REGION", "eu-west-1", 1)
        let token = try await SoftHSMToken.shared()
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("hot-guide-\(UUID().uuidString)")
        let folder = work.appendingPathComponent("web")
        try FileManager.default.createDirectory(
            at: folder.appendingPathComponent("assets"),
            withIntermediateDirectories: true
        )
        let page = Data("<!doctype html><script src=assets/app.js></script>".utf8)
        try page.write(to: folder.appendingPathComponent("index.html"))
        try Data("console.log('v3')".utf8).write(to: folder.appendingPathComponent("assets/app.js"))
        let remote = S3Remote(location: "s3://releases/web", endpoint: moto.baseURL, acl: "public-read")

        let summary = try await publishRelease(
            folder: folder,
            id: "web",
            version: "3",
            percent: 10,
            directory: work.appendingPathComponent("repo"),
            key: token.uri(token.ed25519),
            remote: remote
        )
        #expect(summary.contains("packed web 3: 2 files"), "\(summary)")
        #expect(summary.contains("released web 3 to 10% of clients"), "\(summary)")
        #expect(summary.contains("1 signature(s)") && summary.contains("1 package file(s) uploaded"), "\(summary)")

        // What the bucket serves: the manifest, signed by the token's key, naming the package
        // file, which is there byte for byte.
        let base = moto.baseURL.appendingPathComponent("releases/web")
        let (manifestData, _) = try await URLSession.shared.data(from: base.appendingPathComponent("manifest.json"))
        let envelope = try SignedEnvelope.parse(manifestData)
        let key = PublicKey(scheme: .ed25519, pem: token.ed25519.publicKeyPEM)
        let verifier = CryptoVerifier()
        let signature = try #require(envelope.signatures.first { $0.keyid == (try? verifier.keyID(of: key)) })
        #expect(
            try verifier.verify(signature: PKCS11SignerTests.bytes(hex: signature.sig), of: envelope.signed, with: key)
        )
        let body = try SignedManifestBody.decode(envelope.signed)
        let package = try #require(body.package("web"))
        #expect(package.current == "3" && package.rollout == 10)
        let entry = try #require(package.entry(for: "3"))
        let (archive, _) = try await URLSession.shared.data(from: base.appendingPathComponent(entry.url))
        #expect(try verifier.digest(of: archive, using: .sha256).hex == entry.sha256)
        try? FileManager.default.removeItem(at: work)
        await moto.stop()
    }
}
