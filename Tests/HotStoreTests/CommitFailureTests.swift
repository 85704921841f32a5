import Foundation
import HotCore
import HotStore
import Testing

/// Whether a 0o500 directory really refuses new files here (it does not for root, or
/// with CAP_DAC_OVERRIDE): probed, not guessed from the user id.
func readOnlyDirectoriesBlockWrites() -> Bool {
    let probe = FileManager.default.temporaryDirectory.appendingPathComponent(
        "HotStoreTests-probe-\(UUID().uuidString)"
    )
    guard (try? FileManager.default.createDirectory(at: probe, withIntermediateDirectories: false)) != nil else {
        return false
    }
    defer {
        try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: probe.path)
        try? FileManager.default.removeItem(at: probe)
    }
    guard (try? FileManager.default.setAttributes([.posixPermissions: 0o500], ofItemAtPath: probe.path)) != nil else {
        return false
    }
    return !FileManager.default.createFile(atPath: probe.appendingPathComponent("x").path, contents: Data())
}

@Suite("Failed commits leave the old snapshot")
struct CommitFailureTests {
    /// Skipped where permissions do not block writes (running as root); the failures below
    /// (target is a directory, root is a file) cover the same path there.
    @Test(
        "A read-only store root: .fileSystem, old content intact, no temporary file",
        .enabled(if: readOnlyDirectoriesBlockWrites(), "permissions do not block writes for this user"),
        arguments: StoreKind.allCases
    )
    func readOnlyRoot(kind: StoreKind) async throws {
        try await withTemporaryDirectory { parent in
            let root = parent.appendingPathComponent("store")
            let file = root.appendingPathComponent(kind.defaultFileName)
            try await kind.make(root: root).commit(richSnapshot(generation: 1))
            let before = try Data(contentsOf: file)
            try FileManager.default.setAttributes([.posixPermissions: 0o500], ofItemAtPath: root.path)
            let error = try await #require(throws: HotUpdateError.self) {
                try await kind.make(root: root).commit(richSnapshot(generation: 2))
            }
            #expect(error.code == .fileSystem)
            #expect(error.description.contains(file.path))
            #expect(try Data(contentsOf: file) == before)
            #expect(try listing(root) == [kind.defaultFileName])
            #expect(try await kind.make(root: root).load() == richSnapshot(generation: 1))
        }
    }

    @Test(
        "The target path is a directory: .fileSystem, directory untouched, no temporary file",
        arguments: StoreKind.allCases
    )
    func targetIsDirectory(kind: StoreKind) async throws {
        try await withTemporaryDirectory { root in
            let file = root.appendingPathComponent(kind.defaultFileName)
            try FileManager.default.createDirectory(at: file, withIntermediateDirectories: false)
            let inside = file.appendingPathComponent("keep.txt")
            try Data("keep".utf8).write(to: inside)
            let error = try await #require(throws: HotUpdateError.self) {
                try await kind.make(root: root).commit(richSnapshot())
            }
            #expect(error.code == .fileSystem)
            #expect(error.description.contains(file.path), "\(error)")
            #expect(try listing(root) == [kind.defaultFileName])
            #expect(try Data(contentsOf: inside) == Data("keep".utf8))
        }
    }

    @Test("The store root is a regular file: .fileSystem and the file intact", arguments: StoreKind.allCases)
    func rootIsFile(kind: StoreKind) async throws {
        try await withTemporaryDirectory { parent in
            let root = parent.appendingPathComponent("root-file")
            try Data("not a directory".utf8).write(to: root)
            await #expect(throws: HotUpdateError(.fileSystem, "")) {
                try await kind.make(root: root).commit(richSnapshot())
            }
            #expect(try Data(contentsOf: root) == Data("not a directory".utf8))
            #expect(try listing(parent) == ["root-file"])
        }
    }
}

@Suite("DurableFile")
struct DurableFileTests {
    @Test("Writes new files, replaces old ones, and leaves only the target")
    func writeAndReplace() async throws {
        try await withTemporaryDirectory { directory in
            let target = directory.appendingPathComponent("data.bin")
            try DurableFile.write(Data("one".utf8), to: target)
            #expect(try Data(contentsOf: target) == Data("one".utf8))
            let large = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            try DurableFile.write(large, to: target)
            #expect(try Data(contentsOf: target) == large)
            try DurableFile.write(Data(), to: target)
            #expect(try Data(contentsOf: target).isEmpty)
            #expect(try listing(directory) == ["data.bin"])
        }
    }

    @Test("A missing directory throws .fileSystem naming the target")
    func missingDirectory() async throws {
        try await withTemporaryDirectory { directory in
            let target = directory.appendingPathComponent("absent/data.bin")
            let error = try #require(throws: HotUpdateError.self) { try DurableFile.write(Data("x".utf8), to: target) }
            #expect(error.code == .fileSystem)
            #expect(error.subject == target.path)
            #expect(try listing(directory).isEmpty)
        }
    }
}
