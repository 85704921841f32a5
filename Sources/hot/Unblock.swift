import ArgumentParser
import Foundation
import HotCore

/// `hot unblock ID VERSION --root DIR`
struct Unblock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Let a store download a version a failed launch blocked.",
        discussion: """
            A guarded package's version that a launch never confirmed is rolled back and \
            blocked: no sync downloads or restores it again. After unblocking, the next sync \
            that offers it downloads it and the next launch tries it again. `hot status` lists \
            blocked versions. Exits 1 when that version is not blocked.
            """
    )

    @Argument(help: "The package id.")
    var id: String

    @Argument(help: "The blocked version.")
    var version: String

    @OptionGroup var storeOptions: StoreOptions

    func run() async throws {
        try await runReportingErrors {
            try storeOptions.requireStore()
            try await storeOptions.makeUpdater().launch.unblock(packageID: id, version: version)
            print("unblocked \(id) \(version)")
        }
    }
}
