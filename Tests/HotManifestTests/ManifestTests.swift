import Foundation
import HotCore
import HotManifest
import HotTesting
import Testing

@Suite("Manifests")
struct ManifestTests {
    let base = URL(string: "https://cdn.test/app/manifest.json")!

    @Test("native manifest: relative URLs resolve against the manifest's URL")
    func nativeRelative() throws {
        let json = """
            {"schema": 1, "packages": [
              {"id": "images", "version": "3", "url": "packages/images-3.zip", "size": 10,
               "sha256": "\(String(repeating: "ab", count: 32))"},
              {"id": "fonts", "version": "1", "url": "https://other.test/f.zip", "size": 5,
               "sha256": "\(String(repeating: "CD", count: 32))", "md5": "\(String(repeating: "0f", count: 16))"}
            ]}
            """
        let manifest = try ManifestDocument.decode(Data(json.utf8)).manifest(relativeTo: base)
        #expect(
            manifest.packages.map(\.url.absoluteString) == [
                "https://cdn.test/app/packages/images-3.zip", "https://other.test/f.zip",
            ]
        )
        #expect(manifest.packages[1].sha256?.hex == String(repeating: "cd", count: 32))
        #expect(manifest.packages[1].md5 != nil)
        #expect(manifest.isComplete)
    }

    @Test(
        "native manifest: malformed documents are refused",
        arguments: [
            "not json",
            #"{"schema": 2, "packages": []}"#,
            #"{"schema": 1, "packages": [{"id": "../x", "version": "1", "url": "a.zip", "size": 1, "sha256": "\#(String(repeating: "ab", count: 32))"}]}"#,
            #"{"schema": 1, "packages": [{"id": "x", "version": "1/2", "url": "a.zip", "size": 1, "sha256": "\#(String(repeating: "ab", count: 32))"}]}"#,
            #"{"schema": 1, "packages": [{"id": "x", "version": "1", "url": "a.zip", "size": 1, "sha256": "abc"}]}"#,
            #"{"schema": 1, "packages": [{"id": "x", "version": "1", "url": "a.zip", "size": -1, "sha256": "\#(String(repeating: "ab", count: 32))"}]}"#,
            #"{"schema": 1, "packages": [{"id": "x", "version": "1", "url": "a.zip", "size": 1, "sha256": "\#(String(repeating: "ab", count: 32))"}, {"id": "x", "version": "2", "url": "b.zip", "size": 1, "sha256": "\#(String(repeating: "ab", count: 32))"}]}"#,
        ]
    )
    func nativeInvalid(json: String) throws {
        #expect(throws: HotUpdateError(.manifestInvalid, "")) {
            try ManifestDocument.decode(Data(json.utf8)).manifest(relativeTo: base)
        }
    }

    @Test("native manifest: upsert replaces in place and encoding round-trips")
    func upsertRoundTrip() throws {
        var document = ManifestDocument()
        let sha = String(repeating: "ab", count: 32)
        document.upsert(.init(id: "a", version: "1", url: "a-1.zip", size: 1, sha256: sha))
        document.upsert(.init(id: "b", version: "1", url: "b-1.zip", size: 1, sha256: sha))
        document.upsert(.init(id: "a", version: "2", url: "a-2.zip", size: 2, sha256: sha))
        #expect(document.packages.map(\.version) == ["2", "1"])
        #expect(try ManifestDocument.decode(document.encoded()) == document)
    }

    @Test("patch info {url, md5} becomes one package whose version is the md5")
    func patchInfo() throws {
        let md5 = "e963ed645c50a004697530fa596f180b"
        let manifest = try PatchInfoManifestSource.manifest(
            from: Data(#"{"url": "patch_04.zip", "md5": "\#(md5)"}"#.utf8),
            relativeTo: base,
            packageID: "patch"
        )
        let package = try #require(manifest.packages.first)
        #expect(package.id == "patch")
        #expect(package.version == md5)
        #expect(package.md5?.hex == md5)
        #expect(package.sha256 == nil)
        #expect(package.url.absoluteString == "https://cdn.test/app/patch_04.zip")
    }

    @Test("patch info with an empty url means no patch", arguments: [#"{"url": "", "md5": ""}"#, "{}"])
    func patchInfoEmpty(json: String) throws {
        let manifest = try PatchInfoManifestSource.manifest(from: Data(json.utf8), relativeTo: base, packageID: "patch")
        #expect(manifest.packages.isEmpty)
        #expect(manifest.isComplete)
    }

    @Test(
        "patch info without a valid md5 is refused",
        arguments: [#"{"url": "p.zip"}"#, #"{"url": "p.zip", "md5": "zz"}"#, "[]"]
    )
    func patchInfoInvalid(json: String) throws {
        #expect(throws: HotUpdateError(.manifestInvalid, "")) {
            try PatchInfoManifestSource.manifest(from: Data(json.utf8), relativeTo: base, packageID: "patch")
        }
    }

    @Test("manifest sources fetch through the transport and refuse HTTP errors and oversize documents")
    func sourcesUseTransport() async throws {
        let transport = FakeTransport()
        let sha = String(repeating: "ab", count: 32)
        let json =
            #"{"schema": 1, "packages": [{"id": "x", "version": "1", "url": "x.zip", "size": 1, "sha256": "\#(sha)"}]}"#
        await transport.serve(Data(json.utf8), at: base)
        let manifest = try await StaticManifestSource(url: base, transport: transport).fetchManifest()
        #expect(manifest.packages.first?.url.absoluteString == "https://cdn.test/app/x.zip")

        await #expect(throws: HotUpdateError(.byteLimitExceeded, "")) {
            try await StaticManifestSource(url: base, transport: transport, maxBytes: 10).fetchManifest()
        }
        await #expect(throws: HotUpdateError(.httpStatus, "")) {
            try await StaticManifestSource(url: URL(string: "https://cdn.test/missing.json")!, transport: transport)
                .fetchManifest()
        }
    }
}
