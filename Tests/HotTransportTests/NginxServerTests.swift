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

    @Test(
        "a server started while a pipe is open without close-on-exec does not hold it: its reader sees the end"
    )
    func startedServerInheritsNoPipe() async throws {
        // As a Process started on another thread leaves its output pipe open while a server
        // starts: the pipe's reader must see the end once the parent closes the write end.
        var fds: [Int32] = [-1, -1]
        try #require(pipe(&fds) == 0)
        let root = try ScratchDirectory.make("nginx-pipe")
        let server = try await NginxServer.start(root: root)
        close(fds[1])
        var flags = fcntl(fds[0], F_GETFL)
        flags |= O_NONBLOCK
        _ = fcntl(fds[0], F_SETFL, flags)
        var byte: UInt8 = 0
        // 0: the end (no writer left). -1 with EAGAIN: a writer is still open, in the server.
        let count = read(fds[0], &byte, 1)
        let code = errno
        close(fds[0])
        #expect(count == 0, "read gave \(count), errno \(code): the server inherited the write end")
        #expect(server.isRunning)
        await server.stop()
    }
}
