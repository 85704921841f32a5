import Foundation
import Testing

@testable import HotCore

@Suite("Names that collide")
struct PathCollisionTests {
    let nfc = "caf\u{E9}.txt"
    let nfd = "cafe\u{301}.txt"

    @Test("paths equal after Unicode normalisation collide, whatever the case rule")
    func normalisation() throws {
        #expect(!nfc.utf8.elementsEqual(nfd.utf8))
        for caseSensitive in [false, true] {
            let clash = try #require(PathCollision.first(in: ["a.txt", nfc, nfd], caseSensitive: caseSensitive))
            #expect(clash.first.utf8.elementsEqual(nfc.utf8) && clash.second.utf8.elementsEqual(nfd.utf8))
            #expect(!clash.byCaseOnly)
        }
    }

    @Test("paths that differ only by case collide unless the package is case-sensitive only")
    func caseFolding() throws {
        let clash = try #require(PathCollision.first(in: ["Readme.txt", "README.txt"], caseSensitive: false))
        #expect(clash == .init(first: "Readme.txt", second: "README.txt", byCaseOnly: true))
        #expect(PathCollision.first(in: ["Readme.txt", "README.txt"], caseSensitive: true) == nil)
        // Directories are paths too, and folding is Unicode's, not ASCII's.
        #expect(PathCollision.first(in: ["Img/a.png", "img/b.png"], caseSensitive: false)?.second == "img")
        #expect(PathCollision.first(in: ["\u{C9}T\u{C9}.txt", "\u{E9}t\u{E9}.txt"], caseSensitive: false) != nil)
        // The same name twice, and a directory shared by its files, are no collision.
        #expect(PathCollision.first(in: ["a/x", "a/y", "a/x", "b"], caseSensitive: false) == nil)
    }

    @Test("the error names both paths and says why")
    func message() {
        let error = #expect(throws: HotUpdateError.self) {
            try PathCollision.check(["dir/Readme.txt", "dir/README.txt"], caseSensitive: false, what: "the paths")
        }
        #expect(error?.code == .pathCollision)
        #expect(error?.message.contains("'dir/Readme.txt' and 'dir/README.txt' differ only by case") == true)
    }

    @Test("a manifest whose package ids differ only by case is refused")
    func manifestIDs() throws {
        let url = try #require(URL(string: "https://cdn.test/p.zip"))
        let lower = try PackageDescriptor(id: "img", version: "1", url: url)
        let upper = try PackageDescriptor(id: "IMG", version: "1", url: url)
        #expect(throws: HotUpdateError(.pathCollision, "")) { try Manifest(packages: [lower, upper]) }
        #expect(throws: HotUpdateError(.pathCollision, "")) {
            try Manifest(packages: [lower], disabledPackageIDs: ["IMG"])
        }
        #expect(try Manifest(packages: [lower]).packages.count == 1)
    }

    @Test("the volume probe tells this file system keeps case, and leaves nothing behind")
    func probe() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("probe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // Linux's file systems here keep case; the probe must say so.
        #expect(try FileSystem.ignoresCase(in: directory) == false)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }
}
