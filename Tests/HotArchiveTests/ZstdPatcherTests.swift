import Foundation
import HotArchive
import HotCore
import Testing

/// zstd patch-from patches: made, applied back, and refused when they do not fit.
@Suite("zstd patches")
struct ZstdPatcherTests {
    /// A script of `lines` lines; `changed` rewrites one line in ten.
    static func script(lines: Int, changed: Bool) -> Data {
        var text = ""
        for line in 0..<lines {
            let stamp = changed && line % 10 == 3 ? "changed \(line * 31)" : "value \(line)"
            text += "export const item\(line) = { id: \(line), label: \"\(stamp)\" };\n"
        }
        return Data(text.utf8)
    }

    @Test(
        "a patch of a script with one line in ten changed applies back exactly and is far smaller than the file compressed alone",
        .enabled(if: ZstdPatcher.canMakePatches, "this build cannot make patches (the Zstd trait is off)")
    )
    func roundTrip() throws {
        let patcher = ZstdPatcher()
        let base = Self.script(lines: 5_000, changed: false)
        let target = Self.script(lines: 5_000, changed: true)
        let patch = try patcher.makePatch(base: base, target: target)
        #expect(try patcher.applied(patch: patch, base: base, expectedSize: Int64(target.count)) == target)
        let alone = try patcher.compressedSize(of: target)
        #expect(patch.count * 2 <= alone)
    }

    @Test(
        "a patch is refused against another base, for another size, truncated, or over the size limit",
        .enabled(if: ZstdPatcher.canMakePatches, "this build cannot make patches (the Zstd trait is off)")
    )
    func refusals() throws {
        let patcher = ZstdPatcher()
        let base = Self.script(lines: 2_000, changed: false)
        let target = Self.script(lines: 2_000, changed: true)
        let patch = try patcher.makePatch(base: base, target: target)
        let size = Int64(target.count)
        var otherBase = base
        otherBase[otherBase.count / 2] ^= 0x20
        for (patch, base, size) in [
            (patch, otherBase, size), (patch, base, size + 1), (patch.prefix(patch.count - 8), base, size),
        ] {
            let error = #expect(throws: HotUpdateError.self) {
                try patcher.applied(patch: Data(patch), base: base, expectedSize: size)
            }
            #expect(error?.code == .corruptArchive)
        }
        let small = ZstdPatcher(maxFileBytes: 1_000)
        let error = #expect(throws: HotUpdateError.self) {
            try small.applied(patch: patch, base: base, expectedSize: size)
        }
        #expect(error?.code == .limitExceeded)
    }

    @Test("a patch made by the zstd tool applies in every build; making one needs the Zstd trait")
    func toolPatch() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let base = Self.script(lines: 3_000, changed: false)
        let target = Self.script(lines: 3_000, changed: true)
        let baseFile = scratch.path("base.js")
        try base.write(to: baseFile)
        let patch = try await ZstdTool.compress(target, ["-19", "--patch-from=\(baseFile.path)"], in: scratch)
        let patcher = ZstdPatcher()
        #expect(try patcher.applied(patch: patch, base: base, expectedSize: Int64(target.count)) == target)
        let error = #expect(throws: HotUpdateError.self) {
            try patcher.applied(patch: patch, base: base, expectedSize: Int64(target.count) + 1)
        }
        #expect(error?.code == .corruptArchive)
        if !ZstdPatcher.canMakePatches {
            let refusal = #expect(throws: HotUpdateError.self) { try patcher.makePatch(base: base, target: target) }
            #expect(refusal?.code == .unsupported)
        }
    }
}
