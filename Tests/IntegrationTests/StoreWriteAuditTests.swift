import Foundation
import HotCore
import HotTestServers
import HotTesting
import Testing

/// The store is the only writer under its root. A full scenario runs with the real `hot` and
/// the `LaunchGuard` example under `strace -f -k`: every system call that creates, writes,
/// renames, links or removes a path under the root is listed with the stack that made it,
/// and each must come from the store's code (the types of HotCore's `Store/` and `OnDisk/`),
/// or from a part the store runs for itself: the metadata store it commits through (HotStore),
/// the commit hook it runs in its commits (HotAssets' `NameIndexWriter`), and an unarchiver
/// writing into the staging entry the store made for it.
@Suite("The store is the only writer under its root")
struct StoreWriteAuditTests {
    /// One write under the root, and who made it.
    struct Write: CustomStringConvertible {
        var call: String
        var path: String
        /// The project's frames, innermost first, demangled.
        var frames: [Frame]
        var description: String {
            "\(call) \(path) <- \(frames.prefix(6).map(\.name).joined(separator: " <- "))"
        }
    }

    struct Frame {
        /// The module the symbol belongs to (`HotCore`, `hot`…).
        var module: String
        /// The simplified demangled name, wrappers (closures, thunks) stripped.
        var name: String
        /// The type the function belongs to; nil for a free function.
        var type: String? {
            let head = name.split(separator: "(", maxSplits: 1).first.map(String.init) ?? name
            let parts = head.split(separator: ".")
            return parts.count > 1 ? String(parts[0]) : nil
        }
    }

    /// The project's types that only move bytes for their callers: a write they make belongs to
    /// the frame that called them.
    static let utilities: Set<String> = [
        "FileSystem", "FileWriter", "DurableFile", "OwnerFile", "BlockingThreads", "SerialFileQueues",
    ]

    /// The types HotCore declares in `Store/` and `OnDisk/`: the store's code.
    static func storeTypes() throws -> Set<String> {
        var types: Set<String> = []
        let pattern = try Regex(
            #"(?m)^\s*(?:public |package |private |fileprivate )?(?:final )?(?:struct|class|enum|actor) ([A-Z]\w*)"#
        )
        for folder in ["Store", "OnDisk"] {
            let directory = packageDirectory.appendingPathComponent("Sources/HotCore/\(folder)")
            for file in try FileManager.default.contentsOfDirectory(atPath: directory.path)
            where file.hasSuffix(".swift") {
                let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
                for match in text.matches(of: pattern) {
                    if let name = match.output[1].substring { types.insert(String(name)) }
                }
            }
        }
        return types
    }

    /// Whether the store's code made `write` (see the suite's description).
    static func isTheStores(_ write: Write, storeTypes: Set<String>) -> Bool {
        // Inside a staging entry the store made (`staging/<entry>/…`), the unarchiver writes the
        // package's tree; a stack libunwind could not follow there (no project frame at all)
        // is that writer's too.
        let inStagingEntry = write.path.hasPrefix("staging/") && write.path.split(separator: "/").count > 2
        guard let owner = write.frames.first(where: { !utilities.contains($0.type ?? "") && $0.type != nil }) else {
            return inStagingEntry && write.frames.isEmpty
        }
        switch owner.module {
        case "HotCore": return storeTypes.contains(owner.type ?? "")
        case "HotStore": return true
        case "HotAssets": return owner.type == "NameIndexWriter"
        case "HotArchive": return inStagingEntry
        default: return false
        }
    }

    /// The system calls that change what a path names.
    static let calls = [
        "openat", "creat", "rename", "renameat", "renameat2", "unlink", "unlinkat", "rmdir", "mkdir", "mkdirat",
        "link", "linkat", "symlink", "symlinkat", "truncate", "utimensat",
    ]

    /// Runs `executable` under `strace -f -k` and returns every write under `root`.
    static func traced(_ executable: URL, _ arguments: [String], root: String, strace: String) async throws -> [Write] {
        let log = try makeTemporaryDirectory("strace").appendingPathComponent("trace.txt")
        let run = try await Subprocess.run(
            strace,
            ["-f", "-k", "-qq", "-e", "trace=" + calls.joined(separator: ","), "-o", log.path, executable.path]
                + arguments
        )
        #expect(run.status == 0, "\(executable.lastPathComponent) \(arguments.joined(separator: " ")): \(run.stderr)")
        return try parse(try String(contentsOf: log, encoding: .utf8), root: root)
    }

    /// The writes under `root` in an `strace -k` log.
    static func parse(_ log: String, root: String) throws -> [Write] {
        let prefix = root.hasSuffix("/") ? root : root + "/"
        var calls: [(line: String, symbols: [String])] = []
        // With `-f`, a call another thread interrupts is split: `PID openat("…" <unfinished ...>`,
        // other threads' lines, then `PID <... openat resumed>) = 8` and the call's stack. The
        // two halves are joined by the thread's id, and the stack goes to the call.
        var unfinished: [Substring: Int] = [:]
        var current: Int?
        for line in log.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix(" > ") {
                guard let index = current, let open = line.firstIndex(of: "("), line[open...].hasPrefix("($s") else {
                    continue
                }
                let symbol = line[line.index(after: open)...].prefix { $0 != "+" && $0 != ")" }
                calls[index].symbols.append(String(symbol))
                continue
            }
            let thread = line.prefix { $0 != " " }
            if line.contains(" <... "), line.contains(" resumed>"), let index = unfinished.removeValue(forKey: thread) {
                calls[index].line += line.drop { $0 != ">" }.dropFirst()
                current = index
                continue
            }
            calls.append((String(line), []))
            current = calls.count - 1
            if line.hasSuffix("<unfinished ...>") {
                calls[calls.count - 1].line = String(line.dropLast("<unfinished ...>".count))
                unfinished[thread] = calls.count - 1
            }
        }
        var writes: [(call: String, path: String, symbols: [String])] = []
        for (line, symbols) in calls {
            guard let name = line.split(separator: " ").dropFirst().first?.prefix(while: { $0 != "(" }) else {
                continue
            }
            if name == "openat", !["O_WRONLY", "O_RDWR", "O_CREAT"].contains(where: line.contains) { continue }
            let paths = line.split(separator: "\"").enumerated().filter { $0.offset % 2 == 1 }.map {
                String($0.element)
            }
            // The path the call makes: a rename's or a link's destination.
            guard let path = paths.last(where: { $0 == root || $0.hasPrefix(prefix) }) else { continue }
            writes.append((String(name), path == root ? "." : String(path.dropFirst(prefix.count)), symbols))
        }
        let names = try demangle(Array(Set(writes.flatMap(\.symbols))))
        return writes.map { write in
            Write(
                call: write.call,
                path: write.path,
                frames: write.symbols.compactMap { symbol in
                    guard let module = module(of: symbol), let name = names[symbol] else { return nil }
                    return Frame(module: module, name: name)
                }
            )
        }
    }

    /// The project module a mangled symbol belongs to; nil for any other.
    static func module(of symbol: String) -> String? {
        var rest = symbol.dropFirst(2)  // "$s"
        let digits = rest.prefix { $0.isNumber }
        guard let length = Int(digits) else { return nil }
        rest = rest.dropFirst(digits.count)
        let module = String(rest.prefix(length))
        return module.hasPrefix("Hot") || module == "hot" || module == "LaunchGuard" ? module : nil
    }

    /// Simplified demangled names, wrappers stripped, by symbol.
    static func demangle(_ symbols: [String]) throws -> [String: String] {
        let child = try ChildProcess(
            "swift",
            ["demangle", "--simplified"],
            standardInput: .pipe,
            standardOutput: .pipe
        )
        let output = child.standardOutput.map(ChildProcess.drain)
        let text = symbols.joined(separator: "\n") + "\n"
        try child.write(Data(text.utf8))
        let data = output?.wait() ?? Data()
        child.waitUntilExit()
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        var names: [String: String] = [:]
        let wrappers = [
            try Regex(#"^(?:implicit )?closure #\d+ in "#), try Regex(#"^partial apply for "#), try Regex(#"^static "#),
            try Regex(#"^specialized "#), try Regex(#"^merged "#),
            try Regex(#"^\(\d+\) (?:await |suspend )?resume partial function for "#),
            try Regex(#"^thunk for "#), try Regex(#"^reabstraction thunk helper from "#),
        ]
        for (symbol, line) in zip(symbols, lines) {
            var name = String(line)
            var changed = true
            while changed {
                changed = false
                for wrapper in wrappers {
                    if let match = name.firstMatch(of: wrapper) {
                        name.removeSubrange(match.range)
                        changed = true
                    }
                }
            }
            names[symbol] = name
        }
        return names
    }

    static func strace() throws -> String {
        for directory in ["/usr/bin", "/bin", "/usr/local/bin"] {
            let candidate = "\(directory)/strace"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw HotUpdateError(.notFound, "strace is not installed: `apt-get install strace` (scripts/ensure-deps test)")
    }

    @Test("a call another thread interrupted is joined with its resumed half, and its stack is the call's")
    func interleavedThreads() throws {
        let lock =
            "$s7HotCore9StoreLockC013withExclusiveD04root4wait_x20"
            + "FoundationEssentials3URLV_AA0cD4WaitVxyKXEtKlFZ"
        let other = "$s3hot10S3EndpointV10AddressingO8rawValueSSvg"
        let log = """
            101 openat(AT_FDCWD, "/r/store.lock", O_RDWR|O_CREAT|O_CLOEXEC, 0644 <unfinished ...>
            102 openat(AT_FDCWD, "/r/trust.json", O_RDONLY) = 9
             > /x/hot(\(other)+0x10) [0x1]
            101 <... openat resumed>) = 8
             > /x/hot(\(lock)+0x2c) [0x2]
            102 rename("/r/.a.tmp", "/r/a") = 0
             > /x/hot(\(other)+0x10) [0x3]
            """
        let writes = try Self.parse(log, root: "/r")
        #expect(writes.map(\.path) == ["store.lock", "a"])
        #expect(writes.first?.frames.map(\.type) == ["StoreLock"])
        #expect(writes.last?.frames.first?.type == "S3Endpoint")
    }

    @Test("a full scenario with the real hot and LaunchGuard writes under the root only from the store's code")
    func onlyTheStoreWrites() async throws {
        let strace = try Self.strace()
        let storeTypes = try Self.storeTypes()
        #expect(storeTypes.isSuperset(of: ["Store", "StoreStateFile", "ObjectStore", "PartialDownload", "LossMarker"]))
        let published = try await PublishedRepository("write-audit")
        defer { published.stopNow() }
        let hot = try CommandLineTests.hotExecutable()
        let root = published.root
        var writes: [(step: String, write: Write)] = []
        func run(_ step: String, _ executable: URL, _ arguments: [String]) async throws {
            let found = try await Self.traced(executable, arguments, root: root, strace: strace)
            writes += found.map { (step, $0) }
        }

        // Install, update, lose a file and heal it, install on demand, collect garbage.
        try await published.publish("1", files: ["a.txt": Data("a 1".utf8), "img/b.png": noise(9_000, seed: 1)])
        let onDemand = published.work.appendingPathComponent("od")
        try writeTree(["od.txt": Data("on demand".utf8)], under: onDemand)
        try await PublisherWorkflowTests.hot([
            "pack", onDemand.path, "--id", "od", "--version", "1", "--repo", published.repo, "--delivery", "on-demand",
        ])
        try await PublisherWorkflowTests.hot(["sign", "--repo", published.repo, "--key", published.privateKey])
        try await run("sync", hot, published.sync)
        try await published.publish("2", files: ["a.txt": Data("a 2".utf8), "img/b.png": noise(9_000, seed: 2)])
        try await run("update", hot, published.sync)
        let active = try await published.active()
        #expect(active.version == "2")
        let status = try JSONDecoder().decode(
            CommandLineTests.StatusDocument.self,
            from: Data(try await PublisherWorkflowTests.hot(["status", "--root", root, "--json"]).stdout.utf8)
        )
        let tree = try #require(status.packages.first { $0.id == "app" }?.path)
        try FileManager.default.removeItem(atPath: tree + "/a.txt")
        let bundle = try makeTemporaryDirectory("bundle")
        try writeTree(["a.txt": Data("bundled".utf8)], under: bundle)
        try await run("resolve", hot, ["resolve", "a.txt", "--root", root, "--bundle", bundle.path])
        try await run("heal", hot, published.sync)
        #expect(try await published.active().files["a.txt"] == Data("a 2".utf8))
        try await run("install", hot, ["install", "od", "--root", root])
        try await run("status", hot, ["status", "--root", root, "--check"])
        try await run("gc", hot, ["gc", "--root", root, "--keep", "0"])
        // A launch with a trial and telemetry: the reporter's queue is under the root.
        try await run(
            "launch",
            try builtExecutable("LaunchGuard"),
            [
                "--manifest", published.manifestURL, "--root", root, "--trust", published.publicKey,
                "--telemetry", published.nginx.baseURL.appendingPathComponent("collect").absoluteString,
            ]
        )

        let paths = Set(writes.map { $0.write.path.split(separator: "/").first.map(String.init) ?? "" })
        // The scenario reached every part of the layout the audit is about.
        #expect(
            paths.isSuperset(of: ["store.json", "objects", "packages", "staging", "filelists", "losses", "partial"])
        )
        let outside = writes.filter { !Self.isTheStores($0.write, storeTypes: storeTypes) }
        let listed = outside.map { "\($0.step): \($0.write)" }.joined(separator: "\n")
        #expect(outside.isEmpty, "written under the root from outside the store's code:\n\(listed)")
    }
}
