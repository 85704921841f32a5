import Dispatch
import Foundation
import HotCore

/// The conformance suite of `AssetResolver`, through its public API.
///
/// Each check writes a directory fixture, asks the factory for a resolver over it, and
/// resolves names given exactly as the files' relative paths (with their extension), which
/// every resolver answers the same way whatever else it does with names (scale variants,
/// extension preferences).
///
/// The checks, each a ``ConformanceCheck``:
/// - every fixture file's name resolves to that file, inside the directory, with its content
///   and with the origin the suite was given;
/// - missing names, directories and empty names resolve to nil;
/// - names with `..`, absolute paths, and names reaching through a symbolic link that points
///   out of the directory never resolve to a file outside it;
/// - `resolve` answers the same from many threads at once as it does alone, and the same
///   every time.
///
/// ```swift
/// let suite = AssetResolverConformance(origin: .package(id: "images", version: "3")) { directory in
///     try DirectoryAssetResolver(directory: directory, origin: .package(id: "images", version: "3"))
/// }
/// ```
public struct AssetResolverConformance: Sendable {
    /// The origin every resolved asset must report.
    public let origin: ResolvedAsset.Origin
    /// Makes the resolver under test over a directory the suite has filled.
    public let makeResolver: @Sendable (_ directory: URL) async throws -> any AssetResolver

    /// Creates the suite.
    ///
    /// - Parameters:
    ///   - origin: The origin every resolved asset must report.
    ///   - makeResolver: Makes a resolver over the directory given, whose files are the fixture;
    ///     called once per check.
    public init(
        origin: ResolvedAsset.Origin,
        makeResolver: @escaping @Sendable (_ directory: URL) async throws -> any AssetResolver
    ) {
        self.origin = origin
        self.makeResolver = makeResolver
    }

    static let suite = "AssetResolver"

    /// The fixture: path to content.
    static let files: [String: [UInt8]] = [
        "readme.txt": Array("read me".utf8),
        "config.json": Array("{\"theme\": \"dark\"}".utf8),
        "images/icon.png": Conformance.bytes(700, seed: 3),
        "images/deep/nested/banner.jpg": Conformance.bytes(1200, seed: 4),
        "web/index.html": Array("<h1>hello</h1>".utf8),
        "unicode/caf\u{e9}.txt": Array("café".utf8),
    ]

    /// Every check of the suite.
    public var checks: [ConformanceCheck] {
        let origin = origin
        return [
            check(
                "names resolve to their files",
                "each file's relative path resolves to that file inside the directory, with the right origin"
            ) {
                resolver,
                root,
                _ in
                for (name, content) in Self.files {
                    guard let asset = resolver.resolve(name) else { throw Violation("'\(name)' resolved to nil") }
                    try Self.requireInside(asset, root, name)
                    try Conformance.require(
                        asset.origin == origin,
                        "'\(name)' has origin \(asset.origin), expected \(origin)"
                    )
                    let data = try? Data(contentsOf: asset.url)
                    try Conformance.require(
                        data.map(Array.init) == content,
                        "'\(name)' resolved to \(asset.url.path), which does not hold its content"
                    )
                }
            },
            check(
                "missing names resolve to nil",
                "names of no file (missing files, directories, empty names) resolve to nil"
            ) {
                resolver,
                _,
                _ in
                for name in [
                    "missing.txt", "images/missing.png", "images/deep/missing.jpg", "nowhere/readme.txt", "images",
                    "images/deep", "", "readme.txt/x",
                ] {
                    if let asset = resolver.resolve(name) {
                        throw Violation("'\(name)' resolved to \(asset.url.path), expected nil")
                    }
                }
            },
            check(
                "never escapes the directory",
                "names with '..', absolute paths and links pointing out never resolve to a file outside the directory"
            ) {
                resolver,
                root,
                outside in
                let secret = outside.appendingPathComponent("secret.txt").path
                let names = [
                    "../outside/secret.txt", "images/../../outside/secret.txt", "./../outside/secret.txt",
                    "images/deep/../../../outside/secret.txt", "..", "../", secret, "/" + secret, "//" + secret,
                    "escape-dir/secret.txt", "escape-link.txt", "..\\outside\\secret.txt", "%2e%2e/outside/secret.txt",
                ]
                for name in names {
                    guard let asset = resolver.resolve(name) else { continue }
                    try Self.requireInside(asset, root, name)
                }
            },
            check(
                "concurrent resolves agree",
                "resolve is thread-safe: many threads at once get the answers one thread gets, every time"
            ) {
                resolver,
                _,
                _ in
                let names = Self.files.keys.sorted() + ["missing.txt", "../outside/secret.txt", "images"]
                let expected = names.map { resolver.resolve($0) }
                let mismatches = Mismatches()
                DispatchQueue.concurrentPerform(iterations: 16) { worker in
                    for round in 0..<200 {
                        let index = (worker + round) % names.count
                        if resolver.resolve(names[index]) != expected[index] { mismatches.add(names[index]) }
                    }
                }
                let tasks = try await withThrowingTaskGroup(of: Int.self) { group in
                    for worker in 0..<16 {
                        group.addTask {
                            var wrong = 0
                            for round in 0..<100
                            where resolver.resolve(names[(worker * 3 + round) % names.count])
                                != expected[(worker * 3 + round) % names.count]
                            {
                                wrong += 1
                            }
                            return wrong
                        }
                    }
                    return try await group.reduce(0, +)
                }
                let wrong = mismatches.names
                try Conformance.require(
                    wrong.isEmpty && tasks == 0,
                    "concurrent resolves differed from sequential ones for \(wrong.sorted()) (\(tasks) in tasks)"
                )
            },
        ]
    }

    private func check(
        _ name: String,
        _ contract: String,
        _ body: @escaping @Sendable (any AssetResolver, _ root: URL, _ outside: URL) async throws -> Void
    ) -> ConformanceCheck {
        let make = makeResolver
        return ConformanceCheck(suite: Self.suite, name: name, contract: contract) {
            try await Conformance.withScratch(Self.suite) { scratch in
                let root = scratch.appendingPathComponent("assets", isDirectory: true)
                let outside = scratch.appendingPathComponent("outside", isDirectory: true)
                for (path, content) in Self.files { try Conformance.write(content, path, under: root) }
                try Conformance.write(Array("secret".utf8), "secret.txt", under: outside)
                try FileManager.default.createSymbolicLink(
                    atPath: root.appendingPathComponent("escape-dir").path,
                    withDestinationPath: "../outside"
                )
                try FileManager.default.createSymbolicLink(
                    atPath: root.appendingPathComponent("escape-link.txt").path,
                    withDestinationPath: "../outside/secret.txt"
                )
                let resolver = try await make(root)
                try await body(resolver, root, outside)
            }
        }
    }

    /// Requires the resolved file, symbolic links resolved, to be a regular file inside `root`.
    static func requireInside(_ asset: ResolvedAsset, _ root: URL, _ name: String) throws {
        try Conformance.require(asset.url.isFileURL, "'\(name)' resolved to \(asset.url), not a file URL")
        let real = asset.url.resolvingSymlinksInPath().standardizedFileURL.path
        let base = root.resolvingSymlinksInPath().standardizedFileURL.path
        try Conformance.require(
            real.hasPrefix(base + "/"),
            "'\(name)' resolved to \(real), outside the directory \(base)"
        )
    }
}

/// Names collected from many threads.
private final class Mismatches: Sendable {
    private let collected = Locked<Set<String>>([])

    func add(_ name: String) {
        collected.withLock { _ = $0.insert(name) }
    }

    var names: Set<String> { collected.value }
}
