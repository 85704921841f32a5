import Foundation
import HotArchive
import HotCore
import Testing

/// Archives made by real tools at test time, extracted by both unarchivers and
/// compared byte for byte with the tree they were made from.
@Suite struct RealToolArchiveTests {
    @Test(arguments: Backend.allCases)
    func infoZipRecursive(_ backend: Backend) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = scratch.path("src")
        try Trees.makeMixed(at: source)
        try Tool.check("zip", ["-qr", "../a.zip", "."], in: source)
        let report = try await backend.unarchiver.extract(scratch.path("a.zip"), to: scratch.path("out"))
        try Trees.expectEqual(scratch.path("out"), source)
        #expect(report.files.count == 8)
        #expect(report.totalBytes == report.files.reduce(0) { $0 + $1.size })
    }
}
