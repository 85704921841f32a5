import Foundation
import HotCore
import HotTesting
import Logging
import Testing

/// What the store asked of a commit hook, and what the metadata store held at that moment.
private actor HookLog {
    struct Commit: Equatable {
        /// The generations of the snapshots before and after.
        var previous: Int
        var next: Int
        /// The generation the metadata store held while the hook ran.
        var stored: Int
        /// The files of every active version in `next`, read through the context.
        var files: [String]
    }

    private(set) var commits: [Commit] = []
    /// The generations leftovers were removed for, in order.
    private(set) var removals: [Int] = []

    func record(_ commit: Commit) { commits.append(commit) }
    func recordRemoval(_ generation: Int) { removals.append(generation) }
}

private struct RecordingHook: StoreCommitHook {
    let log: HookLog
    let store: FakeMetadataStore

    func willCommit(_ commit: StoreCommitContext) async {
        let stored = (try? await store.load().generation) ?? -1
        var files: [String] = []
        for record in commit.next.packages.values.sorted(by: { $0.id < $1.id }) {
            guard let active = record.active else { continue }
            files += (try? await commit.fileList(forVersionPath: active.path).files.map(\.path)) ?? ["unreadable"]
        }
        await log.record(
            HookLog.Commit(previous: commit.previous.generation, next: commit.generation, stored: stored, files: files)
        )
    }

    func removeLeftovers(keeping generation: Int, root: URL, logger: Logger) async {
        await log.recordRemoval(generation)
    }
}

@Suite("Store commit hooks")
struct StoreCommitHookTests {
    @Test(
        "every commit runs the hooks before the store file is replaced, with both snapshots and the file lists; leftovers go after each commit and at the first sweep"
    )
    func hooksRunInEveryCommit() async throws {
        let root = try ScratchDirectory.make("hooks")
        defer { try? FileManager.default.removeItem(at: root) }
        let transport = FakeTransport()
        let verifier = FakeVerifier()
        let store = FakeMetadataStore()
        let log = HookLog()
        var configuration = UpdaterConfiguration(
            root: root,
            transport: transport,
            unarchiver: FakeUnarchiver(),
            verifier: verifier,
            store: store,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        configuration.commitHooks = [RecordingHook(log: log, store: store)]
        let updater = Updater(configuration: configuration)

        for (version, files) in [("1", ["a.txt": "1"]), ("2", ["a.txt": "2", "b.txt": "2"])] {
            let bytes = try FakeArchive.make(files)
            let url = try #require(URL(string: "https://cdn.test/p-\(version).zip"))
            await transport.serve(bytes, at: url)
            _ = try await updater.install(
                PackageDescriptor(
                    id: "p",
                    version: version,
                    url: url,
                    size: Int64(bytes.count),
                    sha256: verifier.digest(of: bytes, using: .sha256)
                )
            )
        }
        _ = try await updater.installedPackages()  // reading commits nothing

        let commits = await log.commits
        let generation = try await updater.currentSnapshot().generation
        #expect(commits.count == generation)
        for (position, commit) in commits.enumerated() {
            #expect(commit.previous == position)
            #expect(commit.next == position + 1)
            #expect(commit.stored == commit.previous, "the hook ran after the store file was replaced")
        }
        #expect(commits.last?.files == ["a.txt", "b.txt"])
        #expect(commits.contains { $0.files == ["a.txt"] })
        // The first change sweeps (generation 0), then every commit removes what older ones left.
        #expect(await log.removals == Array(0...generation))
    }
}
