import Foundation
import HotTestServers

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The ```swift snippets of a Markdown file (the README, a DocC article), read so that each can
/// be type-checked against the products.
///
/// A snippet is compiled as a script, so top-level `await` works. Fragments use names the
/// prose introduces (`manifestURL`, `updater`); an article declares them in an HTML comment,
/// which neither DocC nor GitHub renders. Each marker is such a comment, starting a line of its
/// own before the snippet it concerns:
///
/// - `<!-- snippet-prelude: CODE -->` (or `CODE` on the lines after `snippet-prelude:`, up to
///   a line holding `-->`): CODE is compiled before every later snippet of its section (up to
///   the next heading), so that a later section may declare the same names otherwise.
/// - `<!-- snippet-continues -->`: the next snippet goes on from the one before it; they
///   compile as one program, in order.
/// - `<!-- snippet-manifest -->`: the next snippet holds arguments of `Package(…)` in a
///   `Package.swift` (`dependencies: […]`, `targets: […]`), checked against PackageDescription.
/// - `<!-- snippet-skip: REASON -->`: the next snippet is not checked, for the reason given.
///
/// Every program imports Foundation, as every file of an app does (UIKit, AppKit and SwiftUI
/// re-export it), and one whose snippets import nothing else gets `import HotUpdate` (a
/// prelude's imports do not count).
struct DocSnippets: Sendable {
    /// Lines of a Markdown file, with the file's path and the line the first one is on.
    struct Fragment: Sendable, Equatable {
        /// The file's path as reported (relative to the repository).
        var file: String
        /// The 1-based line of the fragment's first line.
        var line: Int
        /// The text.
        var code: String
    }

    /// What is done with a snippet.
    enum Kind: Sendable, Equatable {
        /// Type-checked as Swift.
        case swift
        /// Type-checked as arguments of `Package(…)`.
        case manifest
        /// Not checked, for a reason.
        case skipped(reason: String)
    }

    /// One ```swift block.
    struct Snippet: Sendable, Equatable {
        /// Its code, from the line after the opening fence.
        var fragment: Fragment
        /// What is done with it.
        var kind: Kind
        /// Whether it goes on from the snippet before it.
        var continues: Bool
        /// The preludes declared before it in its section, in order.
        var preludes: [Fragment]
    }

    /// A source file for the compiler, and what to compile it against.
    struct Program: Sendable, Equatable {
        /// Where its first snippet starts: `README.md:97`.
        var location: String
        /// The file's text.
        var source: String
        /// Whether it is `Package.swift` text rather than an app's code.
        var isManifest: Bool
    }

    /// The snippets, in file order.
    var snippets: [Snippet]
    /// The markers that could not be read, each `file:line: why`.
    var problems: [String]

    /// Reads `text`, the contents of the Markdown file reported as `file`.
    init(file: String, text: String) {
        var snippets: [Snippet] = []
        var problems: [String] = []
        var preludes: [Fragment] = []
        var pending: (kind: Kind, continues: Bool, line: Int)?
        let lines = text.components(separatedBy: "\n")
        var index = 0
        func mark(_ line: Int, _ kind: Kind? = nil, continues: Bool = false) {
            var next = pending ?? (.swift, false, line)
            if let kind {
                if next.kind != .swift { problems.append("\(file):\(line): two kinds of marker for one snippet") }
                next.kind = kind
            }
            next.continues = next.continues || continues
            pending = next
        }
        while index < lines.count {
            let line = lines[index]
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            let number = index + 1
            if trimmed.hasPrefix("```") {
                // A fenced block: read to its closing fence.
                let indentation = line.prefix { $0 == " " }.count
                let language = trimmed.dropFirst(3).trimmingCharacters(in: .whitespaces)
                var body: [String] = []
                index += 1
                while index < lines.count, lines[index].trimmingCharacters(in: .whitespaces) != "```" {
                    body.append(
                        String(lines[index].dropFirst(min(indentation, lines[index].prefix { $0 == " " }.count)))
                    )
                    index += 1
                }
                if index == lines.count { problems.append("\(file):\(number): a code block that never closes") }
                index += 1
                if language == "swift" {
                    let marker = pending ?? (.swift, false, number)
                    snippets.append(
                        Snippet(
                            fragment: Fragment(file: file, line: number + 1, code: body.joined(separator: "\n")),
                            kind: marker.kind,
                            continues: marker.continues,
                            preludes: preludes
                        )
                    )
                } else if let marker = pending {
                    problems.append("\(file):\(marker.line): a snippet marker before a block that is not ```swift")
                }
                pending = nil
                continue
            }
            guard trimmed.hasPrefix("<!-- snippet-") else {
                // A heading ends the section, and its preludes with it.
                if trimmed.hasPrefix("#"), trimmed.drop(while: { $0 == "#" }).first == " " { preludes = [] }
                index += 1
                continue
            }
            // A marker: its whole text, which may span lines.
            var comment = String(trimmed.dropFirst("<!-- snippet-".count))
            var commentLines = 0
            while !comment.contains("-->"), index + commentLines + 1 < lines.count {
                commentLines += 1
                comment += "\n" + lines[index + commentLines]
            }
            index += commentLines + 1
            guard let end = comment.range(of: "-->", options: .backwards) else {
                problems.append("\(file):\(number): a snippet marker that never closes")
                continue
            }
            let body = comment[..<end.lowerBound]
            let name = String(body.prefix { $0.isLetter || $0 == "-" })
            var argument = String(body.dropFirst(name.count))
            if argument.hasPrefix(":") { argument.removeFirst() }
            switch name {
            case "prelude":
                // The code starts on the marker's line, or on the next when the line holds no more.
                let firstLine = argument.prefix { $0 != "\n" }
                let startsBelow = firstLine.trimmingCharacters(in: .whitespaces).isEmpty
                let code = startsBelow ? String(argument.drop { $0 != "\n" }.dropFirst()) : argument
                if code.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
                    problems.append("\(file):\(number): an empty snippet-prelude")
                }
                preludes.append(Fragment(file: file, line: startsBelow ? number + 1 : number, code: code))
            case "continues":
                mark(number, continues: true)
            case "manifest":
                mark(number, .manifest)
            case "skip":
                let reason = argument.trimmingCharacters(in: .whitespacesAndNewlines)
                if reason.isEmpty { problems.append("\(file):\(number): snippet-skip without a reason") }
                mark(number, .skipped(reason: reason))
            default:
                problems.append("\(file):\(number): an unknown marker snippet-\(name)")
            }
        }
        if let marker = pending { problems.append("\(file):\(marker.line): a snippet marker with no snippet after it") }
        for (position, snippet) in snippets.enumerated() where snippet.continues {
            if position == 0 || snippets[position - 1].kind != .swift || snippet.kind != .swift {
                problems.append(
                    "\(snippet.fragment.file):\(snippet.fragment.line - 1): snippet-continues needs a checked Swift snippet before it"
                )
            }
        }
        self.snippets = snippets
        self.problems = problems
    }

    /// The programs to compile: one per run of snippets that continue one another, after the
    /// preludes of each of its snippets; one per manifest snippet. Skipped snippets make none.
    var programs: [Program] {
        var programs: [Program] = []
        var run: [Snippet] = []
        func flush() {
            guard let first = run.first else { return }
            var preludes: [Fragment] = []
            for prelude in run.flatMap(\.preludes) where !preludes.contains(prelude) { preludes.append(prelude) }
            let imports = run.map(\.fragment).contains { fragment in
                fragment.code.split(separator: "\n").contains {
                    $0.trimmingCharacters(in: .whitespaces).hasPrefix("import ")
                }
            }
            var source = "import Foundation\n" + (imports ? "" : "import HotUpdate\n")
            for fragment in preludes + run.map(\.fragment) {
                source += "#sourceLocation(file: \(Self.literal(fragment.file)), line: \(fragment.line))\n"
                source += fragment.code + "\n#sourceLocation()\n"
            }
            programs.append(
                Program(location: "\(first.fragment.file):\(first.fragment.line)", source: source, isManifest: false)
            )
            run = []
        }
        for snippet in snippets {
            if !snippet.continues { flush() }
            switch snippet.kind {
            case .swift:
                run.append(snippet)
            case .manifest:
                flush()
                let fragment = snippet.fragment
                let source = """
                    import PackageDescription
                    #sourceLocation(file: \(Self.literal(fragment.file)), line: \(fragment.line - 1))
                    let package = Package(name: "Snippet",
                    \(fragment.code)
                    )
                    #sourceLocation()

                    """
                programs.append(
                    Program(location: "\(fragment.file):\(fragment.line)", source: source, isManifest: true)
                )
            case .skipped:
                flush()
            }
        }
        flush()
        return programs
    }

    /// `text` as a Swift string literal.
    static func literal(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}

/// The compiler and the flags that built this run's products, read from the build folder the
/// running test binary lives in, so that a snippet sees the very modules the tests see (the
/// default build's in `.build`, the Apple configuration's in `.build-apple`).
struct SnippetCompiler: Sendable {
    /// The `swiftc` that built the package.
    var compiler: URL
    /// The flags a snippet of app code is compiled with: the built modules, the C modules'
    /// module maps, the module cache, the target.
    var flags: [String]
    /// Where the toolchain keeps PackageDescription.
    var manifestAPI: URL

    /// Finds the build folder beside the running test binary and reads, in its build
    /// description (`debug.yaml`), how the `module` target was compiled.
    ///
    /// - Throws: A `SnippetCompiler.NotFound` saying what was looked for where.
    static func locate(module: String = "DocSnippetTests") throws -> SnippetCompiler {
        let fileManager = FileManager.default
        var starts: [URL] = []
        if let executable = Bundle.main.executableURL { starts.append(executable) }
        starts.append(Bundle.main.bundleURL)
        starts += Bundle.allBundles.map(\.bundleURL).filter { $0.pathExtension == "xctest" }
        if let first = CommandLine.arguments.first { starts.append(URL(fileURLWithPath: first)) }
        // The products' folder: the first ancestor holding Modules/HotUpdate.swiftmodule.
        var products: URL?
        search: for start in starts {
            var directory = start.resolvingSymlinksInPath()
            for _ in 0..<8 {
                directory.deleteLastPathComponent()
                let modules = directory.appendingPathComponent("Modules/HotUpdate.swiftmodule")
                if fileManager.fileExists(atPath: modules.path) {
                    products = directory
                    break search
                }
            }
        }
        guard let products else {
            throw NotFound(
                "no built modules (Modules/HotUpdate.swiftmodule) above the test binary "
                    + "(\(starts.map(\.path).joined(separator: ", "))); build with `swift build --build-tests`"
            )
        }
        // The build description: `debug.yaml` for `…/<triple>/debug`, two folders up.
        let configuration = products.lastPathComponent
        var scratch = products
        var description: URL?
        for _ in 0..<3 {
            scratch.deleteLastPathComponent()
            let candidate = scratch.appendingPathComponent("\(configuration).yaml")
            if fileManager.fileExists(atPath: candidate.path) {
                description = candidate
                break
            }
        }
        guard let description else {
            throw NotFound("no \(configuration).yaml above \(products.path), where the build records its commands")
        }
        let arguments = try compileArguments(of: module, in: String(contentsOf: description, encoding: .utf8))
        guard let compiler = arguments.first, compiler.hasSuffix("swiftc") || compiler.hasSuffix("swiftc.exe") else {
            throw NotFound("\(description.path): the command compiling \(module) does not start with swiftc")
        }
        let compilerURL = URL(fileURLWithPath: compiler)
        return SnippetCompiler(
            compiler: compilerURL,
            flags: searchFlags(arguments.dropFirst()),
            manifestAPI: compilerURL.deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("lib/swift/pm/ManifestAPI")
        )
    }

    /// The arguments of the command that compiles `module`, from a build description:
    /// the `args` of the entry named `C.<module>-….module`.
    static func compileArguments(of module: String, in description: String) throws -> [String] {
        let lines = description.split(separator: "\n", omittingEmptySubsequences: false)
        guard
            let entry = lines.firstIndex(where: { line in
                let key = line.trimmingCharacters(in: .whitespaces)
                return key.hasPrefix("\"C.\(module)-") && key.hasSuffix(".module\":")
            })
        else { throw NotFound("the build description has no command compiling \(module)") }
        for line in lines[(entry + 1)...] {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("\"") && trimmed.hasSuffix(":") { break }  // the next entry
            guard trimmed.hasPrefix("args: ") else { continue }
            let list = Data(trimmed.dropFirst("args: ".count).utf8)
            return try JSONDecoder().decode([String].self, from: list)
        }
        throw NotFound("the build description's command compiling \(module) lists no arguments")
    }

    /// Of a compile command's arguments, those that say where modules are and what they were
    /// built for: search paths, module maps and other C flags, the module cache, target, SDK.
    static func searchFlags(_ arguments: ArraySlice<String>) -> [String] {
        let withValue: Set<String> = [
            "-I", "-F", "-Xcc", "-module-cache-path", "-target", "-sdk", "-resource-dir", "-vfsoverlay", "-Xfrontend",
        ]
        var flags: [String] = []
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            if withValue.contains(argument) {
                guard let value = iterator.next() else { break }
                flags += [argument, value]
            } else if argument.hasPrefix("-I") || argument.hasPrefix("-F") {
                flags.append(argument)
            }
        }
        return flags
    }

    /// The arguments that type-check `file`, a program of `DocSnippets`.
    func arguments(typeChecking file: URL, manifest: Bool) -> [String] {
        // The LLVM style quotes the snippet's own line under each message.
        let common = ["-typecheck", "-swift-version", "6", "-diagnostic-style", "llvm"]
        if manifest {
            return common + ["-I", manifestAPI.path, "-package-description-version", "6.1.0", file.path]
        }
        return common + flags + [file.path]
    }

    /// Type-checks `program` in `directory`: nil when it compiles, else the compiler's output.
    ///
    /// - Parameter deadline: How long the compiler may take before it is stopped and the
    ///   program reported as not checked.
    func check(_ program: DocSnippets.Program, in directory: URL, deadline: Duration) async throws -> String? {
        let file = directory.appendingPathComponent("snippet.swift")
        try program.source.write(to: file, atomically: true, encoding: .utf8)
        let result = try await DeadlineProcess.run(
            compiler,
            arguments(typeChecking: file, manifest: program.isManifest),
            deadline: deadline
        )
        guard let result else {
            return "the compiler did not finish within \(deadline); it was stopped"
        }
        return result.status == 0 ? nil : result.output
    }

    /// Why the compiler could not be found.
    struct NotFound: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}

/// A process run on a thread of its own (never blocking Swift's cooperative executor), stopped
/// at a deadline.
enum DeadlineProcess {
    /// What a finished process left.
    struct Result: Sendable {
        /// Its exit status.
        var status: Int32
        /// Standard output and standard error, together.
        var output: String
    }

    /// Runs `executable` with `arguments`; nil when it was still running at `deadline` (it is
    /// then terminated).
    static func run(_ executable: URL, _ arguments: [String], deadline: Duration) async throws -> Result? {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Swift.Result { try runBlocking(executable, arguments, deadline: deadline) })
            }.start()
        }
    }

    private static func runBlocking(_ executable: URL, _ arguments: [String], deadline: Duration) throws -> Result? {
        // One file for both streams: no pipe to fill up and block the compiler.
        let log = FileManager.default.temporaryDirectory
            .appendingPathComponent("snippet-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        let child = try ChildProcess(
            executable.path,
            arguments,
            standardOutput: .file(log.path, append: false),
            standardError: .standardOutput
        )
        let exited = DispatchSemaphore(value: 0)
        Thread {
            child.waitUntilExit()
            exited.signal()
        }.start()
        let seconds = Double(deadline.components.seconds) + Double(deadline.components.attoseconds) / 1e18
        if exited.wait(timeout: .now() + seconds) == .timedOut {
            child.signal(SIGTERM)
            if exited.wait(timeout: .now() + 30) == .timedOut {
                child.kill()
                exited.wait()
            }
            return nil
        }
        let output = try String(contentsOf: log, encoding: .utf8)
        return Result(status: child.waitUntilExit().status, output: output)
    }
}
