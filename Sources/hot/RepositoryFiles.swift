import ArgumentParser
import Foundation
import HotArchive
import HotCore
import HotManifest
import HotPublish
import HotStore
import HotVerify

/// Options naming a repository and one of its channels.
struct RepositoryOptions: ParsableArguments {
    @Option(help: "The repository directory.")
    var repo: String

    @Option(help: "The channel (its manifest is channels/NAME/manifest.json); none for manifest.json at the root.")
    var channel: String?

    var files: RepositoryFiles { RepositoryFiles(root: directoryURL(repo)) }

    /// The repository, as the library changes it.
    var library: Repository { Repository(directory: directoryURL(repo)) }

    /// Prints what a change did, and notes on stderr the file it left unsigned.
    func report(_ change: Repository.Change) {
        printNote("\(change.unsignedPath) changed; sign it with `hot sign` before publishing")
        print(change.summary)
    }

    /// Validates the channel name.
    func validate() throws {
        if let channel {
            do {
                try PackageDescriptor.validateComponent(channel, what: "channel")
            } catch let error as HotUpdateError {
                throw ValidationError(error.message)
            }
        }
    }
}
