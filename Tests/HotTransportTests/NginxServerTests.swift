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
}
