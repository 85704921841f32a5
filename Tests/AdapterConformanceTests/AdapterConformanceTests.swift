import Foundation
import HotCore
import HotTesting
import Testing

/// A test target outside the library modules, seeing HotCore and HotTesting as any adopter
/// does (no `@testable`): its own adapter passes the suite, and broken ones fail it.
@Suite struct AdapterConformanceTests {
    static let inMemory = MetadataStoreConformance { _ in
        MetadataStoreConformance.Subject(store: InMemoryMetadataStore())
    }

    @Test(arguments: inMemory.checks)
    func inMemoryStoreConforms(_ check: ConformanceCheck) async throws {
        try await check.run()
    }

    /// Runs every check of `checks` and returns the names of those that failed, each with its failure.
    static func failures(of checks: [ConformanceCheck]) async -> [String: ConformanceFailure] {
        var failed: [String: ConformanceFailure] = [:]
        for check in checks {
            do {
                try await check.run()
            } catch let failure as ConformanceFailure {
                failed[check.name] = failure
            } catch {
                Issue.record("\(check.name) threw \(error), not a ConformanceFailure")
            }
        }
        return failed
    }

    @Test func mergingStoreFailsTheSuite() async throws {
        let suite = MetadataStoreConformance { _ in MetadataStoreConformance.Subject(store: MergingMetadataStore()) }
        let failed = await Self.failures(of: suite.checks)
        #expect(Set(failed.keys) == ["commit replaces", "relative paths only"])
        let failure = try #require(failed["relative paths only"])
        #expect(failure.suite == "MetadataStore")
        #expect(failure.description.contains("only"))
        #expect(failure.detail.contains("succeeded"))
    }

    @Test func escapingResolverFailsTheSuite() async throws {
        let suite = AssetResolverConformance(origin: .bundle) { NaiveAssetResolver(directory: $0) }
        let failed = await Self.failures(of: suite.checks)
        #expect(Set(failed.keys) == ["never escapes the directory"])
        #expect(failed["never escapes the directory"]?.detail.contains("outside the directory") == true)
    }

    @Test func leakyUnarchiverFailsTheSuite() async throws {
        let suite = UnarchiverConformance { LeakyUnarchiver() }
        let failed = await Self.failures(of: suite.checks)
        let hostile = suite.checks.map(\.name).filter { $0.hasPrefix("hostile: ") }
        #expect(!hostile.isEmpty)
        for name in hostile {
            #expect(failed[name] != nil, "\(name) passed")
        }
        let slip = try #require(failed["hostile: zip-slip ../"])
        #expect(slip.detail.contains("partial.txt"))
        #expect(failed["valid archive extracts byte-identical"] != nil)
        #expect(failed["listing refuses a non-archive"] == nil)
    }

    @Test func carelessTransportFailsTheSuite() async throws {
        let suite = TransportConformance(serve: TransportConformance.fileURLs) { CarelessTransport() }
        let failed = await Self.failures(of: suite.checks)
        #expect(
            Set(failed.keys) == [
                "byte ranges", "byte limit enforced", "body streams in chunks", "cancelling the body ends it",
                "cancelling the task ends the body",
            ]
        )
        #expect(failed["byte ranges"]?.detail.contains("206") == true)
    }
}
