import Foundation
import HotCore
import HotManifest
import HotTesting
import Testing

/// One schema for a version entry (``VersionEntry``): the signed manifests `hot pack` and
/// `hot sign` write and the unsigned schema-1 documents read and write through it, byte for
/// byte as before it was one type.
@Suite("Version entries")
struct VersionEntryTests {
    let base = URL(string: "https://cdn.test/app/manifest.json")!

    /// A manifest `hot pack` (`--md5 --password --case-sensitive-only --delivery on-demand`,
    /// and a second version with a delta) and `hot sign` wrote before the entry was one type.
    static let signedManifest = #"""
        {
          "signatures": [
            {"keyid":"16353b3b06ff6c12eb9a0a2ecd9c3f56440520a1dc24482d05b492c6c8e76754","sig":"6e8265fdfd6c51a532dbcffc736305c6e317f82d2e564a12dd4e8a7421d079abf7190db3fed96438f9d66d2737e981cf0f021c907b5eaf61be2ca31b272b9809"}
          ],
          "signed": {
          "_type" : "hot-manifest",
          "expires" : "2036-11-25T12:02:10Z",
          "keys" : {
            "16353b3b06ff6c12eb9a0a2ecd9c3f56440520a1dc24482d05b492c6c8e76754" : {
              "public" : "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAoKWhcwOoPsdnEh3WCG27DNQEibsxKWD/4tg3xeUpXSo=\n-----END PUBLIC KEY-----\n",
              "scheme" : "ed25519"
            }
          },
          "packages" : [
            {
              "delivery" : "on-demand",
              "disabled" : false,
              "id" : "images",
              "releases" : [
                "1",
                "2"
              ],
              "versions" : [
                {
                  "caseSensitive" : true,
                  "md5" : "4494d3b0e0ba5b7ba51f5717c5f78ee5",
                  "password" : "pw",
                  "sha256" : "73b41bef8df1d1e8ee15c899ed1265db2edf21845ff4b0642a7598e765e4e865",
                  "size" : 12947,
                  "unpackedSize" : 16212,
                  "url" : "packages/images-1-73b41bef8df1.zip",
                  "version" : "1"
                },
                {
                  "deltas" : [
                    {
                      "format" : 1,
                      "from" : "1",
                      "fromSHA256" : "73b41bef8df1d1e8ee15c899ed1265db2edf21845ff4b0642a7598e765e4e865",
                      "sha256" : "c4b1396f8269f176b7ad78c3035b586d17d75443ea801b1fb186bc5bde40497e",
                      "size" : 947,
                      "url" : "packages/images-1-to-2-c4b1396f8269.delta"
                    }
                  ],
                  "md5" : "5f76f2f09ab6e8fcd70d6f2245eae507",
                  "password" : "pw",
                  "sha256" : "061b1182bddc42da6bb96016144f87c08d4ce40ece9b7c9f53853ab645b996a0",
                  "size" : 9860,
                  "unpackedSize" : 12167,
                  "url" : "packages/images-2-061b1182bddc.zip",
                  "version" : "2"
                }
              ]
            }
          ],
          "schema" : 2,
          "signedAt" : "2026-11-28T12:02:10Z",
          "threshold" : 1,
          "version" : 1
        }
        }

        """#

    /// A schema-1 document as `ManifestDocument` wrote it before the entry was one type: an
    /// entry with every field, and one with the required fields only.
    static let unsignedManifest = #"""
        {
          "packages" : [
            {
              "delivery" : "on-demand",
              "deltas" : [
                {
                  "format" : 1,
                  "from" : "1",
                  "fromSHA256" : "73b41bef8df1d1e8ee15c899ed1265db2edf21845ff4b0642a7598e765e4e865",
                  "sha256" : "c4b1396f8269f176b7ad78c3035b586d17d75443ea801b1fb186bc5bde40497e",
                  "size" : 947,
                  "url" : "packages/images-1-to-2-c4b1396f8269.delta"
                }
              ],
              "id" : "images",
              "md5" : "5f76f2f09ab6e8fcd70d6f2245eae507",
              "password" : "pw",
              "sha256" : "061b1182bddc42da6bb96016144f87c08d4ce40ece9b7c9f53853ab645b996a0",
              "size" : 9860,
              "unpackedSize" : 12167,
              "url" : "packages/images-2-061b1182bddc.zip",
              "version" : "2"
            },
            {
              "id" : "fonts",
              "sha256" : "0a03e9a66c26d08418bdfad2ac49437337086055be20ace720e1c3ff16c83975",
              "size" : 276,
              "url" : "https://cdn.test/fonts-7.zip",
              "version" : "7"
            }
          ],
          "schema" : 1,
          "version" : 8
        }
        """#

    @Test("a signed manifest hot wrote decodes through the version entry and re-encodes byte for byte")
    func signedRoundTrip() throws {
        let envelope = try #require(try SignedEnvelope.read(Data(Self.signedManifest.utf8)))
        let body = try SignedManifestBody.decode(envelope.signed)
        #expect(try body.canonicalBytes() == envelope.signed)

        let images = try #require(body.package("images"))
        let first = try #require(images.entry(for: "1"))
        #expect(first.caseSensitive == true)
        #expect(first.password == "pw")
        #expect(first.md5 == "4494d3b0e0ba5b7ba51f5717c5f78ee5")
        #expect(first.deltas == nil)
        let second = try #require(images.entry(for: "2"))
        #expect(second.caseSensitive == nil)
        #expect(second.unpackedSize == 12167)
        #expect(second.deltas?.map(\.from) == ["1"])

        let offered = try ReleasePolicy(context: ClientContext(), verifier: FakeVerifier()).manifest(
            for: body,
            relativeTo: base
        )
        let descriptor = try #require(offered.packages.first)
        #expect(descriptor.id == "images")
        #expect(descriptor.version == "2")
        #expect(descriptor.url.absoluteString == "https://cdn.test/app/packages/images-2-061b1182bddc.zip")
        #expect(descriptor.delivery == .onDemand)
        #expect(descriptor.password == "pw")
        #expect(descriptor.unpackedSize == 12167)
        #expect(descriptor.caseSensitive == false)
        #expect(descriptor.deltas.map(\.url.lastPathComponent) == ["images-1-to-2-c4b1396f8269.delta"])
    }

    @Test("a schema-1 entry is a version entry with the package's id and delivery beside its fields, byte for byte")
    func unsignedRoundTrip() throws {
        let data = Data(Self.unsignedManifest.utf8)
        let document = try ManifestDocument.decode(data)
        #expect(try document.encoded() == data)

        // The signed manifest's entry of images 2 is the same entry, field for field.
        let envelope = try #require(try SignedEnvelope.read(Data(Self.signedManifest.utf8)))
        let signed = try #require(try SignedManifestBody.decode(envelope.signed).package("images")?.entry(for: "2"))
        let images = try #require(document.packages.first)
        #expect(images.versionEntry == signed)
        #expect(images.id == "images")
        #expect(images.delivery == .onDemand)
        #expect(images.url == "packages/images-2-061b1182bddc.zip")

        // Built from its parts, the document is the same bytes.
        var fonts = ManifestDocument.Entry(
            id: "fonts",
            version: "7",
            url: "https://cdn.test/fonts-7.zip",
            size: 276,
            sha256: "0a03e9a66c26d08418bdfad2ac49437337086055be20ace720e1c3ff16c83975"
        )
        #expect(document.packages.last == fonts)
        fonts.md5 = "00112233445566778899aabbccddeeff"
        #expect(fonts.versionEntry.md5 == "00112233445566778899aabbccddeeff")
        let rebuilt = ManifestDocument(
            version: 8,
            packages: [
                ManifestDocument.Entry(id: "images", versionEntry: signed, delivery: .onDemand), document.packages[1],
            ]
        )
        #expect(try rebuilt.encoded() == data)

        let manifest = try document.manifest(relativeTo: base)
        #expect(manifest.packages.map(\.delivery) == [.onDemand, .prefetch])
        #expect(manifest.packages.first?.deltas.count == 1)
    }
}
