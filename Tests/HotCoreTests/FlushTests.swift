import Foundation
import Testing

@testable import HotCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The flush decision every platform runs, with stand-ins for the system calls: Apple's
/// path (`F_FULLFSYNC`, then `fsync` when refused; `sync` and a full flush for a whole file
/// system) runs here as it runs there, only the last call differs.
@Suite("Flushing to stable storage")
struct FlushTests {
    /// Records the calls made and answers them from a script: each call's results in
    /// order (0 once the script runs out), a failure setting the error `lastError` returns.
    final class FakeSystem: @unchecked Sendable {
        private let lock = NSLock()
        private var log: [String] = []
        private var scripts: [String: [Int32]] = [:]
        private var error: Int32 = 0

        var calls: [String] { lock.withLock { log } }

        /// Makes the next calls of `call` return `results`.
        func script(_ call: String, _ results: [Int32]) {
            lock.withLock { scripts[call] = results }
        }

        func answer(_ call: String, failingWith code: Int32) -> Int32 {
            lock.withLock {
                log.append(call)
                let result = scripts[call]?.first ?? 0
                if scripts[call]?.isEmpty == false { scripts[call]?.removeFirst() }
                if result != 0 { error = code }
                return result
            }
        }

        func flushCalls(fullSync: Bool, syncfs: Bool, error code: Int32 = EIO) -> FlushCalls {
            let full: @Sendable (Int32) -> Int32 = { _ in self.answer("fullSync", failingWith: code) }
            let fsync: @Sendable (Int32) -> Int32 = { _ in self.answer("fsync", failingWith: code) }
            let syncfsCall: @Sendable (Int32) -> Int32 = { _ in self.answer("syncfs", failingWith: code) }
            let sync: @Sendable () -> Void = { _ = self.answer("sync", failingWith: code) }
            let lastError: @Sendable () -> Int32 = { self.lock.withLock { self.error } }
            return FlushCalls(
                fullSync: fullSync ? full : nil,
                fsync: fsync,
                syncfs: syncfs ? syncfsCall : nil,
                sync: sync,
                lastError: lastError
            )
        }
    }

    @Test("Apple: F_FULLFSYNC alone when it succeeds")
    func fullSyncSucceeds() {
        let system = FakeSystem()
        #expect(FileSystem.flush(3, calls: system.flushCalls(fullSync: true, syncfs: false)) == 0)
        #expect(system.calls == ["fullSync"])
    }

    @Test("Apple: a file system that refuses F_FULLFSYNC gets fsync")
    func fullSyncRefused() {
        let system = FakeSystem()
        system.script("fullSync", [-1])
        #expect(FileSystem.flush(3, calls: system.flushCalls(fullSync: true, syncfs: false, error: ENOTSUP)) == 0)
        #expect(system.calls == ["fullSync", "fsync"])
    }

    @Test("fsync is retried while interrupted, and its error returned")
    func fsyncErrors() {
        let interrupted = FakeSystem()
        interrupted.script("fsync", [-1, -1, 0])
        #expect(FileSystem.flush(3, calls: interrupted.flushCalls(fullSync: false, syncfs: false, error: EINTR)) == 0)
        #expect(interrupted.calls == ["fsync", "fsync", "fsync"])

        let failing = FakeSystem()
        failing.script("fsync", [-1])
        #expect(FileSystem.flush(3, calls: failing.flushCalls(fullSync: false, syncfs: false, error: EIO)) == EIO)
    }

    @Test("Linux: a whole file system is one syncfs, and its error is returned")
    func syncfsPath() {
        let system = FakeSystem()
        #expect(FileSystem.flushFileSystem(of: 3, calls: system.flushCalls(fullSync: false, syncfs: true)) == 0)
        #expect(system.calls == ["syncfs"])
        let failing = FakeSystem()
        failing.script("syncfs", [-1])
        #expect(FileSystem.flushFileSystem(of: 3, calls: failing.flushCalls(fullSync: false, syncfs: true)) == EIO)
    }

    @Test("Apple: a whole file system is sync then F_FULLFSYNC; a refusal is accepted, an I/O error is not")
    func syncThenFullSync() {
        let system = FakeSystem()
        #expect(FileSystem.flushFileSystem(of: 3, calls: system.flushCalls(fullSync: true, syncfs: false)) == 0)
        #expect(system.calls == ["sync", "fullSync"])

        let refusing = FakeSystem()
        refusing.script("fullSync", [-1])
        #expect(
            FileSystem.flushFileSystem(of: 3, calls: refusing.flushCalls(fullSync: true, syncfs: false, error: ENOTSUP))
                == 0
        )

        let failing = FakeSystem()
        failing.script("fullSync", [-1])
        #expect(
            FileSystem.flushFileSystem(of: 3, calls: failing.flushCalls(fullSync: true, syncfs: false, error: EIO))
                == EIO
        )
    }

    @Test("a C library without syncfs (and no full flush) falls back to sync")
    func syncOnly() {
        let system = FakeSystem()
        #expect(FileSystem.flushFileSystem(of: 3, calls: system.flushCalls(fullSync: false, syncfs: false)) == 0)
        #expect(system.calls == ["sync"])
    }

    @Test("this platform's calls flush a real file")
    func realCalls() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("flush-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("f")
        try Data("x".utf8).write(to: file)
        let fd = open(file.path, O_RDWR)
        #expect(fd >= 0)
        defer { close(fd) }
        #expect(FileSystem.flush(fd) == 0)
        // Not syncFileSystem: a whole-file-system flush here stalls every other test's
        // writes; the engine's install tests run it.
        #if canImport(Darwin)
        #expect(FlushCalls.system.fullSync != nil)
        #else
        #expect(FlushCalls.system.fullSync == nil)
        #endif
        #if os(Linux)
        #expect(FlushCalls.system.syncfs != nil)
        #endif
    }
}
