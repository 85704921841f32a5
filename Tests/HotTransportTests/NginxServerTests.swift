import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

@Suite("The test nginx")
struct NginxServerTests {
    @Test("a server whose port another server holds does not start, rather than pass the other one off as itself")
    func portHeldByAnotherServer() async throws {
        let root = try ScratchDirectory.make("nginx-root")
        let holder = try await NginxServer.start(root: root)
        // While nginx retries its bind, the port accepts connections: the other server's.
        let error = await #expect(throws: HotUpdateError.self) {
            let second = try await NginxServer.start(root: root, options: .init(port: holder.port))
            await second.stop()
        }
        #expect(error?.code == .transportFailed)
        #expect(error?.message.contains("port \(holder.port) is in use") == true, "\(String(describing: error))")
        #expect(holder.isRunning)
        await holder.stop()
    }

    @Test("a server started while a pipe is open without close-on-exec does not hold it")
    func startedServerInheritsNoPipe() async throws {
        // As a Process started on another thread leaves its output pipe open while a server
        // starts: none of the server's processes may hold its write end.
        var fds: [Int32] = [-1, -1]
        try #require(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let root = try ScratchDirectory.make("nginx-pipe")
        #if os(Linux)
        // Other tests of this process start children of their own meanwhile, which may inherit
        // the pipe: what matters is whether the server's processes hold it, read from /proc.
        let pipeName = try #require(Self.link("/proc/self/fd/\(fds[1])"))
        let server = try await NginxServer.start(root: root)
        close(fds[1])
        let supervisor = server.supervisorProcessID
        let holders = Self.processes(holding: pipeName)
        let serverHolders = holders.filter { Self.descends($0, from: supervisor) }
        #expect(serverHolders.isEmpty, "the server's processes \(serverHolders) hold the pipe \(pipeName)")
        #else
        let server = try await NginxServer.start(root: root)
        close(fds[1])
        var flags = fcntl(fds[0], F_GETFL)
        flags |= O_NONBLOCK
        _ = fcntl(fds[0], F_SETFL, flags)
        var byte: UInt8 = 0
        // 0: the end (no writer left). -1 with EAGAIN: a writer is still open, in the server.
        let count = read(fds[0], &byte, 1)
        #expect(count == 0, "read gave \(count), errno \(errno): the server inherited the write end")
        #endif
        #expect(server.isRunning)
        await server.stop()
    }

    #if os(Linux)
    /// The target of a symbolic link, such as `pipe:[1234]` for a descriptor in /proc.
    static func link(_ path: String) -> String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: path)
    }

    /// Every process whose descriptors include `name` (`pipe:[1234]`).
    static func processes(holding name: String) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { pid_t($0) }.filter { pid in
            let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
            return descriptors.contains { link("/proc/\(pid)/fd/\($0)") == name }
        }
    }

    /// Whether `pid` is `ancestor` or one of its descendants, following parents in /proc.
    static func descends(_ pid: pid_t, from ancestor: pid_t) -> Bool {
        var current = pid
        for _ in 0..<64 {
            if current == ancestor { return true }
            guard current > 1,
                let stat = try? String(contentsOfFile: "/proc/\(current)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return false }
            // After "pid (name) state ppid": the name may hold spaces and parentheses.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 1, let parent = pid_t(fields[1]) else { return false }
            current = parent
        }
        return false
    }
    #endif
}
