import ArgumentParser
import Foundation
import HotManifest
import HotPublish

/// `hot shard --repo DIR [--channel NAME]`
struct Shard: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List a channel's packages in shards, so that a change to one package costs one shard.",
        discussion: """
            The packages go into up to 256 shards by the hash of their id \
            (manifests/shards/<sha256>.json, which never change), named by a small top \
            document (top.json beside the manifest); `hot sign` signs it, writes the manifest \
            of every package for clients that predate shards, and a timestamp naming the top \
            document. A client then downloads the top document and the shards whose hash \
            changed, and `hot pack` and `hot release` read and write one shard. A channel is \
            sharded on its own once an edit leaves it with 1,000 packages; it stays sharded.
            """
    )

    @OptionGroup var repository: RepositoryOptions

    func run() async throws {
        try await runReportingErrors {
            guard let change = try repository.library.shard(channel: repository.channel) else {
                print("\(repository.files.manifestPath(channel: repository.channel)) is sharded already")
                return
            }
            repository.report(change)
        }
    }
}
