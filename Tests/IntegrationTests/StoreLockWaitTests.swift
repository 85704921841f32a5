import Foundation
import HotCore
import HotTestServers
import HotTesting
import HotVerify
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A `hot sync` stopped (SIGSTOP, as a debugger or the system suspending an app would) while
/// it holds the exclusive store lock, and every other command run meanwhile: reads go on
/// from the last committed state and name the holder, changes give up with `storeBusy`
/// naming it; none waits for as long as the holder stays stopped.
@Suite("Waiting for the store lock")
struct StoreLockWaitTests {
    @Test(
        "with a sync stopped under the store lock, status names its process and ends, changes give up naming it, and the sync then completes",
        .enabled(if: FaultPointBuild.testsRun, FaultPointBuild.skipReason)
    )
    func stoppedHolder() async throws {
        let key = try CryptoSigner.generate()
        let work = try makeTemporaryDirectory("lock-wait")
        defer { try? FileManager.default.removeItem(at: work) }
        let publicKey = work.appendingPathComponent("server.pub")
        try key.publicKey.pem.write(to: publicKey, atomically: true, encoding: .utf8)
        let repository = try SignedRepository(keys: [key])
        try repository.pack(["a.txt": Data("one".utf8), "b.png": Data("image".utf8)], id: "pack", version: "1")
        try repository.sign(with: [key])
        let nginx = try await NginxServer.start(root: repository.directory)
        defer { nginx.stopNow() }
        let root = work.appendingPathComponent("store")
        let sync =
            ["sync", "--manifest", repository.url(on: nginx).absoluteString, "--root", root.path]
            + ["--trust", publicKey.path, "--quiet"]
        let hot = try builtExecutable("hot").path
        try await Subprocess.check(hot, sync)

        // Version 2 is synced by a process that stops while it holds the exclusive lock.
        try repository.pack(["a.txt": Data("two".utf8), "b.png": Data("image".utf8)], id: "pack", version: "2")
        try repository.sign(with: [key])
        let holder = try HotRun(
            sync,
            environment: ["HOT_STOP_AT": "after-flush"],
            log: work.appendingPathComponent("holder.log")
        )
        try await holder.waitUntilStopped()
        let pid = holder.processIdentifier
        let named = "held by process \(pid)"

        // Reads: the last committed state (version 1), the holder named on stderr.
        let status = try await Subprocess.run(hot, ["status", "--root", root.path])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stderr.contains(named), "\(status.stderr)")
        #expect(status.stdout.contains("pack"), "\(status.stdout)")
        let json = try await Subprocess.run(hot, ["status", "--root", root.path, "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        #expect(json.stderr.contains(named), "\(json.stderr)")
        let document = try JSONSerialization.jsonObject(with: json.standardOutput) as? [String: Any]
        let packages = try #require(document?["packages"] as? [[String: Any]])
        #expect(packages.first?["version"] as? String == "1")
        let resolve = try await Subprocess.run(hot, ["resolve", "a.txt", "--root", root.path])
        #expect(resolve.status == 0, "\(resolve.stderr)")
        #expect(
            try String(contentsOfFile: resolve.stdout.trimmingCharacters(in: .whitespacesAndNewlines), encoding: .utf8)
                == "one"
        )

        // Changes: refused after their timeout, naming the holder; nothing changed.
        for command in [["gc"], ["delete", "pack"], sync] {
            let arguments = (command == sync ? sync : command + ["--root", root.path]) + ["--lock-timeout", "1"]
            let refused = try await Subprocess.run(hot, arguments)
            #expect(refused.status != 0, "\(command): \(refused.stdout)")
            #expect(
                refused.stderr.contains("process \(pid) (hot) has held the store lock for more than 1 s"),
                "\(command): \(refused.stderr)"
            )
        }
        // A repair that finds nothing to repair needs no change: it checks the committed state.
        let repair = try await Subprocess.run(hot, ["repair", "--root", root.path, "--lock-timeout", "1"])
        #expect(repair.status == 0, "\(repair.stderr)")
        #expect(repair.stdout.contains("pack\t1\tok"), "\(repair.stdout)")

        // The holder continues and commits; everything is as one sync of version 2 leaves it.
        holder.signal(SIGCONT)
        #expect(await holder.wait() == .exited(0), "\(holder.output)")
        let after = try await Subprocess.run(hot, ["status", "--root", root.path, "--json"])
        #expect(after.stderr.isEmpty, "\(after.stderr)")
        let final = try JSONSerialization.jsonObject(with: after.standardOutput) as? [String: Any]
        #expect((final?["packages"] as? [[String: Any]])?.first?["version"] as? String == "2")
        let resolved = try await Subprocess.run(hot, ["resolve", "a.txt", "--root", root.path])
        #expect(
            try String(contentsOfFile: resolved.stdout.trimmingCharacters(in: .whitespacesAndNewlines), encoding: .utf8)
                == "two"
        )
    }

    @Test(
        "with /proc/locks longer than 8 KiB (200 other locks held by other processes), a change that gives up names the holder's pid",
        .enabled(if: FaultPointBuild.testsRun, FaultPointBuild.skipReason)
    )
    func longLockTable() async throws {
        let work = try makeTemporaryDirectory("lock-table")
        defer { try? FileManager.default.removeItem(at: work) }
        let repository = work.appendingPathComponent("repo")
        try writeTree(["a.txt": Data("one".utf8)], under: work.appendingPathComponent("v1"))
        let hot = try builtExecutable("hot").path
        try await Subprocess.check(
            hot,
            [
                "pack", work.appendingPathComponent("v1").path, "--id", "pack", "--version", "1", "--repo",
                repository.path,
            ]
        )
        let root = work.appendingPathComponent("store")
        let sync = [
            "sync", "--manifest", repository.appendingPathComponent("manifest.json").absoluteString, "--root",
            root.path,
            "--allow-unsigned", "--quiet",
        ]
        try await Subprocess.check(hot, sync)
        try writeTree(["a.txt": Data("two".utf8)], under: work.appendingPathComponent("v2"))
        try await Subprocess.check(
            hot,
            [
                "pack", work.appendingPathComponent("v2").path, "--id", "pack", "--version", "2", "--repo",
                repository.path,
            ]
        )

        // 200 locks on files of their own, held by two helper processes, one started before
        // the holder's lock and one after, so that its line lies more than a page into the
        // kernel's table whichever order the table lists them in.
        func holdLocks(_ name: String) throws -> ChildProcess {
            let helper = try ChildProcess(
                "python3",
                [
                    "-c",
                    """
                    import fcntl, os, sys, time
                    held = []
                    for n in range(100):
                        f = open(os.path.join(sys.argv[1], "%s-%d.lock" % (sys.argv[2], n)), "w")
                        fcntl.flock(f, fcntl.LOCK_SH)
                        held.append(f)
                    print("held", flush=True)
                    sys.stdin.read()
                    """,
                    work.path, name,
                ],
                standardInput: .pipe,
                standardOutput: .pipe
            )
            let line = helper.standardOutput.flatMap(ChildProcess.readLine)
            #expect(line == "held", "the lock helper said '\(line ?? "nothing")'")
            return helper
        }
        let before = try holdLocks("before")
        defer {
            before.kill()
            before.waitUntilExit()
        }
        let holder = try HotRun(
            sync,
            environment: ["HOT_STOP_AT": "after-flush"],
            log: work.appendingPathComponent("holder.log")
        )
        try await holder.waitUntilStopped()
        let after = try holdLocks("after")
        defer {
            after.kill()
            after.waitUntilExit()
        }
        let length = try await Subprocess.check("sh", ["-c", "wc -c < /proc/locks"])
        let bytes = Int(length.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(bytes > 8 * 1024, "/proc/locks holds \(bytes) bytes")

        let pid = holder.processIdentifier
        let refused = try await Subprocess.run(hot, ["gc", "--root", root.path, "--lock-timeout", "1"])
        #expect(refused.status != 0)
        #expect(
            refused.stderr.contains("process \(pid) (hot) has held the store lock for more than 1 s"),
            "\(refused.stderr)"
        )
        holder.signal(SIGCONT)
        #expect(await holder.wait() == .exited(0), "\(holder.output)")
    }
}
