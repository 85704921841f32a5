import Foundation
import Testing

/// Every ```swift snippet of the README and of the DocC articles type-checks against the
/// products as this run built them, so a guide cannot drift from the code. The markers an
/// article uses to declare what its prose introduces are `DocSnippets`'.
@Suite("documentation snippets")
struct DocSnippetTests {
    /// How long one compiler run may take on a loaded machine before it is stopped.
    static let deadline = Duration.seconds(300)

    /// The README and every DocC article, as paths relative to the repository.
    static func documents() throws -> [String] {
        let sources = packageDirectory.appendingPathComponent("Sources")
        var documents = ["README.md"]
        for target in try FileManager.default.contentsOfDirectory(atPath: sources.path).sorted() {
            let targetDirectory = sources.appendingPathComponent(target)
            let catalogs = (try? FileManager.default.contentsOfDirectory(atPath: targetDirectory.path)) ?? []
            for catalog in catalogs.sorted() where catalog.hasSuffix(".docc") {
                let articles = try FileManager.default.contentsOfDirectory(
                    atPath: targetDirectory.appendingPathComponent(catalog).path
                )
                documents += articles.sorted().filter { $0.hasSuffix(".md") }.map {
                    "Sources/\(target)/\(catalog)/\($0)"
                }
            }
        }
        return documents
    }

    /// Type-checks `programs`, two at a time at most, each in a folder of its own under
    /// `directory`; returns each failing program's location with the compiler's output.
    static func check(
        _ programs: [DocSnippets.Program],
        with compiler: SnippetCompiler,
        in directory: URL
    ) async throws -> [(location: String, output: String)] {
        let width = max(1, min(2, ProcessInfo.processInfo.activeProcessorCount))
        return try await withThrowingTaskGroup(of: (Int, String?).self) { group in
            var failures: [(Int, String)] = []
            var next = 0
            func start() throws {
                let index = next
                let program = programs[index]
                let folder = directory.appendingPathComponent("\(index)")
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                group.addTask { (index, try await compiler.check(program, in: folder, deadline: deadline)) }
                next += 1
            }
            while next < min(width, programs.count) { try start() }
            while let finished = try await group.next() {
                if let output = finished.1 { failures.append((finished.0, output)) }
                if next < programs.count { try start() }
            }
            return failures.sorted { $0.0 < $1.0 }.map { (programs[$0.0].location, $0.1) }
        }
    }

    @Test("every swift snippet of the README and the DocC articles type-checks against the products")
    func everySnippetTypeChecks() async throws {
        var programs: [DocSnippets.Program] = []
        var fences = 0
        var snippets = 0
        for document in try Self.documents() {
            let text = try String(contentsOf: packageDirectory.appendingPathComponent(document), encoding: .utf8)
            fences +=
                text.components(separatedBy: "\n").filter { $0.trimmingCharacters(in: .whitespaces) == "```swift" }
                .count
            let parsed = DocSnippets(file: document, text: text)
            for problem in parsed.problems { Issue.record("\(problem)") }
            snippets += parsed.snippets.count
            programs += parsed.programs
        }
        // Every ```swift block is read, and there are some: a parser that lost them would pass.
        #expect(snippets == fences)
        try #require(!programs.isEmpty, "no snippet found in the README or the DocC articles")

        let compiler: SnippetCompiler
        do {
            compiler = try SnippetCompiler.locate()
        } catch {
            Issue.record("cannot type-check the documentation's snippets: \(error)")
            return
        }
        let directory = try makeTemporaryDirectory("doc-snippets")
        defer { try? FileManager.default.removeItem(at: directory) }
        for failure in try await Self.check(programs, with: compiler, in: directory) {
            Issue.record("the snippet at \(failure.location) does not type-check:\n\(failure.output)")
        }
    }

    /// An article of every kind of snippet, one of each broken, and where the broken ones are.
    static let sample = """
        # Sample

        <!-- snippet-prelude: let greeting = "hello" -->
        <!-- snippet-prelude:
        func shout(_ text: String) -> String { text.uppercased() }
        -->

        ```swift
        let loud = shout(greeting)
        ```

        <!-- snippet-continues -->
        ```swift
        let count: Int = loud.count
        ```

        ```swift
        import HotCore

        let wrong: Int = greeting
        ```

        <!-- snippet-skip: a fragment of a command line, not Swift -->
        ```swift
        hot sync --root /tmp
        ```

        <!-- snippet-manifest -->
        ```swift
        dependencies: [
            .package(url: "https://example.com/HotUpdate", from: "1.0.0"),
        ],
        targets: [
            .target(name: "App", dependencies: [.product(name: "HotUpdate", package: "HotUpdate")]),
        ]
        ```

        <!-- snippet-manifest -->
        ```swift
        dependencies: [
            .package(url: "https://example.com/HotUpdate", since: "1.0.0"),
        ]
        ```

        ## Later

        ```swift
        let stray = shout(loud)
        ```

        """

    @Test("a broken snippet fails with its file, line and the compiler's message; the others pass")
    func brokenSnippetIsReported() async throws {
        let sample = DocSnippets(file: "Sample.md", text: Self.sample)
        #expect(sample.problems == [])
        #expect(sample.snippets.count == 7)
        // The two first snippets are one program; the skipped one makes none.
        #expect(
            sample.programs.map(\.location) == [
                "Sample.md:9", "Sample.md:18", "Sample.md:30", "Sample.md:40", "Sample.md:48",
            ]
        )

        let compiler = try SnippetCompiler.locate()
        let directory = try makeTemporaryDirectory("doc-snippets-sample")
        defer { try? FileManager.default.removeItem(at: directory) }
        let failures = try await Self.check(sample.programs, with: compiler, in: directory)
        #expect(failures.map(\.location) == ["Sample.md:18", "Sample.md:40", "Sample.md:48"], "\(failures)")
        // Each is reported at its line in the article, with the compiler's error.
        let output = Dictionary(failures, uniquingKeysWith: { first, _ in first })
        #expect(output["Sample.md:18"]?.contains("Sample.md:20:") == true, "\(output)")
        #expect(output["Sample.md:18"]?.contains("cannot convert value of type 'String'") == true)
        #expect(output["Sample.md:40"]?.contains("Sample.md:41:") == true, "\(output)")
        // A name of an earlier snippet is not seen by one that does not continue it, nor a
        // prelude by a snippet of a later section.
        #expect(output["Sample.md:48"]?.contains("cannot find 'loud' in scope") == true, "\(output)")
        #expect(output["Sample.md:48"]?.contains("cannot find 'shout' in scope") == true, "\(output)")
    }

    @Test("the compiler and the modules are found beside the test binary; a target not built is an error")
    func locatesTheBuild() throws {
        let compiler = try SnippetCompiler.locate()
        #expect(FileManager.default.isExecutableFile(atPath: compiler.compiler.path))
        // The products' modules are searched, in the build folder this binary runs from.
        let products = Bundle.main.bundleURL.deletingLastPathComponent().resolvingSymlinksInPath().path
        #expect(compiler.flags.contains { $0.hasSuffix("/Modules") && $0.hasPrefix(products) }, "\(compiler.flags)")
        #expect(
            FileManager.default.fileExists(
                atPath: compiler.manifestAPI.appendingPathComponent("PackageDescription.swiftmodule").path
            )
        )
        #expect(throws: SnippetCompiler.NotFound.self) { try SnippetCompiler.locate(module: "NoSuchTarget") }
    }

    @Test("a marker that cannot be read is reported where it is")
    func badMarkersAreReported() {
        let text = """
            <!-- snippet-skip: -->
            ```swift
            x
            ```
            <!-- snippet-continues -->
            ```swift
            let a = 1
            ```
            <!-- snippet-manifest -->
            ```sh
            hot status
            ```
            <!-- snippet-later -->
            <!-- snippet-manifest -->
            """
        let problems = DocSnippets(file: "Bad.md", text: text).problems
        #expect(
            problems == [
                "Bad.md:1: snippet-skip without a reason",
                "Bad.md:9: a snippet marker before a block that is not ```swift",
                "Bad.md:13: an unknown marker snippet-later",
                "Bad.md:14: a snippet marker with no snippet after it",
                "Bad.md:6: snippet-continues needs a checked Swift snippet before it",
            ]
        )
    }
}
