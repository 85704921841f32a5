import Foundation
import HotArchive
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

/// A delta that downloads on a full disk but cannot be unpacked: its kept bytes under
/// `partial/` must go before the full package's download starts, or they take the room that
/// download needs, on this attempt and on every later one.
///
/// The store is on a small tmpfs (see ``TemporaryFileSystem``); the update adds a large text
/// file, so the delta is smaller than the full package but unpacks to more than the room left.
/// The room is chosen so that the full package downloads only when the delta's bytes are gone.
@Suite("a full disk and a delta", .serialized)
struct FullDiskDeltaTests {
    @Test(
        "a delta refused for want of space leaves nothing in partial/ when the fallback starts",
        .enabled(if: FaultPointBuild.testsRun, FaultPointBuild.skipReason)
    )
    func nothingKeptWhenTheFallbackStarts() async throws {
        try await withFullDisk("full-disk-delta-abort") { setup in
            let update = try HotRun(
                setup.syncArguments,
                environment: ["HOT_ABORT_AT": "before-fallback"],
                log: setup.work.appendingPathComponent("update.log")
            )
            #expect(await update.wait() == .signalled(SIGABRT), "the run did not reach the fallback: \(update.output)")
            #expect(setup.deltaRefusedForSpace(update), "\(update.output)")
            #expect(setup.kept().isEmpty, "partial/ still holds \(setup.kept()) as the fallback starts")
            #expect(!setup.kept(including: true).contains { $0.hasPrefix(setup.deltaSHA256) })
        }
    }

    @Test("the fallback after a delta refused for want of space fails for its own size, not for the delta's bytes")
    func fallbackIsNotStarvedByTheDelta() async throws {
        try await withFullDisk("full-disk-delta") { setup in
            let update = try HotRun(setup.syncArguments, log: setup.work.appendingPathComponent("update.log"))
            #expect(await update.wait() == .exited(1), "\(update.output)")
            #expect(setup.deltaRefusedForSpace(update), "\(update.output)")
            let errors = update.standardError.split(separator: "\n").filter { $0.hasPrefix("hot: error: ") }
            // The full package downloaded (the room fits it once the delta's bytes are gone) and
            // the disk ran full unpacking it, on one of its files; with the delta's bytes still
            // there, it would have run full downloading, under partial/.
            #expect(
                errors.contains { line in
                    line.contains("disk full") && ["/big.txt", "/keep.bin", "/v.txt"].contains { line.contains($0) }
                },
                "expected a disk-full error naming a file of the package: \(update.output)"
            )
            #expect(!errors.contains { $0.contains("/partial/") }, "\(update.output)")
            #expect(setup.kept().isEmpty, "partial/ still holds \(setup.kept())")
        }
    }
}

/// A store on a tmpfs with `p` 1 installed, a repository offering `p` 2 with a delta from 1,
/// and a filler that leaves just the room described on ``FullDiskDeltaTests``.
private struct FullDiskSetup {
    var work: URL
    var root: URL
    var syncArguments: [String]
    var deltaSHA256: String

    /// Whether the run's log (it runs with `--verbose`) says the delta was refused because
    /// the disk was full, the log line written before the fallback starts.
    func deltaRefusedForSpace(_ run: HotRun) -> Bool {
        run.standardError.split(separator: "\n").contains { line in
            line.contains("the delta was refused; downloading the full package") && line.contains("disk full")
        }
    }

    /// The data files kept under `partial/`; with `including`, the sidecars too.
    func kept(including sidecars: Bool = false) -> [String] {
        FileSystem.contents(of: root.appendingPathComponent("partial")).filter { name in
            !name.hasPrefix(".") && (sidecars || !name.hasSuffix(".json"))
        }.sorted()
    }
}

/// Builds the setup, runs `body`, then makes room again and checks that the next sync
/// installs `p` 2 and leaves nothing behind.
private func withFullDisk(_ label: String, _ body: (FullDiskSetup) async throws -> Void) async throws {
    let work = try makeTemporaryDirectory(label)
    defer { try? FileManager.default.removeItem(at: work) }
    let mountPoint = work.appendingPathComponent("disk")
    try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
    guard try await TemporaryFileSystem.mount(at: mountPoint, megabytes: 16) else { return }
    defer { TemporaryFileSystem.unmount(mountPoint) }

    // Version 2 adds a text file that deflates to about half: the delta holds it (and the
    // small changed file), the full package holds it and the incompressible file both.
    let keep = noise(1_000_000, seed: 81)
    let oldFiles = ["keep.bin": keep, "v.txt": Data("one".utf8)]
    let newFiles = ["keep.bin": keep, "v.txt": Data("two".utf8), "big.txt": hexText(noise(1_500_000, seed: 82))]
    let repository = try Repository()
    defer { try? FileManager.default.removeItem(at: repository.directory) }
    let sources = work.appendingPathComponent("sources")
    try writeTree(oldFiles, under: sources.appendingPathComponent("p1"))
    try writeTree(newFiles, under: sources.appendingPathComponent("p2"))
    let base = try repository.publish(sources.appendingPathComponent("p1"), id: "p", version: "1")
    try FileManager.default.copyItem(
        at: repository.manifestFile,
        to: repository.directory.appendingPathComponent("m1.json")
    )
    var target = try repository.publish(sources.appendingPathComponent("p2"), id: "p", version: "2")
    let deltaFile = repository.directory.appendingPathComponent("packages/p-1-to-2.delta")
    try DeltaWriter.write(
        packageID: "p",
        base: DeltaWriter.Side(version: "1", sha256: base.sha256, directory: sources.appendingPathComponent("p1")),
        target: DeltaWriter.Side(version: "2", sha256: target.sha256, directory: sources.appendingPathComponent("p2")),
        to: deltaFile,
        verifier: CryptoVerifier(),
        options: DeltaWriter.Options(patcher: nil)
    )
    let deltaSize = Int64(try Data(contentsOf: deltaFile).count)
    let deltaSHA256 = try CryptoVerifier().digest(ofFile: deltaFile, using: .sha256).hex
    target.deltas = [
        DeltaEntry(
            from: "1",
            fromSHA256: base.sha256,
            url: "packages/p-1-to-2.delta",
            size: deltaSize,
            sha256: deltaSHA256
        )
    ]
    try repository.update { $0.upsert(target) }
    try FileManager.default.copyItem(
        at: repository.manifestFile,
        to: repository.directory.appendingPathComponent("m2.json")
    )
    let server = try await NginxServer.start(root: repository.directory)

    let root = mountPoint.appendingPathComponent("store")
    func arguments(_ manifest: String) -> [String] {
        [
            "sync", "--manifest", server.baseURL.appendingPathComponent(manifest).absoluteString, "--root", root.path,
            "--allow-unsigned", "--quiet",
        ]
    }
    let (installed, installOutput) = try await HotRun.run(
        arguments("m1.json"),
        log: work.appendingPathComponent("v1.log")
    )
    try #require(installed == .exited(0), "\(installOutput)")

    // Room for the full package's download plus a few pages of small files (the lower bound),
    // but less than the delta and its unpacking take (the upper bound): half-way between.
    // Less than the delta's bytes plus the full package, too: kept, they starve its download.
    let page: Int64 = 4096
    let pages = { (bytes: Int64) in (bytes + page - 1) / page * page }
    let unpackedDelta = pages(Int64(newFiles["big.txt"]?.count ?? 0)) + 4 * page
    let low = pages(target.size) + 8 * page
    let high = pages(deltaSize) + unpackedDelta
    try #require(deltaSize < target.size, "the delta (\(deltaSize)) must be smaller than the package (\(target.size))")
    try #require(high - low > 64 * page, "no room between \(low) and \(high) bytes")
    let room = (low + high) / 2
    try #require(room < pages(deltaSize) + pages(target.size), "the delta's bytes would not starve the download")
    let filler = mountPoint.appendingPathComponent("filler")
    try TemporaryFileSystem.fill(filler, leaving: room, on: mountPoint)

    try await body(
        FullDiskSetup(
            work: work,
            root: root,
            syncArguments: arguments("m2.json") + ["--verbose"],
            deltaSHA256: deltaSHA256
        )
    )

    // The previous version stays active and whole.
    let during = try await StoreInspection.status(
        root: root,
        check: true,
        log: work.appendingPathComponent("check.log")
    )
    #expect(during["p"]?.version == "1")
    #expect(try during["p"]?.path.flatMap { try StoreInspection.tree(URL(fileURLWithPath: $0)) } == oldFiles)

    // With room again, the next sync installs version 2 and leaves nothing behind.
    try FileManager.default.removeItem(at: filler)
    let (retried, retryOutput) = try await HotRun.run(
        arguments("m2.json"),
        log: work.appendingPathComponent("retry.log")
    )
    #expect(retried == .exited(0), "\(retryOutput)")
    let after = try await StoreInspection.status(root: root, check: true, log: work.appendingPathComponent("after.log"))
    #expect(after["p"]?.version == "2" && after["p"]?.state == "installed")
    #expect(try after["p"]?.path.flatMap { try StoreInspection.tree(URL(fileURLWithPath: $0)) } == newFiles)
    #expect(try StoreInspection.leftovers(root: root) == [])
    #expect(FileSystem.contents(of: root.appendingPathComponent("partial")).filter { !$0.hasPrefix(".") }.isEmpty)
    await server.stop()
}

/// `data` as lowercase hexadecimal text: twice as long, and deflate halves it again.
private func hexText(_ data: Data) -> Data {
    let digits = Array("0123456789abcdef".utf8)
    var text = [UInt8]()
    text.reserveCapacity(data.count * 2 + data.count / 32)
    for (index, byte) in data.enumerated() {
        text.append(digits[Int(byte >> 4)])
        text.append(digits[Int(byte & 0x0F)])
        if index % 32 == 31 { text.append(UInt8(ascii: "\n")) }
    }
    return Data(text)
}
