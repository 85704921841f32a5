import Foundation
import HotCore

/// One named check of a conformance suite: a contract of a HotCore protocol, tested against
/// an implementation through its public API.
///
/// A suite (``TransportConformance``, ``UnarchiverConformance``, ``MetadataStoreConformance``,
/// ``VerifierConformance``, ``AssetResolverConformance``) is a value built from a factory of
/// the implementation under test; its `checks` are independent: each makes its own
/// implementation and fixtures in a fresh temporary directory, and removes them when it ends,
/// so checks may run in parallel and in any order.
///
/// With Swift Testing, one test function runs every check as an argument, so each shows up,
/// passes and fails on its own:
///
/// ```swift
/// import HotTesting
/// import Testing
///
/// let suite = MetadataStoreConformance { _ in MetadataStoreConformance.Subject(store: MyStore()) }
///
/// @Test(arguments: suite.checks)
/// func conforms(_ check: ConformanceCheck) async throws {
///     try await check.run()
/// }
/// ```
///
/// With XCTest, run them in a loop: `for check in suite.checks { try await check.run() }`.
public struct ConformanceCheck: Sendable, CustomStringConvertible {
    /// The suite this check belongs to (`"MetadataStore"`, `"Unarchiver"` …).
    public let suite: String
    /// The check's name, unique within its suite.
    public let name: String
    /// The contract the check holds the implementation to, in one sentence.
    public let contract: String

    private let body: @Sendable () async throws -> Void

    /// Creates a check. Suites make their own; this is public so a suite of yours can use the same shape.
    ///
    /// - Parameters:
    ///   - suite: The suite's name.
    ///   - name: The check's name.
    ///   - contract: The contract it holds the implementation to.
    ///   - body: Runs the check; throws ``ConformanceFailure`` (or any error) when the contract is broken.
    public init(
        suite: String,
        name: String,
        contract: String,
        body: @escaping @Sendable () async throws -> Void
    ) {
        self.suite = suite
        self.name = name
        self.contract = contract
        self.body = body
    }

    /// Runs the check.
    ///
    /// - Throws: ``ConformanceFailure`` naming the suite, the check, the contract broken and
    ///   what the implementation did instead. Any other error the implementation throws where
    ///   the contract expects success is reported the same way.
    public func run() async throws {
        do {
            try await body()
        } catch let violation as Violation {
            throw ConformanceFailure(suite: suite, check: name, contract: contract, detail: violation.detail)
        } catch let failure as ConformanceFailure {
            throw failure
        } catch let error as HotUpdateError {
            throw ConformanceFailure(
                suite: suite,
                check: name,
                contract: contract,
                detail: "unexpected error: \(error.detailedDescription()) [code \(error.code)]"
            )
        } catch {
            throw ConformanceFailure(
                suite: suite,
                check: name,
                contract: contract,
                detail: "unexpected error: \(error)"
            )
        }
    }

    /// `Suite: name`, as Swift Testing shows the argument.
    public var description: String { "\(suite): \(name)" }
}

/// A broken contract, reported by ``ConformanceCheck/run()``.
public struct ConformanceFailure: Error, Sendable, CustomStringConvertible {
    /// The suite, such as `"Unarchiver"`.
    public var suite: String
    /// The check that failed.
    public var check: String
    /// The contract the implementation broke.
    public var contract: String
    /// What the implementation did instead.
    public var detail: String

    /// Creates a failure.
    public init(suite: String, check: String, contract: String, detail: String) {
        self.suite = suite
        self.check = check
        self.contract = contract
        self.detail = detail
    }

    /// `Suite conformance, check: contract. Broken: detail`.
    public var description: String {
        "\(suite) conformance, \(check): \(contract). Broken: \(detail)"
    }
}

/// What a check body throws; ``ConformanceCheck/run()`` adds the suite, check and contract.
struct Violation: Error {
    var detail: String
    init(_ detail: String) { self.detail = detail }
}

/// What the suites share: scratch directories, expectations, tree snapshots.
enum Conformance {
    /// Runs `body` with a fresh directory, removed afterwards (write permission restored first).
    static func withScratch<T>(_ suite: String, _ body: (URL) async throws -> T) async throws -> T {
        let url: URL
        do {
            url = try ScratchDirectory.make("\(suite)Conformance")
        } catch {
            throw Violation("the suite cannot create its scratch directory: \(error)")
        }
        defer { remove(url) }
        return try await body(url)
    }

    /// Removes a tree, making its directories writable first.
    static func remove(_ url: URL) {
        if let walker = FileManager.default.enumerator(atPath: url.path) {
            while let relative = walker.nextObject() as? String {
                let path = url.appendingPathComponent(relative).path
                if walker.fileAttributes?[.type] as? FileAttributeType == .typeDirectory {
                    try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
                }
            }
        }
        try? FileManager.default.removeItem(at: url)
    }

    /// Runs `body`, which must throw a ``HotUpdateError`` with one of `codes`.
    ///
    /// - Returns: The error.
    /// - Throws: ``Violation`` when it succeeds, throws something else, or another code.
    @discardableResult
    static func expectError<T>(
        _ codes: Set<HotUpdateError.Code>,
        _ what: String,
        _ body: () async throws -> T
    ) async throws -> HotUpdateError {
        let expected = codes.map(\.description).sorted().joined(separator: " or ")
        let result: T
        do {
            result = try await body()
        } catch let error as HotUpdateError {
            guard codes.contains(error.code) else {
                throw Violation(
                    "\(what) threw HotUpdateError code \(error.code), expected \(expected): \(error.detailedDescription())"
                )
            }
            return error
        } catch {
            throw Violation("\(what) threw \(type(of: error)) (\(error)), expected a HotUpdateError \(expected)")
        }
        throw Violation("\(what) succeeded (returned \(result)), expected a HotUpdateError \(expected)")
    }

    /// Throws a ``Violation`` with `detail` unless `condition` holds.
    static func require(_ condition: Bool, _ detail: @autoclosure () -> String) throws {
        if !condition { throw Violation(detail()) }
    }

    /// Runs `body` with a generous time limit that only turns a hang into a failure:
    /// nothing is measured, and an implementation that is merely slow passes.
    static func withHangGuard<T: Sendable>(
        _ what: String,
        seconds: Int = 60,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try? await Task.sleep(for: .seconds(seconds))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else {
                throw Violation("\(what) had not ended after \(seconds) s")
            }
            return value
        }
    }

    /// A deterministic pseudo-random byte sequence (xorshift), so fixtures are the same every run.
    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed | 1
        var out = [UInt8]()
        out.reserveCapacity(count)
        while out.count < count {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            withUnsafeBytes(of: state.littleEndian) { out.append(contentsOf: $0.prefix(count - out.count)) }
        }
        return out
    }

    /// Writes `bytes` to `relative` under `root`, creating directories.
    static func write(_ bytes: [UInt8], _ relative: String, under root: URL) throws {
        let url = root.appendingPathComponent(relative)
        try FileManager.default.createDirectory(
            at: url.deletingLastPathComponent(),
            withIntermediateDirectories: true
        )
        try Data(bytes).write(to: url)
    }

    /// What a tree holds: relative path to `dir`, `link -> target` or `file <size> <fnv>`,
    /// read without following symbolic links.
    static func tree(_ root: URL) -> [String: String] {
        var result: [String: String] = [:]
        func walk(_ directory: URL, _ prefix: String) {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return }
            for name in names {
                let url = directory.appendingPathComponent(name)
                let relative = prefix + name
                let type = (try? FileManager.default.attributesOfItem(atPath: url.path))?[.type] as? FileAttributeType
                switch type {
                case .typeDirectory?:
                    result[relative] = "dir"
                    walk(url, relative + "/")
                case .typeSymbolicLink?:
                    let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: url.path)) ?? "?"
                    result[relative] = "link -> \(target)"
                case .typeRegular?:
                    let data = (try? Data(contentsOf: url)) ?? Data()
                    result[relative] = "file \(data.count) \(FNV1a.hash(data))"
                default:
                    result[relative] = "other"
                }
            }
        }
        walk(root, "")
        return result
    }

    /// The differences between two ``tree(_:)`` results, for messages.
    static func difference(_ before: [String: String], _ after: [String: String]) -> String {
        let added = after.keys.filter { before[$0] == nil }.sorted()
        let removed = before.keys.filter { after[$0] == nil }.sorted()
        let changed = after.keys.filter { before[$0] != nil && before[$0] != after[$0] }.sorted()
        var parts: [String] = []
        if !added.isEmpty { parts.append("added \(added)") }
        if !removed.isEmpty { parts.append("removed \(removed)") }
        if !changed.isEmpty { parts.append("changed \(changed)") }
        return parts.joined(separator: "; ")
    }
}

/// 64-bit FNV-1a, for comparing file contents in messages and as a digest algorithm no
/// implementation knows.
enum FNV1a {
    static func hash<Bytes: Sequence>(_ bytes: Bytes) -> UInt64 where Bytes.Element == UInt8 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }
}
