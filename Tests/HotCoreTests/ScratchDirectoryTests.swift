import Foundation
import HotTestServers
import HotTesting
import Testing

@Suite("Scratch directories of tests")
struct ScratchDirectoryTests {
    @Test("a directory is made under this process's parent, named for its label, empty")
    func made() throws {
        let directory = try ScratchDirectory.make("scratch")
        #expect(
            directory.deletingLastPathComponent().standardizedFileURL
                == ScratchDirectory.parentDirectory.standardizedFileURL
        )
        #expect(directory.lastPathComponent.hasPrefix("scratch-"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
        #expect(ScratchDirectory.parentDirectory.lastPathComponent.hasPrefix("hotupdate-tests-\(getpid())-"))
    }

    @Test("the parent of a process that is gone is removed; a live process's, and other names, are kept")
    func abandonedParentsAreSwept() async throws {
        let area = try ScratchDirectory.make("sweep")
        // A process that has exited: its id names no process now.
        let exited = try ChildProcess("/bin/true")
        exited.waitUntilExit()
        let gone = exited.pid
        let names = [
            "hotupdate-tests-\(gone)-deadbeef", "hotupdate-tests-\(getpid())-alive000", "hotupdate-tests-1-init0000",
            "hotupdate-tests-notapid", "other-\(gone)-deadbeef",
        ]
        for name in names {
            let directory = area.appendingPathComponent(name, isDirectory: true)
            try FileManager.default.createDirectory(
                at: directory.appendingPathComponent("store/objects"),
                withIntermediateDirectories: true
            )
            try Data("x".utf8).write(to: directory.appendingPathComponent("store/objects/a"))
        }
        let removed = ScratchDirectory.sweepAbandoned(in: area)
        #expect(removed.map(\.lastPathComponent) == ["hotupdate-tests-\(gone)-deadbeef"])
        let left = try FileManager.default.contentsOfDirectory(atPath: area.path).sorted()
        #expect(left == names.dropFirst().sorted())
    }
}
