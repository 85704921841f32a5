import Foundation
import HotCore
import Testing

@Suite("Values")
struct ValueTests {
    @Test("digests parse hex in either case and print lowercase")
    func digestHex() throws {
        let digest = try Digest(algorithm: .md5, hex: "E963ED645C50A004697530FA596F180B")
        #expect(digest.hex == "e963ed645c50a004697530fa596f180b")
        #expect(digest.bytes.count == 16)
        #expect(throws: HotUpdateError(.invalidArgument, "")) { try Digest(algorithm: .sha256, hex: digest.hex) }
        #expect(throws: HotUpdateError(.invalidArgument, "")) {
            try Digest(algorithm: .md5, hex: String(repeating: "g", count: 32))
        }
    }

    @Test("errors compare by code and print their chain of causes")
    func errorChain() {
        let inner = HotUpdateError(.transportFailed, "connection reset", subject: "https://cdn.test/a.zip")
        let outer = HotUpdateError(.corruptArchive, "cannot unpack", packageID: "images", cause: inner)
        #expect(outer == HotUpdateError(.corruptArchive, "something else"))
        #expect(outer != inner)
        #expect(outer.description == "package images: cannot unpack")
        let detailed = outer.detailedDescription()
        #expect(detailed.contains("caused by: https://cdn.test/a.zip: connection reset"))
        #expect(detailed.contains("transportFailed"))
    }

    @Test("stored paths must stay inside the root", arguments: ["/etc", "../x", "packages/../..", "", "a//b", "./a"])
    func layoutRefusesEscapes(path: String) {
        let layout = StoreLayout(root: URL(fileURLWithPath: "/var/empty/store"))
        #expect(throws: HotUpdateError(.storeCorrupt, "")) { try layout.url(forRelativePath: path) }
    }

    @Test("package ids and versions must be safe directory names")
    func descriptorValidation() throws {
        let url = URL(string: "https://cdn.test/a.zip")!
        _ = try PackageDescriptor(id: "h5-home_2.x", version: "1.0.3+build~1", url: url)
        for bad in ["", ".", "..", "a/b", "a b", String(repeating: "a", count: 129), "é"] {
            #expect(throws: HotUpdateError(.manifestInvalid, "")) {
                try PackageDescriptor(id: bad, version: "1", url: url)
            }
        }
    }
}
